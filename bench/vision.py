#!/usr/bin/env python3
"""ingot's side of the vision benchmark (scripts/bench_vision.sh runs both sides): ResNet-18,
ResNet-50 and MobileNetV2 built with ingot's zoo (ml.ResNet18, ...), given the torchvision weights
bench/vision_torch.py wrote (<dir>/<model>_b<batch>.npz), compiled for the CPU backend
(inference), checked against PyTorch's logits and timed in its own loop after a warm-up.

Writes <dir>/vision.json (every row: ingot's time and error, each peer's time, ratios) and, with
--readme, rewrites the body of the README's "## Vision models" section with the table; with
--train JSON (bench_resnet_train's output) also the ResNet-18 training step against PyTorch eager's.

  python bench/vision.py --dir DIR [--reps 5] [--readme README.md]
"""
import argparse
import glob
import json
import os
import sys
import time

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402

import ingot as ml  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, measured_utc, timed  # noqa: E402

ZOO = {"resnet18": ml.ResNet18, "resnet50": ml.ResNet50, "mobilenet_v2": ml.MobileNetV2}
LINEAR = {"fc.weight", "classifier.1.weight"}  # torch [out, in]; ingot's Linear [in, out]
PEERS = [("onnxruntime", "ONNX Runtime"), ("torch_eager", "PyTorch eager"), ("torch_compile", "torch.compile")]


def rel_err(got, want):
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(1.0, float(np.max(np.abs(want)))))


def run_one(path, reps):
    data = np.load(path)
    name, batch = os.path.basename(path)[:-4].rsplit("_b", 1)
    x, want = data["input"], data["logits"].astype(np.float64)
    params = {k[6:]: (v.T.copy() if k[6:] in LINEAR else v) for k, v in data.items() if k.startswith("param:")}
    net = ZOO[name](num_classes=want.shape[1])
    opts = dict(shapes={"input": list(x.shape)}, inference=True)
    backend = ml.CpuBackend(num_threads=THREADS)
    # Weights as constants (constant_keys), as ONNX Runtime holds its initializers and PyTorch its
    # module's tensors: batch-norm folding and the weights' reorder for oneDNN happen once.
    t = time.perf_counter()
    pm = ml.compile(net, backend, constant_keys=params, **opts)
    compile_ms = (time.perf_counter() - t) * 1e3
    got = pm.evaluate({}, {"input": x})["output"]
    # Weights passed on every call (what a training loop does): folded and reordered per call.
    per_call = ml.compile(net, backend, **opts)
    got_per_call = per_call.evaluate(params, {"input": x})["output"]
    row = {"model": name, "batch": int(batch), "size": int(x.shape[2]), "compile_ms": compile_ms,
           "max_rel_err_vs_torch": max(rel_err(np.asarray(got), want), rel_err(np.asarray(got_per_call), want))}
    # Direct kernels only (CpuBackend(winograd=False)), weights as constants: the default runs
    # 3x3 stride-1 convs with oneDNN's Winograd kernels where it has them.
    direct = ml.compile(net, ml.CpuBackend(num_threads=THREADS, winograd=False), constant_keys=params, **opts)
    row["max_rel_err_direct_vs_torch"] = rel_err(np.asarray(direct.evaluate({}, {"input": x})["output"]), want)
    row["ingot"] = timed(lambda: pm.evaluate({}, {"input": x}), reps)
    row["ingot_weights_per_call"] = timed(lambda: per_call.evaluate(params, {"input": x}), reps)
    row["ingot_direct"] = timed(lambda: direct.evaluate({}, {"input": x}), reps)
    return row


def gemm_peak_gflops(reps=5):
    """The library GEMM's throughput here: a 2048³ float32 matmul through ingot's CPU backend
    (oneDNN's sgemm on the same threads), best of `reps` calls after a warm-up."""
    n = 2048
    rng = np.random.default_rng(0)
    a, b = (ml.array(rng.uniform(-1, 1, (n, n)).astype(np.float32)) for _ in range(2))
    product = ml.compile(lambda x, y: x @ y)  # the default CpuBackend, OMP_NUM_THREADS threads
    best = min(timed(lambda: np.asarray(product(a, b)), 1)["min_ms"] for _ in range(reps))
    return 2.0 * n ** 3 / (best * 1e-3) / 1e9


def rate(gflop, ms, peak):
    """GFLOP/s at `ms` and its share of the GEMM peak, as a table cell."""
    if not gflop or not ms:
        return "—"
    g = gflop / (ms * 1e-3)
    return f"{g:.0f} ({100 * g / peak:.0f}%)"


