#!/usr/bin/env bash
# The CPU backend and function-compile benchmarks, one command:
#   1. configures and builds build-bench (Release, warnings as errors) and runs bench_cpu
#      -> bench/results/cpu.json, bench_fncompile -> bench/results/fncompile.json (and, where
#      build/python-venv exists, bench/bench_fncompile.py -> bench/results/fncompile_py.json) and
#      bench_train (training steps) -> bench/results/train.json and bench_graph_opt (node counts
#      and memory plans, inference and training) -> bench/results/graph_opt.json
#   2. installs the Python peers from PyPI into a virtual environment when it can (each install
#      capped in time; a failure only means that peer prints "not installed") and runs
#      bench/peers.py in its own process -> bench/results/peers.json, and bench/peers_train.py
#      (training steps) -> bench/results/peers_train.json
#   3. where build/python-venv exists, scripts/bench_vision.sh (ResNet-18/50 and MobileNetV2
#      against PyTorch eager and ONNX Runtime; torch.compile skipped, its first calls take minutes)
#      -> bench/results/vision.json and the README's "## Vision models" section
#   4. rewrites the README "## Benchmarks" section with bench/make_table.py, which also writes
#      bench/results/summary.json (every ratio, each file's machine and versions), and prints the
#      ratio table.
#
#   ./scripts/bench.sh [--quick] [--no-peers] [--no-install]
#   (--no-peers re-measures ingot only and keeps the peers' last figures)
# Environment: INGOT_BENCH_VENV (default ~/.cache/ingot-bench-venv), INGOT_BENCH_INSTALL_TIMEOUT
# (seconds per pip install, default 240).
set -uo pipefail
cd "$(dirname "$0")/.."

quick=() peers=1 install=1
for a in "$@"; do
  case "$a" in
    --quick) quick=(--quick) ;;
    --no-peers) peers=0 ;;
    --no-install) install=0 ;;
    *) echo "usage: scripts/bench.sh [--quick] [--no-peers] [--no-install]" >&2; exit 2 ;;
  esac
done
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2
mkdir -p bench/results

echo "== build (build-bench)"
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DINGOT_WERROR=ON >/dev/null || exit 1
cmake --build build-bench --target bench_cpu bench_fncompile bench_train bench_graph_opt -j "$(nproc)" || exit 1

echo "== bench_cpu"
build-bench/bench_cpu "${quick[@]}" bench/results/cpu.json || exit 1

echo "== bench_fncompile"
build-bench/bench_fncompile "${quick[@]}" bench/results/fncompile.json || exit 1

echo "== bench_fncompile.py (Python's ml.compile, in build/python-venv)"
if [ -x build/python-venv/bin/python ] &&
  build/python-venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation . >/dev/null 2>&1; then
  build/python-venv/bin/python bench/bench_fncompile.py "${quick[@]}" --out bench/results/fncompile_py.json ||
    echo "bench_fncompile.py failed"
else
  echo "   skipped: build/python-venv is missing (./scripts/python-test.sh makes it) or pip install . failed"
fi

echo "== bench_train"
build-bench/bench_train "${quick[@]}" bench/results/train.json || exit 1

echo "== bench_graph_opt"
build-bench/bench_graph_opt "${quick[@]}" bench/results/graph_opt.json || exit 1

if [ "$peers" = 1 ]; then
  venv="${INGOT_BENCH_VENV:-$HOME/.cache/ingot-bench-venv}"
  cap="${INGOT_BENCH_INSTALL_TIMEOUT:-240}"
  py=python3
  if [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >/dev/null 2>&1; then py="$venv/bin/python"; fi
  if [ "$install" = 1 ]; then
    echo "== installing peers into $venv (each install capped at ${cap}s; failures are tolerated)"
    # PyPI only. torch from PyPI is the CUDA build and pulls the nvidia-* wheels (several GB); it
    # runs on the CPU all the same.
    for pkgs in "numpy" "onnx onnxruntime" "jax jaxlib" "torch" "mlx[cpu]"; do
      # shellcheck disable=SC2086
      if timeout "$cap" "$py" -m pip install -q $pkgs >/dev/null 2>&1; then echo "   $pkgs: ok"
      else echo "   $pkgs: not installed (pip failed or timed out)"; fi
    done
  fi
  if "$py" -c "import numpy" >/dev/null 2>&1; then
    echo "== peers ($py)"
    "$py" bench/peers.py "${quick[@]}" --out bench/results/peers.json || echo "peers.py failed"
    "$py" bench/peers_train.py "${quick[@]}" --out bench/results/peers_train.json || echo "peers_train.py failed"
  else
    echo "== peers: numpy is not importable, skipped"
    rm -f bench/results/peers.json bench/results/peers_train.json
  fi
else
  # --no-peers keeps the last peers' figures (bench/results/peers.json) for the table; the table
  # then states when each side was measured.
  :
fi

if [ "$peers" = 1 ] && [ -x build/python-venv/bin/python ]; then
  # ResNet-18, ResNet-50, MobileNetV2 against PyTorch and ONNX Runtime: its own section of the README.
  echo "== vision models (scripts/bench_vision.sh)"
  vision_args=(--no-compile)
  [ "$install" = 1 ] || vision_args+=(--no-install)
  [ ${#quick[@]} -gt 0 ] && vision_args+=(--quick)
  scripts/bench_vision.sh "${vision_args[@]}" || echo "bench_vision.sh failed"
fi

echo "== README"
python3 bench/make_table.py --cpu bench/results/cpu.json --peers bench/results/peers.json \
  --fncompile bench/results/fncompile.json --train bench/results/train.json \
  --peers-train bench/results/peers_train.json --graph-opt bench/results/graph_opt.json \
  --summary bench/results/summary.json --readme README.md --print-ratios || exit 1
