#!/usr/bin/env python3
"""Attention, side by side (scripts/bench_attention.sh): softmax(q k^T / sqrt(D) [+ causal mask]) v
on float32 [B, H, S, D], written out as ONNX (Transpose, MatMul, Mul, Where, Softmax, MatMul) and
run by

  ingot fused      ml.onnx.load + ml.compile: the attention pass rewrites the pattern into one
                   scaled_dot_product_attention (the flash-style CPU kernel); checked in the dump
  ingot unfused    the same model with the pass off: two GEMMs and a softmax over [S, S] scores
  ONNX Runtime     the same ONNX model
  torch sdpa       torch.nn.functional.scaled_dot_product_attention (no_grad)
  torch unfused    the same written out in PyTorch eager

each timed alone in its own loop (2 threads; the median of --reps calls after a warm-up, half a
second after the last side's calls so its threads have stopped spinning), the whole set --runs
times so the spread between runs shows. GFLOP/s counts the two products, 4 B H S S D,
halved when causal (the work a causal kernel need not do), beside the library GEMM's peak measured
in the same run (NumPy's matmul of [1024, 1024] float32). Outputs are compared with torch's sdpa.
Writes bench/results/attention.json and prints a Markdown table.

  python bench/attention.py [--quick] [--runs 3] [--reps 10] [--out bench/results/attention.json]

Needs `import ingot`, numpy and onnx; ONNX Runtime and torch are measured where importable.
"""
import argparse
import json
import math
import os
import sys
import tempfile
import time

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine, measured_utc, ort_session, timed, write_json  # noqa: E402

import ingot as ml  # noqa: E402

try:
    import onnxruntime as ort
except ImportError:
    ort = None
try:
    import torch
    torch.set_num_threads(THREADS)
except ImportError:
    torch = None

# name, batch, heads, sequence, head dimension, causal
CONFIGS = [
    ("BERT-base layer", 1, 12, 128, 64, False),
    ("batch 8, S 512", 8, 4, 512, 64, False),
    ("batch 8, S 512, causal", 8, 4, 512, 64, True),
    ("GPT-2 layer, S 1024, causal", 1, 12, 1024, 64, True),
]
QUICK = [("BERT-base layer", 1, 12, 128, 64, False), ("batch 2, S 256, causal", 2, 4, 256, 64, True)]


