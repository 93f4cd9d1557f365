#!/usr/bin/env bash
# Real CNNs against their peers, one command: torchvision's ResNet-18, ResNet-50 and MobileNetV2
# (random weights, nothing downloaded) at batch 1 and 8, 3x224x224, inference.
#   1. installs torch, torchvision and onnxruntime into the benchmark environment (as
#      scripts/bench.sh does) and runs bench/vision_torch.py there: the weights, inputs and
#      PyTorch's logits, and the times of PyTorch eager, torch.compile and ONNX Runtime;
#   2. installs ingot into build/python-venv (scripts/python-test.sh makes it) and runs
#      bench/vision.py: ingot's zoo networks with the same weights, logits checked against
#      PyTorch's, timed; writes bench/results/vision.json and the README's "## Vision models";
#   3. ResNet-18's training step, batch 8, 3x224x224: bench/bench_resnet_train.cpp (build-bench)
#      against PyTorch eager's in the same table.
#
#   ./scripts/bench_vision.sh [--quick] [--no-install] [--no-compile] [--build DIR]
#   (--quick: ResNet-18 only, batch 1; --no-compile: skip torch.compile, whose first call takes
#   minutes per network here; --build DIR: take bench_resnet_train from an existing optimized
#   build, e.g. build/release, instead of configuring and building build-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2
models=resnet18,resnet50,mobilenet_v2 batches=1,8 install=1 torch_args=() train_batch=8 build=""
usage="usage: scripts/bench_vision.sh [--quick] [--no-install] [--no-compile] [--build DIR]"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) models=resnet18 batches=1 train_batch=2 ;;
    --no-install) install=0 ;;
    --no-compile) torch_args+=(--no-compile) ;;
    --build) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; build="$2"; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$build" ] && [ ! -x "$build/bench_resnet_train" ]; then
  echo "--build $build: no $build/bench_resnet_train (build it with scripts/build.sh release)" >&2
  exit 2
fi
. scripts/bench_env.sh
bench_env "$install" numpy onnx onnxruntime torch torchvision
work=bench/results/vision
rm -rf "$work" && mkdir -p "$work"
echo "== PyTorch side ($venv)"
"$venv/bin/python" bench/vision_torch.py --out "$work" --models "$models" --batches "$batches" \
  --train-batch "$train_batch" "${torch_args[@]}"
echo "== ingot side"
if [ -z "$build" ]; then
  build=build-bench
  cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DINGOT_WERROR=ON >/dev/null
  cmake --build build-bench --target bench_resnet_train -j "$(nproc)"
fi
"$build/bench_resnet_train" "$train_batch" 224 5 "$work/train.json"
build/python-venv/bin/python bench/vision.py --dir "$work" --train "$work/train.json" --readme README.md
cp "$work/vision.json" bench/results/vision.json
rm -f "$work"/*.npz "$work"/*.onnx
