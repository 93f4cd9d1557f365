#!/usr/bin/env python3
"""Correctness on architectures ingot's tests do not build: torchvision's classifiers and
segmentation models (EfficientNet, ConvNeXt, ViT, Swin, ShuffleNet, RegNet, MnasNet,
MobileNetV3, SqueezeNet, DenseNet, GoogLeNet, Inception v3, ResNeXt, Wide ResNet, FCN,
DeepLabV3, LR-ASPP), exported to ONNX by PyTorch (opset 17, random weights, batch norms with
non-trivial statistics; nothing is downloaded) at a small resolution, imported by ingot and run
on the reference interpreter and on the native CPU backend under every layout target and at the
"none" and "high" optimization levels, each against ONNX Runtime's output on the same input.

Two sides, as bench/onnx_export.py and bench/onnx_models.py:
  python bench/onnx_architectures.py export --out DIR [--models a,b] [--size 224 --batch 1]
      (torch, torchvision, onnxruntime)
  python bench/onnx_architectures.py check --dir DIR [--models a,b] [--time ORT_PYTHON]  (ingot):
      writes bench/results/onnx_architectures.json (or onnx_architectures_timed.json) and prints
      the table
A model whose error relative to ONNX Runtime's largest output exceeds 1e-4 under any variant
fails the check (exit status 1); so does one ingot cannot import (with the reason). With --time
(models exported at --size 224 --batch 1) the check runs the default CPU compile only and times
it beside ONNX Runtime in three rounds that alternate ingot's loop (median of 10 calls) with ONNX
Runtime's (bench/onnx_models.py's loop, in a child process of the benchmark environment).
"""
import argparse
import json
import os
import sys
import time

THREADS = 2
TOLERANCE = 1e-4  # of the largest |output|: float32 rounding through ~100 layers is 1e-7-1e-5
MODELS = ["efficientnet_b0", "efficientnet_v2_s", "convnext_tiny", "vit_b_16", "swin_t", "shufflenet_v2_x1_0",
          "regnet_y_400mf", "regnet_x_400mf", "mnasnet0_5", "mobilenet_v3_small", "mobilenet_v3_large",
          "squeezenet1_1", "densenet121", "googlenet", "inception_v3", "resnext50_32x4d", "wide_resnet50_2",
          "segmentation.fcn_resnet50", "segmentation.deeplabv3_mobilenet_v3_large",
          "segmentation.lraspp_mobilenet_v3_large"]
SIZE = {"inception_v3": 96}  # its stem needs more than 64 pixels; the rest run at 64x64 (--size 0)
ROUNDS, REPS = 3, 10
VARIANTS = [("reference", None), ("cpu", {}), ("nchw16c", {"layout_target": "nchw16c"}),
            ("nchw8c", {"layout_target": "nchw8c"}), ("nhwc", {"layout_target": "nhwc"}),
            ("nchw", {"layout_target": "nchw"}), ("level none", {"optimization_level": "none"}),
            ("level high", {"optimization_level": "high"})]

for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, measured_utc, ort_session, timed, write_json  # noqa: E402


def build(name, torch, torchvision, size):
    """The model with random weights: batch norms' statistics and affine terms drawn away from
    their identity defaults, ViT's zero-initialised head drawn too (else its output is zero)."""
    torch.manual_seed(0)
    if name.startswith("segmentation."):
        ctor = getattr(torchvision.models.segmentation, name.split(".", 1)[1])
        model = ctor(weights=None, weights_backbone=None, aux_loss=False, num_classes=5)
    else:
        kw = {"image_size": size} if name.startswith("vit") else {}
        model = getattr(torchvision.models, name)(weights=None, **kw)
    from vision_torch import randomize_batch_norms
    randomize_batch_norms(model, torch)
    if name.startswith("vit"):
        with torch.no_grad():
            model.heads.head.weight.normal_(0, 0.05)
    return model.eval()


def export(args):
    import numpy as np
    import onnxruntime as ort
    import torch
    import torchvision
    torch.set_num_threads(THREADS)
    os.makedirs(args.out, exist_ok=True)
    for name in args.models:
        size = args.size or SIZE.get(name, 64)
        model = build(name, torch, torchvision, size)
        x = torch.randn(args.batch, 3, size, size, generator=torch.Generator().manual_seed(1))
        path = os.path.join(args.out, name + ".onnx")
        torch.onnx.export(model, (x,), path, opset_version=17, dynamo=False, input_names=["input"],
                          output_names=["output"])
        want = ort_session(ort, path, THREADS).run(None, {"input": x.numpy()})[0]
        np.savez(os.path.join(args.out, name + ".npz"), input=x.numpy(), ort=want)
        print(f"{name}: exported, output {list(want.shape)}", flush=True)


