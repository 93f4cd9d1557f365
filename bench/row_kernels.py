#!/usr/bin/env python3
"""Row kernels against memory bandwidth (issue 13, benchmark 4; scripts/bench_attention.sh --rows):
softmax, log_softmax, layer_norm and rms_norm over the last axis of a float32 [64, 128, 1024] array
(32 MiB in, 32 MiB out), and batch_norm over it as [N 64, C 128, L 1024] (per channel: with given
statistics, as inference runs it, and with the batch's own, `moments` over N and L first, as
training runs it), each a one-op function compiled with ml.compile on the CPU backend, beside

  memcpy, new tensor   torch's x.clone(): a copy into a new tensor each call, the allocation path an
                       op's output takes (2 threads); NumPy's copy (one thread) without torch
  memcpy, reused       torch's y.copy_(x) into one buffer
  torch                torch.softmax / log_softmax / F.layer_norm / F.rms_norm / F.batch_norm
                       (training=False, then True; eager, no_grad)

each timed alone in its own loop (2 threads, the median of --reps calls after a warm-up, the caches
evicted before each call: every side reads and writes memory, not a partly warm L3), the whole set
--runs times so the spread shows. ingot is fed an ml.array made once (a NumPy argument is copied
into an ingot tensor on every call: 4 ms of the 32 MiB here, measured apart as "ingot softmax, NumPy
in"). GB/s counts the bytes read and written once (2 x 32 MiB); the shares of memcpy are a memcpy's
time over the kernel's (the two called in turn, the median of --reps pairs; range over the runs),
into a new tensor (what an op's output costs, page faults included where the allocator does not
recycle) and into one reused buffer (the bandwidth limit); the issue's target is at least 70%.
Outputs are checked against NumPy in float64. Writes bench/results/row_kernels.json and prints a
Markdown table.

  python bench/row_kernels.py [--quick] [--runs 5] [--reps 20] [--out bench/results/row_kernels.json]
"""
import argparse
import os
import sys
import time

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine, measured_utc, write_json  # noqa: E402

import ingot as ml  # noqa: E402

try:
    import torch
    torch.set_num_threads(THREADS)
except ImportError:
    torch = None

EPS = 1e-5


EVICT = None


def evicted_ms(fn):
    """One call of fn in ms, the caches evicted before it (128 MiB written, not timed): 64 MiB of
    traffic against a 32 MiB L3 otherwise hits it by chance, and a reused-buffer memcpy ran
    anywhere from 0.48 to 1.25 ms within one run (2026-11-29), so every side, the memcpy included,
    is timed from memory."""
    global EVICT
    if EVICT is None:
        EVICT = np.zeros(32 << 20, dtype=np.float32)
    EVICT += 1.0
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def timed_from_memory(fn, reps):
    """Like machine.timed, each call from memory (evicted_ms): median, fastest and slowest ms."""
    fn()
    times = sorted(evicted_ms(fn) for _ in range(reps))
    return {"ms": times[len(times) // 2], "min_ms": times[0], "max_ms": times[-1], "reps": reps}


def paired_ratio(copy, kernel, reps):
    """The median over `reps` pairs of a memcpy's time over the kernel's, the two called in turn
    (the memcpy first), each from memory."""
    copy(), kernel()
    ratios = sorted(evicted_ms(copy) / evicted_ms(kernel) for _ in range(reps))
    return ratios[len(ratios) // 2]


def numpy_oracle(op, x):
    x = x.astype(np.float64)
    if op in ("softmax", "log_softmax"):
        s = x - x.max(-1, keepdims=True)
        lse = np.log(np.exp(s).sum(-1, keepdims=True))
        return np.exp(s - lse) if op == "softmax" else s - lse
    if op == "layer_norm":
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + EPS)
    if op == "batch_norm":
        w, b, m, v = (a.astype(np.float64)[None, :, None] for a in channel_params(x.shape[1]))
        return (x - m) / np.sqrt(v + EPS) * w + b
    if op == "batch_norm, batch statistics":
        w, b, _, _ = (a.astype(np.float64)[None, :, None] for a in channel_params(x.shape[1]))
        return (x - x.mean((0, 2), keepdims=True)) / np.sqrt(x.var((0, 2), keepdims=True) + EPS) * w + b
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)


def channel_params(c):
    """batch_norm's weight, bias, running mean and running variance for c channels (fixed values)."""
    rng = np.random.default_rng(1)
    return (rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-0.5, 0.5, c).astype(np.float32),
            rng.uniform(-0.1, 0.1, c).astype(np.float32), rng.uniform(0.5, 2.0, c).astype(np.float32))


def ingot_fn(op, channels):
    w, b, m, v = (ml.array(a) for a in channel_params(channels))

    def batch_statistics(x):
        mean, var = ml.moments(x, axis=(0, 2))
        return ml.op("batch_norm", x, w, b, mean, var, eps=EPS)
    fns = {"softmax": lambda x: ml.softmax(x), "log_softmax": lambda x: ml.log_softmax(x),
           "layer_norm": lambda x: ml.op("layer_norm", x, eps=EPS),
           "rms_norm": lambda x: ml.rms_norm(x, eps=EPS),
           "batch_norm": lambda x: ml.op("batch_norm", x, w, b, m, v, eps=EPS),
           "batch_norm, batch statistics": batch_statistics}
    return ml.compile(fns[op])