def written_out(shape, causal):
    """The ONNX graph an exporter writes for attention (GPT-2's mask: where(tril, s, lowest))."""
    b, h, s, d = shape
    io = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape))  # noqa: E731
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"]),
             helper.make_node("Mul", ["qk", "scale"], ["scores"])]
    inits = [helper.make_tensor("scale", TensorProto.FLOAT, [], [1.0 / math.sqrt(d)])]
    probs_in = "scores"
    if causal:
        tril = np.tril(np.ones((s, s), dtype=bool))
        inits += [helper.make_tensor("tril", TensorProto.BOOL, [s, s], tril.flatten().tolist()),
                  helper.make_tensor("lowest", TensorProto.FLOAT, [], [float(np.finfo(np.float32).min)])]
        nodes.append(helper.make_node("Where", ["tril", "scores", "lowest"], ["masked"]))
        probs_in = "masked"
    nodes += [helper.make_node("Softmax", [probs_in], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"])]
    graph = helper.make_graph(nodes, "attention", [io("q"), io("k"), io("v")], [io("o")], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def ingot_side(model_bytes, attention_pass):
    with tempfile.TemporaryDirectory() as d:
        dump = os.path.join(d, "graph.txt")
        pm = ml.compile(ml.onnx.load(model_bytes), ml.CpuBackend(num_threads=THREADS),
                        optimizations={"attention": attention_pass}, dump_graph=dump)
        with open(dump) as f:
            fused = "scaled_dot_product_attention" in f.read()
    if fused != attention_pass:
        raise RuntimeError(f"attention pass {'on' if attention_pass else 'off'} but the op is "
                           f"{'in' if fused else 'not in'} the compiled graph")
    return lambda feed: pm.evaluate({}, feed)["o"]


def gemm_peak(reps):
    a = np.random.default_rng(1).standard_normal((1024, 1024), dtype=np.float32)
    t = timed(lambda: a @ a, reps)
    return 2 * 1024 ** 3 / (t["min_ms"] * 1e-3) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default="bench/results/attention.json")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for name, b, h, s, d, causal in (QUICK if args.quick else CONFIGS):
        shape = (b, h, s, d)
        feed = {k: rng.standard_normal(shape, dtype=np.float32) for k in "qkv"}
        model = written_out(shape, causal)
        sides = {"ingot fused": ingot_side(model, True), "ingot unfused": ingot_side(model, False)}
        if ort is not None:
            sess = ort_session(ort, model, THREADS)
            sides["ONNX Runtime"] = lambda f, sess=sess: sess.run(["o"], f)[0]
        if torch is not None:
            tq, tk, tv = (torch.from_numpy(feed[k]) for k in "qkv")
            mask = torch.ones(s, s, dtype=torch.bool).tril() if causal else None

            def sdpa(_f, causal=causal):
                with torch.no_grad():
                    return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal).numpy()

            def unfused(_f, mask=mask):
                with torch.no_grad():
                    sc = tq @ tk.transpose(-1, -2) / math.sqrt(d)
                    if mask is not None:
                        sc = sc.masked_fill(~mask, float("-inf"))
                    return (torch.softmax(sc, -1) @ tv).numpy()
            sides["torch sdpa"], sides["torch unfused"] = sdpa, unfused
        # The oracle: torch's sdpa where present, else the unfused ingot model (float64 NumPy would do too).
        want = np.asarray(sides["torch sdpa" if torch is not None else "ingot unfused"](feed))
        errors = {k: float(np.max(np.abs(np.asarray(fn(feed)) - want))) for k, fn in sides.items()}
        flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        runs = {k: [] for k in sides}
        peaks = []
        for _ in range(args.runs):
            peaks.append(gemm_peak(args.reps))
            for k, fn in sides.items():
                # The last runtime's threads spin on for a while after their last call (OpenBLAS's
                # pthreads, each OpenMP runtime's pool): let them go idle, so each side runs alone.
                time.sleep(0.5)
                runs[k].append(timed(lambda fn=fn: fn(feed), args.reps))
        row = {"name": name, "shape": list(shape), "causal": causal, "gflop": flops / 1e9,
               "gemm_peak_gflops": [min(peaks), max(peaks)], "max_abs_error_vs_oracle": errors, "sides": {}}
        for k, ts in runs.items():
            ms = [t["ms"] for t in ts]
            row["sides"][k] = {"ms": [min(ms), max(ms)], "gflops": [flops / max(ms) / 1e6, flops / min(ms) / 1e6],
                               "runs": ts}
        print(json.dumps({"name": name, **{k: v["ms"] for k, v in row["sides"].items()}}), flush=True)
        rows.append(row)
    versions = {"numpy": np.__version__, "onnx": onnx.__version__,
                "onnxruntime": ort.__version__ if ort else None, "torch": torch.__version__ if torch else None}
    out = {"tool": "bench/attention.py", "measured_utc": measured_utc(), "runs": args.runs, "reps": args.reps,
           "machine": machine(THREADS),
           "versions": versions, "rows": rows}
    write_json(args.out, out)
    print_table(out)
    return 0


def print_table(out):
    sides = list(out["rows"][0]["sides"])
    fmt = lambda r: f"{r[0]:.2f}-{r[1]:.2f}"  # noqa: E731
    print(f"\n{out['runs']} runs of {out['measured_utc']} UTC on {out['machine']['cpu']}, {THREADS} threads "
          f"(ms: the least and most of the runs' medians; GFLOP/s of ingot fused)\n")
    print("| attention (float32) | " + " | ".join(sides) + " | ingot fused GFLOP/s | GEMM peak GFLOP/s |"
          " torch sdpa / ingot | ORT / ingot |")
    print("|---" * (len(sides) + 5) + "|")
    for r in out["rows"]:
        fused = r["sides"]["ingot fused"]["ms"]
        ratio = lambda k: (f"{r['sides'][k]['ms'][0] / fused[1]:.2f}-{r['sides'][k]['ms'][1] / fused[0]:.2f}×"  # noqa: E731
                           if k in r["sides"] else "n/a")
        b, h, s, d = r["shape"]
        print(f"| {r['name']} [{b},{h},{s},{d}] | " + " | ".join(fmt(r["sides"][k]["ms"]) for k in sides) +
              f" | {r['sides']['ingot fused']['gflops'][0]:.0f}-{r['sides']['ingot fused']['gflops'][1]:.0f}"
              f" | {r['gemm_peak_gflops'][0]:.0f}-{r['gemm_peak_gflops'][1]:.0f} | {ratio('torch sdpa')} | "
              f"{ratio('ONNX Runtime')} |")


if __name__ == "__main__":
    sys.exit(main())