def check(args):
    import ingot as ml
    import numpy as np
    rows, failed = [], False
    for name in args.models:
        row = {"model": name}
        data = np.load(os.path.join(args.dir, name + ".npz"))
        want = data["ort"]
        row["input_shape"], row["output_shape"] = list(data["input"].shape), list(want.shape)
        try:
            model = ml.onnx.load(os.path.join(args.dir, name + ".onnx"))
        except ml.IngotError as e:
            row["import_error"] = str(e)
            failed = True
            rows.append(row)
            print(f"{name}: not imported: {e}", flush=True)
            continue
        if args.time:
            failed |= not timed_row(ml, model, data, want, row, args, name)
            rows.append(row)
            continue
        row["errors"] = {}
        for variant, options in VARIANTS:
            t = time.perf_counter()
            backend = ml.ReferenceBackend() if options is None else ml.CpuBackend(num_threads=THREADS)
            pm = ml.compile(model, backend, **(options or {}))
            got = np.asarray(pm.evaluate({}, {"input": data["input"]})["output"])
            err = float(np.abs(got - want).max() / np.abs(want).max()) if got.shape == want.shape else float("inf")
            row["errors"][variant] = err
            failed |= not err <= TOLERANCE
            print(f"{name} [{variant}]: {err:.1e} ({time.perf_counter() - t:.1f} s)", flush=True)
        rows.append(row)
    out = {"machine": cpu_model(), "measured_utc": measured_utc(), "threads": THREADS, "tolerance": TOLERANCE,
           "models": rows}
    name = "onnx_architectures_timed.json" if args.time else "onnx_architectures.json"
    write_json(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name), out)
    print(table(out, timed=bool(args.time)))
    return 1 if failed else 0


def timed_row(ml, model, data, want, row, args, name):
    """The default CPU compile's error and its time beside ONNX Runtime's, rounds alternating."""
    import numpy as np
    from onnx_models import ort_loop
    pm = ml.compile(model, ml.CpuBackend(num_threads=THREADS))
    run = lambda: pm.evaluate({}, {"input": data["input"]})  # noqa: E731
    got = np.asarray(run()["output"])
    row["error"] = float(np.abs(got - want).max() / np.abs(want).max())
    path, npz = os.path.join(args.dir, name + ".onnx"), os.path.join(args.dir, name + ".npz")
    row["rounds"] = [{"ingot_ms": timed(run, REPS)["ms"], "onnxruntime_ms": ort_loop(args.time, path, npz, REPS)["ms"]}
                     for _ in range(ROUNDS)]
    print(f"{name}: error {row['error']:.1e}, " + ", ".join(
        f"ingot {r['ingot_ms']:.1f} / ORT {r['onnxruntime_ms']:.1f} ms" for r in row["rounds"]), flush=True)
    return row["error"] <= TOLERANCE


def error_cells(r):
    """The check's cells: the reference's error and the largest of the CPU variants' (which)."""
    cpu = {k: v for k, v in r["errors"].items() if k != "reference"}
    worst = max(cpu, key=cpu.get)
    return [f"{r['errors']['reference']:.1e}", f"{cpu[worst]:.1e} ({worst})"]


def timed_cells(r):
    """The timed run's cells: ingot's and ONNX Runtime's ranges over the rounds, ORT / ingot per
    round, and the error against ONNX Runtime."""
    mine = sorted(x["ingot_ms"] for x in r["rounds"])
    theirs = sorted(x["onnxruntime_ms"] for x in r["rounds"])
    ratios = sorted(x["onnxruntime_ms"] / x["ingot_ms"] for x in r["rounds"])
    return [f"{mine[0]:.1f}-{mine[-1]:.1f}", f"{theirs[0]:.1f}-{theirs[-1]:.1f}", f"{ratios[0]:.2f}-{ratios[-1]:.2f}×",
            f"{r['error']:.1e}"]


def table(results, timed=False):
    """The README's table of a check (error_cells) or of a timed run (timed_cells), a row a model."""
    head = (["ingot CPU ms", "ONNX Runtime ms", "ORT / ingot", "error vs ORT"] if timed
            else ["reference", "CPU backend, worst of 7 variants (variant)"])
    lines = ["| model | input | " + " | ".join(head) + " |", "|" + "---|" * (len(head) + 2)]
    for r in results["models"]:
        shape = "x".join(str(d) for d in r["input_shape"])
        if "import_error" in r:
            cells = ["not imported" + ("" if timed else f": {r['import_error'][:80]}")] + [""] * (len(head) - 1)
        else:
            cells = timed_cells(r) if timed else error_cells(r)
        lines.append(f"| {r['model']} | {shape} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("side", choices=["export", "check"])
    ap.add_argument("--out")
    ap.add_argument("--dir")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--size", type=int, default=0, help="export: image size (0: 64, or SIZE's)")
    ap.add_argument("--batch", type=int, default=2, help="export: batch")
    ap.add_argument("--time", metavar="ORT_PYTHON", help="check: time beside ONNX Runtime run by this python")
    args = ap.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    if args.side == "export":
        if not args.out:
            ap.error("export needs --out")
        export(args)
        return 0
    if not args.dir:
        ap.error("check needs --dir")
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
