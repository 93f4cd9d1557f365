#!/usr/bin/env bash
# The whole test suite: installs dependencies, then builds and runs every test twice, as an
# optimized build and under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
ctest --test-dir build/release --output-on-failure -j "$(nproc)"
scripts/build.sh asan
# The one full-size (32x3x224x224) reference CNN evaluation is skipped under the sanitizers.
INGOT_SKIP_SLOW=1 ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$(nproc)"
