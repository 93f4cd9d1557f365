#!/usr/bin/env bash
# Attention against its peers, one command: bench/attention.py (ingot's attention pass and kernel,
# the same model unfused, ONNX Runtime, PyTorch's sdpa and PyTorch written out; GFLOP/s beside the
# library GEMM's peak) -> bench/results/attention.json and a Markdown table (README "Attention").
#   1. installs numpy, onnx, onnxruntime, torch and jax into the benchmark environment (as
#      scripts/bench.sh does);
#   2. installs ingot into build/python-venv (scripts/python-test.sh makes it) and runs the script
#      there with the benchmark environment's packages on the path (both are this python3's).
#
#   ./scripts/bench_attention.sh [--quick] [--no-install] [--train | --rows | --layers | --bound]
# --train: bench/attention_train.py instead (forward and backward at S 512 to 8192 against
# PyTorch's sdpa and PyTorch written out, with peak memory) -> bench/results/attention_train.json
# (README "Attention").
# --rows: bench/row_kernels.py instead (softmax, log_softmax, layer_norm, rms_norm and batch_norm
# on [64, 128, 1024] against a memcpy into a new tensor and PyTorch) -> bench/results/row_kernels.json
# (README "Row kernels against memory bandwidth").
# --layers: bench/transformer_layers.py instead (BERT-base layers and a GPT-2 small block through
# ingot's compile(fn) and zoo, ONNX Runtime, PyTorch eager, torch.compile and JAX jit, and a
# 4-layer encoder's training step) -> bench/results/transformer_layers.json and the README's
# "Transformer layers" table.
# --bound: bench/transformer_bound.py instead (each of those layers' bound with the library GEMM:
# its products as dnnl_sgemm takes them hot, plus its other kernels, against ONNX Runtime and JAX
# jit timed in alternating rounds; needs build/release/bench_gemm_shapes) ->
# bench/results/transformer_bound.json (README "Transformer layers").
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2
install=1 args=() script=bench/attention.py quick=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --no-install) install=0 ;;
    --train) script=bench/attention_train.py ;;
    --rows) script=bench/row_kernels.py ;;
    --layers) script=bench/transformer_layers.py args+=(--readme README.md) ;;
    --bound) script=bench/transformer_bound.py args+=(--json bench/results/transformer_bound.json) ;;
    *) echo "usage: scripts/bench_attention.sh [--quick] [--no-install] [--train | --rows | --layers | --bound]" >&2; exit 2 ;;
  esac
done
if [ "$quick" = 1 ]; then
  # transformer_bound's quick mode: the first row, 2 rounds of 3 calls (it has no --runs)
  if [ "$script" = bench/transformer_bound.py ]; then args+=(--quick); else args+=(--quick --runs 1 --reps 3); fi
fi
. scripts/bench_env.sh
bench_env "$install" numpy onnx onnxruntime torch jax
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# PYTHONPATH comes before the venv's own packages: the peers' numpy is the one imported (ingot does not
# link against NumPy, so any 1.x or 2.x does)
PYTHONPATH="$site" build/python-venv/bin/python "$script" "${args[@]}"
