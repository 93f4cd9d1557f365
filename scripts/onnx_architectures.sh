#!/usr/bin/env bash
# Correctness on 20 torchvision architectures ingot's tests do not build (EfficientNet, ConvNeXt,
# ViT, Swin, ShuffleNet, RegNet, MnasNet, MobileNetV3, SqueezeNet, DenseNet, GoogLeNet,
# Inception v3, ResNeXt, Wide ResNet, FCN, DeepLabV3, LR-ASPP): exported to ONNX by PyTorch with
# random weights at 64x64 (batch 2), imported by ingot, run on the reference interpreter and on
# the CPU backend under every layout target and at optimization levels none and high, each
# against ONNX Runtime (bench/onnx_architectures.py). Fails if any error exceeds 1e-4 of the
# largest output or a model is not imported.
#   1. installs torch, torchvision, onnx and onnxruntime into the benchmark environment
#      ($INGOT_BENCH_VENV, default ~/.cache/ingot-bench-venv) and exports the models there;
#   2. installs ingot into build/python-venv (scripts/python-test.sh makes it) and checks them:
#      bench/results/onnx_architectures.json and a table.
# --time: instead, exports them at 3x224x224, batch 1, and times ingot's CPU backend beside ONNX
# Runtime (3 rounds alternating the two loops, median of 10 calls each, 2 threads):
# bench/results/onnx_architectures_timed.json and a table.
#
#   ./scripts/onnx_architectures.sh [--no-install] [--models a,b,...] [--time]
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2
install=1 models=() time=0
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --models) models=(--models "$2"); shift ;;
    --time) time=1 ;;
    *) echo "usage: scripts/onnx_architectures.sh [--no-install] [--models a,b,...] [--time]" >&2; exit 2 ;;
  esac
  shift
done
. scripts/bench_env.sh
bench_env "$install" numpy onnx onnxruntime torch torchvision
work=build/onnx-architectures
if [ "$time" = 1 ]; then
  work=build/onnx-architectures-224
  rm -rf "$work" && mkdir -p "$work" bench/results
  "$venv/bin/python" bench/onnx_architectures.py export --out "$work" --size 224 --batch 1 "${models[@]}"
  build/python-venv/bin/python bench/onnx_architectures.py check --dir "$work" --time "$venv/bin/python" "${models[@]}"
  exit
fi
rm -rf "$work" && mkdir -p "$work" bench/results
"$venv/bin/python" bench/onnx_architectures.py export --out "$work" "${models[@]}"
build/python-venv/bin/python bench/onnx_architectures.py check --dir "$work" "${models[@]}"
