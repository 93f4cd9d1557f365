#!/usr/bin/env python3
"""The PyTorch side of bench/vision.py: torchvision's ResNet-18, ResNet-50 and MobileNetV2 with
random weights (nothing is downloaded) and non-trivial batch-norm statistics, in eval mode.

For each model it writes <out>/<model>.npz (the state dict, the input batch and PyTorch's logits,
float32) and times, each in its own loop after a warm-up: PyTorch eager, torch.compile and ONNX
Runtime (the model exported with torch.onnx.export). A runtime that does not import or fails is
recorded with its reason. Threads: 2.

With --train-batch B it also times PyTorch eager's ResNet-18 training step (forward, backward,
SGD lr 0.01 momentum 0.9 on cross-entropy, batch norm in training mode) at batch B, the peer of
bench/bench_resnet_train.cpp.

  python bench/vision_torch.py --out DIR [--models resnet18,resnet50,mobilenet_v2] [--batches 1,8]
                               [--size 224] [--reps 5] [--no-compile] [--train-batch 8]
"""
import argparse
import json
import os
import sys
import time
import traceback

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, measured_utc, ort_session, timed  # noqa: E402


def randomize_batch_norms(model, torch):
    """Every BatchNorm2d's statistics and affine terms drawn away from their identity defaults
    (mean 0, variance 1, weight 1, bias 0), which would hide a mistake in folding them."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def build(name, torch, torchvision):
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None, num_classes=1000)
    randomize_batch_norms(model, torch)
    return model.eval()


def forward_gflop(model, x, torch):
    """The forward's dense work (convolutions and linears, 2 FLOPs a multiply-add) in GFLOP, as
    PyTorch's FlopCounterMode counts it; None where this torch has no counter."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(x)
    return counter.get_total_flops() / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--train-batch", type=int, default=0, help="also time ResNet-18's training step at this batch")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import torch
    import torchvision
    torch.set_num_threads(THREADS)
    results = {"machine": cpu_model(), "measured_utc": measured_utc(), "threads": THREADS,
               "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__}, "rows": []}
    try:
        import onnxruntime as ort
        results["versions"]["onnxruntime"] = ort.__version__
    except Exception as e:  # noqa: BLE001
        ort = None
        ort_missing = f"not installed ({e})"
    for name in args.models.split(","):
        model = build(name, torch, torchvision)
        state = {k: v.detach().numpy() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
        for batch in [int(b) for b in args.batches.split(",")]:
            rng = np.random.default_rng(batch)
            x = rng.uniform(-1, 1, (batch, 3, args.size, args.size)).astype(np.float32)
            xt = torch.from_numpy(x)
            with torch.no_grad():
                logits = model(xt).numpy()
            np.savez(os.path.join(args.out, f"{name}_b{batch}.npz"), input=x, logits=logits,
                     **{"param:" + k: v for k, v in state.items()})
            row = {"model": name, "batch": batch, "size": args.size, "gflop": forward_gflop(model, xt, torch)}
            with torch.no_grad():
                row["torch_eager"] = timed(lambda: model(xt), args.reps)
            if args.no_compile:
                row["torch_compile"] = {"error": "skipped (--no-compile)"}
            else:
                try:
                    compiled = torch.compile(model)
                    with torch.no_grad():
                        t = time.perf_counter()
                        got = compiled(xt).numpy()
                        first = (time.perf_counter() - t) * 1e3
                        row["torch_compile"] = timed(lambda: compiled(xt), args.reps)
                    row["torch_compile"]["first_ms"] = first
                    row["torch_compile"]["max_rel_err_vs_eager"] = float(
                        np.max(np.abs(got - logits)) / max(1.0, float(np.max(np.abs(logits)))))
                except Exception as e:  # noqa: BLE001
                    row["torch_compile"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            if ort is None:
                row["onnxruntime"] = {"error": ort_missing}
            else:
                try:
                    path = os.path.join(args.out, f"{name}_b{batch}.onnx")
                    torch.onnx.export(model, (xt,), path, input_names=["input"], output_names=["logits"],
                                      opset_version=17, dynamo=False)
                    sess = ort_session(ort, path, THREADS)
                    got = sess.run(None, {"input": x})[0]
                    row["onnxruntime"] = timed(lambda: sess.run(None, {"input": x}), args.reps)
                    row["onnxruntime"]["max_rel_err_vs_eager"] = float(
                        np.max(np.abs(got - logits)) / max(1.0, float(np.max(np.abs(logits)))))
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    row["onnxruntime"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            print(json.dumps(row), flush=True)
            results["rows"].append(row)
    if args.train_batch:
        model = build("resnet18", torch, torchvision).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        rng = np.random.default_rng(0)
        xt = torch.from_numpy(rng.uniform(-1, 1, (args.train_batch, 3, args.size, args.size)).astype(np.float32))
        yt = torch.from_numpy((np.arange(args.train_batch) * 7 % 1000).astype(np.int64))

        def step():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt), yt)
            loss.backward()
            opt.step()

        results["train"] = {"model": "resnet18", "batch": args.train_batch, "size": args.size,
                            "torch_eager": timed(step, args.reps)}
        print(json.dumps(results["train"]), flush=True)
    with open(os.path.join(args.out, "torch.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
