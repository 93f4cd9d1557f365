#!/usr/bin/env bash
# Configures and builds ingot in build/<kind> (release | asan). Warnings are errors.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-release}"
case "$kind" in
  release) flags=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan) flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DINGOT_SANITIZE=ON) ;;
  *) echo "usage: scripts/build.sh [release|asan]" >&2; exit 2 ;;
esac
cmake -S . -B "build/$kind" -G Ninja -DINGOT_WERROR=ON "${flags[@]}" >/dev/null
cmake --build "build/$kind" -j "$(nproc)"
