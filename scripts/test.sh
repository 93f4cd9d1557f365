#!/usr/bin/env bash
# The whole test suite: installs dependencies, then builds and runs every test twice, as an
# optimized build and under AddressSanitizer + UndefinedBehaviorSanitizer, and the Python
# package's tests after the optimized build.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
ctest --test-dir build/release --output-on-failure -j "$(nproc)"
# The Python package: pip install . into build/python-venv, then pytest python/tests.
scripts/python-test.sh
scripts/build.sh asan
# The one full-size (32x3x224x224) reference CNN evaluation is skipped under the sanitizers.
INGOT_SKIP_SLOW=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$(nproc)"