def table(rows, peers, peak):
    head = ("| model | batch | GFLOP | ingot ms (spread) | ingot GFLOP/s (of peak) | weights per call ms | direct convs ms "
            "(ORT ×) | error vs PyTorch (direct) | " + " | ".join(f"{label} ms (×)" for _, label in PEERS) +
            " | ONNX Runtime GFLOP/s (of peak) |")
    lines = [head, "|" + "---|" * (9 + len(PEERS))]
    for r in rows:
        i, pc, w = r["ingot"], r["ingot_weights_per_call"], r["ingot_direct"]
        p = peers.get((r["model"], r["batch"]), {})
        ort = p.get("onnxruntime", {})
        gflop = p.get("gflop")
        cells = [r["model"], str(r["batch"]), f"{gflop:.2f}" if gflop else "—",
                 f"{i['ms']:.1f} ({i['min_ms']:.1f}–{i['max_ms']:.1f})", rate(gflop, i["ms"], peak),
                 f"{pc['ms']:.1f}", f"{w['ms']:.1f}" + (f" ({ort['ms'] / w['ms']:.2f}×)" if "ms" in ort else ""),
                 f"{r['max_rel_err_vs_torch']:.1e} ({r['max_rel_err_direct_vs_torch']:.1e})"]
        for key, _ in PEERS:
            e = p.get(key, {})
            cells.append(f"{e['ms']:.1f} ({e['ms'] / i['ms']:.2f}×)" if "ms" in e else "—")
        cells.append(rate(gflop, ort.get("ms"), peak))
        lines.append("| " + " | ".join(cells) + " |")
    # Why a peer has no figure (not installed, failed, skipped), once per peer and reason.
    reasons = sorted({(label, p[key]["error"]) for p in peers.values() for key, label in PEERS if "error" in p.get(key, {})})
    for label, why in reasons:
        lines.append(f"\n{label}: no figure ({why}).")
    return "\n".join(lines)


def replace_section(readme, body):
    with open(readme) as f:
        text = f.read()
    marker = "## Vision models\n"
    start = text.index(marker) + len(marker)
    end = text.find("\n## ", start)
    end = len(text) if end < 0 else end + 1
    with open(readme + ".tmp", "w") as f:
        f.write(text[:start] + "\n" + body.rstrip() + "\n\n" + text[end:])
    os.replace(readme + ".tmp", readme)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--readme", default="")
    ap.add_argument("--train", default="", help="bench_resnet_train's JSON")
    args = ap.parse_args()
    with open(os.path.join(args.dir, "torch.json")) as f:
        torch_side = json.load(f)
    peers = {(r["model"], r["batch"]): r for r in torch_side["rows"]}
    peak = gemm_peak_gflops()
    print(f"library GEMM peak: {peak:.0f} GFLOP/s", flush=True)
    rows = []
    for path in sorted(glob.glob(os.path.join(args.dir, "*_b*.npz"))):
        row = run_one(path, args.reps)
        print(json.dumps(row), flush=True)
        rows.append(row)
    order = {"resnet18": 0, "resnet50": 1, "mobilenet_v2": 2}
    rows.sort(key=lambda r: (order.get(r["model"], 9), r["batch"]))
    out = {"machine": cpu_model(), "measured_utc": measured_utc(), "threads": THREADS,
           "gemm_peak_gflops": peak,
           "peers_measured_utc": torch_side["measured_utc"], "peer_versions": torch_side["versions"], "rows": rows,
           "peers": torch_side["rows"]}
    with open(os.path.join(args.dir, "vision.json"), "w") as f:
        json.dump(out, f, indent=1)
    text = table(rows, peers, peak) + (
        f"\n\nLibrary GEMM peak in this run (the physical limit beside the GFLOP/s columns): {peak:.0f} GFLOP/s, a "
        f"2048³ float32 matmul through ingot's CPU backend (oneDNN's sgemm, {THREADS} threads). GFLOP counts the "
        f"convolutions' and the classifier's multiply-adds twice (PyTorch's FlopCounterMode); the Winograd kernels "
        f"ingot runs by default do fewer, so its share can pass 100%.")
    if args.train and "train" in torch_side:
        with open(args.train) as f:
            mine = json.load(f)
        theirs = torch_side["train"]["torch_eager"]
        out["train"] = {"ingot": mine, "torch_eager": theirs}
        text += (f"\n\nResNet-18 training step (forward, backward, SGD with momentum; batch norm in training mode), "
                 f"batch {mine['batch']}, 3x{mine['size']}x{mine['size']}: ingot's compiled step {mine['ms']:.0f} ms "
                 f"({mine['min_ms']:.0f}–{mine['max_ms']:.0f}), PyTorch eager {theirs['ms']:.0f} ms "
                 f"({theirs['ms'] / mine['ms']:.2f}×).")
        with open(os.path.join(args.dir, "vision.json"), "w") as f:
            json.dump(out, f, indent=1)
    print(text)
    if args.readme:
        body = (f"Inference, float32, 3x{rows[0]['size']}x{rows[0]['size']}, {THREADS} threads, random weights with "
                f"non-trivial batch-norm statistics; each runtime timed alone in its own loop, median of "
                f"{rows[0]['ingot']['reps']} after a warm-up (spread: fastest–slowest). ingot holds the weights as "
                f"constants (`constant_keys`), as ONNX Runtime holds its initializers; \"weights per call\" passes "
                f"them to every evaluate instead. ingot's default runs 3x3 stride-1 convs with oneDNN's Winograd "
                f"kernels where it has them; \"direct convs\" is `ml.CpuBackend(winograd=False)`, direct kernels "
                f"only. (×) = peer time / ingot time (the constant-weights column). "
                f"Measured {out['measured_utc']} UTC on {out['machine']} (peers {out['peers_measured_utc']}; "
                + ", ".join(f"{k} {v}" for k, v in torch_side["versions"].items()) +
                "). Error: max |ingot − PyTorch| over max(1, max |PyTorch logit|).\n"
                "Regenerate: `./scripts/bench_vision.sh` (installs torch, torchvision and onnxruntime into "
                "~/.cache/ingot-bench-venv).\n\n" + text)
        replace_section(args.readme, body)


if __name__ == "__main__":
    main()
