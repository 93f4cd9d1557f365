#!/usr/bin/env python3
"""Attention forward and backward at long sequences (scripts/bench_attention.sh --train):
o = softmax(q k^T / sqrt(D) [+ causal]) v on float32 [B, H, S, D] and the gradients of sum(o * w)
with respect to q, k and v, by

  ingot            ml.compile(fn) of ml.scaled_dot_product_attention (forward) and of ml.grad of
                   the loss (forward + backward: the fused ig_attention_grad kernel)
  torch sdpa       torch.nn.functional.scaled_dot_product_attention, no_grad / with autograd
  torch unfused    the same written out in PyTorch eager ([S, S] scores in memory)

each timed alone in its own loop (2 threads, the median of --reps calls after a warm-up), the set
--runs times. GFLOP/s counts the products: forward 4 B H S^2 D, forward + backward 3.5 times that
(the backward's five block products beside the forward's two), halved when causal. (ingot's
compiled gradient has no forward node: its output is not needed, and the backward kernel makes
the scores again itself.) Peak memory:
each side's call runs once in a fresh process, and the row shows its peak resident size less
that of a process that made the same inputs and imported the same modules (so the memory the
attention itself needed). Gradients are compared with torch's autograd.
Writes bench/results/attention_train.json and prints a Markdown table.

  python bench/attention_train.py [--quick] [--runs 3] [--reps 5] [--out bench/results/attention_train.json]
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine, measured_utc, timed, write_json  # noqa: E402

import ingot as ml  # noqa: E402

try:
    import torch
    torch.set_num_threads(THREADS)
except ImportError:
    torch = None

# name, batch, heads, sequence, head dimension, causal
CONFIGS = [
    ("S 512", 1, 4, 512, 64, False),
    ("S 2048", 1, 4, 2048, 64, False),
    ("S 2048, causal", 1, 4, 2048, 64, True),
    ("S 8192", 1, 1, 8192, 64, False),
]
QUICK = [("S 256", 1, 2, 256, 64, False), ("S 512, causal", 1, 2, 512, 64, True)]


def inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(shape, dtype=np.float32) for k in ("q", "k", "v", "w")}


def sides(shape, causal, feed):
    """name -> (forward fn, forward + backward fn); each returns NumPy arrays."""
    d = shape[-1]
    q, k, v, w = (ml.array(feed[n]) for n in ("q", "k", "v", "w"))
    fwd = ml.compile(lambda q, k, v: ml.scaled_dot_product_attention(q, k, v, is_causal=causal))

    def loss(q, k, v, w):
        return ml.sum(ml.scaled_dot_product_attention(q, k, v, is_causal=causal) * w)
    bwd = ml.compile(ml.grad(loss, argnums=(0, 1, 2)))
    out = {"ingot": (lambda: np.asarray(fwd(q, k, v)), lambda: [np.asarray(g) for g in bwd(q, k, v, w)])}
    if torch is None:
        return out
    tq, tk, tv, tw = (torch.from_numpy(feed[n]) for n in ("q", "k", "v", "w"))
    mask = torch.ones(shape[2], shape[2], dtype=torch.bool).tril() if causal else None

    def sdpa(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def unfused(q, k, v):
        sc = q @ k.transpose(-1, -2) / math.sqrt(d)
        if mask is not None:
            sc = sc.masked_fill(~mask, float("-inf"))
        return torch.softmax(sc, -1) @ v

    def forward(f):
        def run():
            with torch.no_grad():
                return f(tq, tk, tv).numpy()
        return run

    def backward(f):
        def run():
            leaves = [t.detach().requires_grad_() for t in (tq, tk, tv)]
            (f(*leaves) * tw).sum().backward()
            return [t.grad.numpy() for t in leaves]
        return run
    out["torch sdpa"] = (forward(sdpa), backward(sdpa))
    out["torch unfused"] = (forward(unfused), backward(unfused))
    return out


def peak_rss_mb():
    """This process's peak resident MB: /proc's VmHWM (getrusage's ru_maxrss keeps the forking
    parent's peak across exec, so a child of a large benchmark process read the parent's)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure_memory(config, side, part):
    """In a fresh process: the peak resident MB after one call of `side`'s `part` (or none)."""
    name, b, h, s, d, causal = config
    shape = (b, h, s, d)
    fns = sides(shape, causal, inputs(shape))
    if side != "baseline":
        fns[side][0 if part == "forward" else 1]()
    return peak_rss_mb()