def torch_fn(op, tx):
    f = torch.nn.functional
    d = tx.shape[-1]
    w, b, m, v = (torch.from_numpy(a) for a in channel_params(tx.shape[1]))
    fns = {"softmax": lambda: torch.softmax(tx, -1), "log_softmax": lambda: torch.log_softmax(tx, -1),
           "layer_norm": lambda: f.layer_norm(tx, (d,), eps=EPS),
           "batch_norm": lambda: f.batch_norm(tx, m, v, w, b, training=False, eps=EPS),
           # training=True updates running statistics in place: copies, so every call sees the same
           "batch_norm, batch statistics": lambda: f.batch_norm(tx, m.clone(), v.clone(), w, b, training=True, eps=EPS),
           "rms_norm": (lambda: f.rms_norm(tx, (d,), eps=EPS)) if hasattr(f, "rms_norm")
           else (lambda: tx * torch.rsqrt((tx * tx).mean(-1, keepdim=True) + EPS))}

    def run():
        with torch.no_grad():
            return fns[op]()
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default="bench/results/row_kernels.json")
    args = ap.parse_args()
    shape = (8, 128, 1024) if args.quick else (64, 128, 1024)
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    nbytes = x.nbytes
    ops = ["softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm", "batch_norm, batch statistics"]
    sides = {}
    if torch is not None:
        tx = torch.from_numpy(x)
        ty = torch.empty_like(tx)
        sides["memcpy, new tensor"] = lambda: tx.clone()
        sides["memcpy, reused"] = lambda: ty.copy_(tx)
    else:
        sides["memcpy, new tensor"] = lambda: x.copy()
    errors = {}
    xa = ml.array(x)
    for op in ops:
        f = ingot_fn(op, shape[1])
        want = numpy_oracle(op, x)
        errors["ingot " + op] = float(np.max(np.abs(np.asarray(f(xa)) - want)))
        sides["ingot " + op] = lambda f=f: f(xa)
        if op == "softmax":
            sides["ingot softmax, NumPy in"] = lambda f=f: f(x)
        if torch is not None:
            t = torch_fn(op, tx)
            errors["torch " + op] = float(np.max(np.abs(t().numpy() - want)))
            sides["torch " + op] = t
    runs = {k: [] for k in sides}
    for _ in range(args.runs):
        for k, fn in sides.items():
            time.sleep(0.3)  # the last side's threads go idle first
            runs[k].append(timed_from_memory(fn, args.reps))
    # The shares: each kernel's calls alternating with the memcpy's, a ratio per pair, the median
    # of a run's pairs (this VM's memory speed drifts within seconds, so times taken in separate
    # loops pair badly; see timed_from_memory).
    pairs = {k: {c: [] for c in ("memcpy, new tensor", "memcpy, reused") if c in sides}
             for k in sides if k.startswith(("ingot", "torch"))}
    for _ in range(args.runs):
        for k, per_copy in pairs.items():
            for c, ratios in per_copy.items():
                time.sleep(0.3)
                ratios.append(paired_ratio(sides[c], sides[k], args.reps))
    result = {}
    for k, ts in runs.items():
        ms = [t["ms"] for t in ts]
        result[k] = {"ms": [min(ms), max(ms)], "gbps": [2 * nbytes / max(ms) / 1e6, 2 * nbytes / min(ms) / 1e6],
                     "runs": ts}
    copies = {"fraction_of_memcpy": "memcpy, new tensor"}
    if "memcpy, reused" in result:
        copies["fraction_of_memcpy_reused"] = "memcpy, reused"
    for k in pairs:
        for key, side in copies.items():
            result[k][key] = [min(pairs[k][side]), max(pairs[k][side])]
    out = {"tool": "bench/row_kernels.py", "measured_utc": measured_utc(), "runs": args.runs, "reps": args.reps,
           "shape": list(shape), "bytes_per_array": nbytes,
           "machine": machine(THREADS),
           "versions": {"numpy": np.__version__, "torch": torch.__version__ if torch else None},
           "max_abs_error_vs_float64": errors, "sides": result}
    write_json(args.out, out)
    print_table(out)
    return 0


def print_table(out):
    print(f"\n{out['shape']} float32, {THREADS} threads, {out['runs']} runs (range of medians; shares: the median "
          f"of memcpy's time over the kernel's, called in turn, range over runs), "
          f"{out['machine']['cpu']}, {out['measured_utc']} UTC\n")
    print("| kernel | ms | GB/s (read + write) | share of memcpy: new tensor | reused buffer | max abs error |")
    print("| --- | --- | --- | --- | --- | --- |")
    pct = lambda r: f"{100 * r[0]:.0f}-{100 * r[1]:.0f}%" if r else ""  # noqa: E731
    for k, v in out["sides"].items():
        err = out["max_abs_error_vs_float64"].get(k)
        print(f"| {k} | {v['ms'][0]:.2f}-{v['ms'][1]:.2f} | {v['gbps'][0]:.1f}-{v['gbps'][1]:.1f} | "
              f"{pct(v.get('fraction_of_memcpy'))} | {pct(v.get('fraction_of_memcpy_reused'))} | "
              f"{'' if err is None else f'{err:.1e}'} |")


if __name__ == "__main__":
    sys.exit(main())
