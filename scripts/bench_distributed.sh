#!/usr/bin/env bash
# Data-parallel training and collectives on this machine (README "Distributed (MPI)"):
#   1. the bundled MLP (batch 128) and CNN (batch 32, 3x32x32) training steps as one process with 2
#      threads, then as 2 ranks x 1 thread (data parallel), with gradient overlap on and off;
#   2. all-reduce bandwidth, ingot's against MPI_Allreduce, on 2 ranks.
# Figures -> bench/results/distributed_{single,ranks,allreduce}.json and stdout.
#   ./scripts/bench_distributed.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
[ "${1:-}" = "--quick" ] && quick=(--quick)
command -v mpirun >/dev/null || { echo "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)" >&2; exit 2; }
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DINGOT_WERROR=ON >/dev/null
cmake --build build-bench --target bench_distributed -j "$(nproc)"
mkdir -p bench/results
root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
echo "== 1 process x 2 threads"
OMP_NUM_THREADS=2 build-bench/bench_distributed train --threads 2 "${quick[@]}" --out bench/results/distributed_single.json
echo "== 2 ranks x 1 thread (data parallel)"
OMP_NUM_THREADS=1 mpirun --oversubscribe "${root[@]}" -np 2 build-bench/bench_distributed train --threads 1 "${quick[@]}" \
  --out bench/results/distributed_ranks.json
echo "== all-reduce bandwidth, 2 ranks"
mpirun --oversubscribe "${root[@]}" -np 2 build-bench/bench_distributed allreduce "${quick[@]}" \
  --out bench/results/distributed_allreduce.json
