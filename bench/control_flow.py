"""Control-flow benchmark: the per-iteration cost of a loop of small steps.

A while_loop of N iterations whose body is one small elementwise update of a [16] float32 state
(`x = x * 0.999 + 1`, a counter), run by:
  - ingot: ml.compile(fn) with the loop inside (the CPU backend; the body is a compiled subgraph the
    loop's host callback runs every iteration), and the same function eagerly (reference
    interpreter);
  - PyTorch eager: a Python loop of torch ops; JAX: jax.jit of lax.while_loop (where installed).
Each runtime is timed alone in its own loop (median of --reps after a warm-up); per-iteration
microseconds = (time(N) - time(0 iterations)) / N, so fixed call overheads cancel.
  python bench/control_flow.py [--iterations N] [--reps R] [--json PATH]
"""
import argparse
import os
import sys

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402

import ingot as ml  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine, measured_utc, timed, write_json  # noqa: E402


def ingot_loop(n, compiled):
    def fn(x):
        i, y = ml.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 0.999 + 1.0), (np.int32(0), x))
        return y
    f = ml.compile(fn) if compiled else fn
    x = ml.array(np.zeros(16, np.float32))
    return lambda: ml.eval(f(x))


def torch_loop(n):
    import torch
    torch.set_num_threads(THREADS)
    x0 = torch.zeros(16)

    def run():
        x, i = x0, 0
        while i < n:
            x = x * 0.999 + 1.0
            i += 1
        return x
    return run


def jax_loop(n):
    import jax
    import jax.numpy as jnp

    @jax.jit
    def run(x):
        return jax.lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 0.999 + 1.0), (0, x))[1]
    x = jnp.zeros(16, jnp.float32)
    return lambda: run(x).block_until_ready()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    runners = {"ingot compiled (CPU)": lambda n: ingot_loop(n, True), "ingot eager (reference)": lambda n: ingot_loop(n, False),
               "PyTorch eager (Python loop)": torch_loop, "JAX jit (lax.while_loop)": jax_loop}
    rows = []
    for name, make in runners.items():
        try:
            full, empty = make(a.iterations), make(0)
        except ImportError:
            continue
        t_full, t_empty = timed(full, a.reps)["ms"], timed(empty, a.reps)["ms"]
        rows.append({"runtime": name, "iterations": a.iterations, "total_ms": t_full,
                     "per_iteration_us": (t_full - t_empty) / a.iterations * 1e3})
    print(f"| runtime | {a.iterations} iterations, ms | per iteration, µs |\n|---|---|---|")
    for r in rows:
        print(f"| {r['runtime']} | {r['total_ms']:.2f} | {r['per_iteration_us']:.2f} |")
    if a.json:
        write_json(a.json, {"machine": machine(THREADS), "measured_utc": measured_utc(), "rows": rows})


if __name__ == "__main__":
    main()
