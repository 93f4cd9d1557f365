#!/usr/bin/env bash
# Installs what building and testing ingot needs, from Debian's packages. Safe to re-run: it
# asks apt only for what is missing.
set -euo pipefail
# ccache: the Python package build (build/python) reuses build/release's objects through it.
packages=(g++ cmake ninja-build ccache libgtest-dev nlohmann-json3-dev libopenblas-dev libdnnl-dev)
# ONNX import (src/onnx_import): Debian's generated ONNX protobuf classes and libprotobuf.
packages+=(libonnx-dev libprotobuf-dev)
# .npz archives (src/io/npy.h, `ingot run --output out.npz`): libzip.
packages+=(libzip-dev pkg-config)
# ingot::distributed (src/distributed): Open MPI's library and headers, and mpirun for the
# multi-rank tests (ctest distributed_*, python/tests/test_distributed.py).
packages+=(libopenmpi-dev openmpi-bin)
# The sanitizer build (scripts/build.sh asan) is clang's: ASan, UBSan and libFuzzer's runtime.
packages+=(clang libclang-rt-14-dev)
# The Python package (scripts/python-test.sh) builds against Python's headers in a virtual
# environment; ask Debian for them only when the python3 on PATH lacks either.
if ! python3 -c 'import os, sysconfig, venv, ensurepip
assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' >/dev/null 2>&1; then
  packages+=(python3-dev python3-venv)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[deps] installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "[deps] ok: ${packages[*]}"
# Optional: compile(..., visualize=True) draws graphs with Graphviz's dot (the Python test renders
# SVG where it is installed, and checks the clear error otherwise). A failed install is not fatal.
if ! command -v dot >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq graphviz >/dev/null 2>&1 ||
     { $SUDO apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq graphviz >/dev/null 2>&1; }; then
    echo "[deps] ok: graphviz (optional)"
  else
    echo "[deps] graphviz (optional) not installed: visualize=True renders only the 'dot' format"
  fi
fi
