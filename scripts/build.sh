#!/usr/bin/env bash
# Configures and builds ingot in build/<kind> (release | asan). Warnings are errors.
#   release: the default compiler (g++), optimized.
#   asan:    clang, AddressSanitizer + UndefinedBehaviorSanitizer, and libFuzzer's coverage
#            instrumentation (INGOT_FUZZ), so the same build links the parser fuzz targets with
#            libFuzzer and ctest fuzzes each parser for INGOT_FUZZ_SMOKE_SECONDS (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
case "$kind" in
  release) flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DINGOT_SANITIZE=ON -DINGOT_FUZZ=ON
               -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++) ;;
  *) echo "usage: scripts/build.sh [release|asan]" >&2; exit 2 ;;
esac
cmake -S . -B "build/$kind" -G Ninja -DINGOT_WERROR=ON "${flags[@]}" >/dev/null
cmake --build "build/$kind" -j "$(nproc)"