def memory_of(config, side, part):
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--memory", json.dumps(config), side, part],
                       capture_output=True, text=True, check=True)
    return float(r.stdout.strip().splitlines()[-1])


def gemm_peak(reps):
    a = np.random.default_rng(1).standard_normal((1024, 1024), dtype=np.float32)
    t = timed(lambda: a @ a, reps)
    return 2 * 1024 ** 3 / (t["min_ms"] * 1e-3) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default="bench/results/attention_train.json")
    ap.add_argument("--memory", nargs=3, help=argparse.SUPPRESS)  # child: config side part
    args = ap.parse_args()
    if args.memory:
        print(measure_memory(json.loads(args.memory[0]), args.memory[1], args.memory[2]))
        return 0
    rows = []
    for config in (QUICK if args.quick else CONFIGS):
        name, b, h, s, d, causal = config
        shape = (b, h, s, d)
        feed = inputs(shape)
        fns = sides(shape, causal, feed)
        errors = {}
        if torch is not None:
            want_o, want_g = fns["torch sdpa"][0](), fns["torch sdpa"][1]()
            for k, (f, g) in fns.items():
                errors[k] = {"forward": float(np.max(np.abs(f() - want_o))),
                             "gradients": max(float(np.max(np.abs(a - b))) for a, b in zip(g(), want_g))}
        flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        times = {(k, p): [] for k in fns for p in ("forward", "backward")}
        peaks = []
        for _ in range(args.runs):
            peaks.append(gemm_peak(args.reps))
            for (k, p) in times:
                time.sleep(0.5)  # the last side's threads stop spinning first
                times[(k, p)].append(timed(fns[k][0 if p == "forward" else 1], args.reps))
        base = memory_of(config, "baseline", "forward")
        row = {"name": name, "shape": list(shape), "causal": causal, "gflop_forward": flops / 1e9,
               "gflop_forward_backward": 3.5 * flops / 1e9, "gemm_peak_gflops": [min(peaks), max(peaks)],
               "max_abs_error_vs_torch_sdpa": errors, "sides": {}}
        for k in fns:
            row["sides"][k] = {}
            for p in ("forward", "backward"):
                ms = [t["ms"] for t in times[(k, p)]]
                work = flops if p == "forward" else 3.5 * flops
                row["sides"][k][p] = {"ms": [min(ms), max(ms)], "gflops": [work / max(ms) / 1e6, work / min(ms) / 1e6],
                                      "peak_mb_over_inputs": max(0.0, memory_of(config, k, p) - base),
                                      "runs": times[(k, p)]}
        print(json.dumps({"name": name, **{f"{k} {p}": v[p]["ms"] for k, v in row["sides"].items()
                                           for p in ("forward", "backward")}}), flush=True)
        rows.append(row)
    out = {"tool": "bench/attention_train.py", "measured_utc": measured_utc(), "runs": args.runs, "reps": args.reps,
           "machine": machine(THREADS),
           "versions": {"numpy": np.__version__, "torch": torch.__version__ if torch else None}, "rows": rows}
    write_json(args.out, out)
    print_table(out)
    return 0


def print_table(out):
    sides = list(out["rows"][0]["sides"])
    fmt = lambda r: f"{r[0]:.1f}-{r[1]:.1f}"  # noqa: E731
    print(f"\n{out['runs']} runs of {out['measured_utc']} UTC on {out['machine']['cpu']}, {THREADS} threads "
          f"(ms: the least and most of the runs' medians; MB: peak resident memory over the inputs')\n")
    for part, work in (("forward", 1.0), ("backward", 3.5)):
        title = "forward" if part == "forward" else "forward + backward"
        print(f"| attention {title} (float32) | " + " | ".join(f"{k} ms" for k in sides) +
              " | ingot GFLOP/s | GEMM peak | " + " | ".join(f"{k} MB" for k in sides) + " |")
        print("|---" * (2 * len(sides) + 3) + "|")
        for r in out["rows"]:
            b, h, s, d = r["shape"]
            g = r["sides"]["ingot"][part]["gflops"]
            print(f"| {r['name']} [{b},{h},{s},{d}] | " + " | ".join(fmt(r["sides"][k][part]["ms"]) for k in sides) +
                  f" | {g[0]:.0f}-{g[1]:.0f} | {r['gemm_peak_gflops'][0]:.0f}-{r['gemm_peak_gflops'][1]:.0f} | " +
                  " | ".join(f"{r['sides'][k][part]['peak_mb_over_inputs']:.0f}" for k in sides) + " |")
        print()


if __name__ == "__main__":
    sys.exit(main())
