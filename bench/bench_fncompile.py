#!/usr/bin/env python3
"""bench_fncompile's two workloads compiled from Python with ``ml.compile``: the MLX gelu example
(x * (1 + erf(x / sqrt 2)) / 2 on float32 [32, 1000, 4096]) and the MLP SGD step (784 -> 256 -> 10,
batch 128, softmax cross-entropy, the backward written with array ops exactly as tests/array_mlp.h
writes it, parameters as captured state). The graphs are the C++ benchmark's, so the difference
from its compile(fn) column is what the Python layer adds per call. Medians after a warm-up; the
first call (trace + build) on its own.

  python bench/bench_fncompile.py [--quick] [--out bench/results/fncompile_py.json]

Needs a Python where `import ingot` works (scripts/bench.sh uses build/python-venv).
"""
import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

import ingot as ml

from machine import cpu_model, measured_utc  # the same machine description as the peers' files


def gelu(x):
    return x * (1.0 + ml.erf(x / math.sqrt(2.0))) / 2.0


def mlp_sgd_step(p, x, y, lr):
    """tests/array_mlp.h's step: rebinds p's entries, returns the mean loss."""
    batch = float(x.shape[0])
    h = ml.relu(x @ p["w1"] + p["b1"])
    logits = h @ p["w2"] + p["b2"]
    loss = -ml.mean(ml.sum(y * ml.log_softmax(logits, axis=-1), axis=1))
    dlogits = (ml.softmax(logits, axis=-1) - y) / batch
    dw2, db2 = h.T @ dlogits, ml.sum(dlogits, axis=0)
    dz = ml.where(h > 0.0, dlogits @ p["w2"].T, 0.0)
    dw1, db1 = x.T @ dz, ml.sum(dz, axis=0)
    for k, g in (("w1", dw1), ("b1", db1), ("w2", dw2), ("b2", db2)):
        p[k] = p[k] - lr * g
    return loss


def timed(fn, reps):
    t0 = time.perf_counter()
    fn()
    first = (time.perf_counter() - t0) * 1e3
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return first, statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default="bench/results/fncompile_py.json")
    args = ap.parse_args()
    cache = tempfile.TemporaryDirectory(prefix="ingot-bench-fncompile-py-")  # a cold cache, as in the C++ run
    ml.set_compile_config(backend=ml.CpuBackend(cache_dir=cache.name))
    rng = np.random.default_rng(0)

    shape = (4, 1000, 4096) if args.quick else (32, 1000, 4096)
    x = ml.array(rng.uniform(-3, 3, shape).astype(np.float32))
    compiled_gelu = ml.compile(gelu)
    gelu_first, gelu_ms = timed(lambda: compiled_gelu(x).eval(), 3 if args.quick else 5)
    print(f"gelu {list(shape)}: ml.compile {gelu_ms:.2f} ms (first call {gelu_first:.1f} ms)", flush=True)

    params = {"w1": ml.random.normal((784, 256), 0, 0.05, key=1), "b1": ml.zeros(256),
              "w2": ml.random.normal((256, 10), 0, 0.05, key=2), "b2": ml.zeros(10)}
    ml.eval(params)
    xb = ml.array(rng.uniform(-1, 1, (128, 784)).astype(np.float32))
    yb = ml.one_hot(ml.array(np.arange(128) * 7 % 10), 10)
    step = ml.compile(lambda a, b: mlp_sgd_step(params, a, b, 0.01), inputs=[params], outputs=[params])
    step_first, step_ms = timed(lambda: step(xb, yb).eval(), 12 if args.quick else 40)
    print(f"mlp train step (batch 128): ml.compile {step_ms:.2f} ms/iter (first call {step_first:.1f} ms)", flush=True)

    result = {"tool": "bench_fncompile.py", "quick": args.quick, "measured_utc": measured_utc(),
              "machine": {"cpu": cpu_model(), "hardware_threads": os.cpu_count(),
                          "threads_used": int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count())},
              "versions": {"python": platform.python_version(), "numpy": np.__version__,
                           "ingot": getattr(ml, "__version__", "unknown")},
              "gelu_shape": str(list(shape)),
              "gelu": {"compiled_ms": gelu_ms, "compiled_first_call_ms": gelu_first},
              "mlp_train": {"batch": 128, "compiled_ms": step_ms, "compiled_first_call_ms": step_first}}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
