#!/usr/bin/env bash
# Real architectures exported to ONNX by PyTorch, imported by ingot: torchvision's ResNet-18,
# MobileNetV2 and ResNet-50, a transformer encoder block, BERT-base's encoder and GPT-2 small's
# blocks (random weights; nothing is downloaded), checked against ONNX Runtime and PyTorch and
# timed beside ONNX Runtime, PyTorch eager and torch.compile, each in its own loop, 2 threads:
# batch 1, and ResNet-50 and MobileNetV2 at 32, BERT-base at 8; import + compile cold and warm.
#   1. installs torch, torchvision, onnx and onnxruntime into the benchmark environment
#      ($INGOT_BENCH_VENV, default ~/.cache/ingot-bench-venv) and runs bench/onnx_export.py there;
#   2. installs ingot into build/python-venv (scripts/python-test.sh makes it) and runs
#      bench/onnx_models.py: writes bench/results/onnx_models.json and prints the table, and
#      exports each imported model again with ml.onnx.save; ONNX Runtime is timed again there in
#      rounds alternating with ingot's loop (the benchmark environment's python, a child process);
#   3. bench/onnx_roundtrip.py (benchmark environment): ONNX Runtime runs the original and
#      ingot's re-export on the same input; the difference goes into the JSON.
#
#   ./scripts/onnx_models.sh [--no-install] [--reps N] [--no-torch-compile]
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2
install=1 reps=10 torch_compile=
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --reps) reps="$2"; shift ;;
    --no-torch-compile) torch_compile=--no-torch-compile ;;
    *) echo "usage: scripts/onnx_models.sh [--no-install] [--reps N] [--no-torch-compile]" >&2; exit 2 ;;
  esac
  shift
done
. scripts/bench_env.sh
bench_env "$install" numpy onnx onnxruntime torch torchvision
work=build/onnx-models
rm -rf "$work" && mkdir -p "$work" bench/results
"$venv/bin/python" bench/onnx_export.py --out "$work" --reps "$reps" $torch_compile
build/python-venv/bin/python bench/onnx_models.py --dir "$work" --reps "$reps" --ort-python "$venv/bin/python"
"$venv/bin/python" bench/onnx_roundtrip.py --dir "$work"
cp "$work/onnx_models.json" bench/results/onnx_models.json
