"""LSTM benchmark: a 2-layer LSTM (input 128, hidden 256, seq 64, batch 32, float32, 2 threads),
forward and a training step (gradients of a sum-of-squares loss w.r.t. every weight), in:
  - ingot: ml.lstm layers (a scan each, the input matmul hoisted out of the loop) under
    ml.compile (CPU backend), forward and ml.compile(ml.grad(loss)); and the zoo's ml.LSTM block
    in a logical model (each layer a Scan block), evaluate and evaluate with gradients;
  - PyTorch: torch.nn.LSTM eager (its fused kernels), and torch.compile of the same module;
  - JAX: jax.jit of the same equations over lax.scan, forward and jax.grad.
Same weights everywhere; the forward's max relative difference to PyTorch is printed beside.
Each runtime is timed alone in its own loop, median of --reps after a warm-up.
  python bench/lstm.py [--reps R] [--json PATH] [--no-torch-compile]
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

T, B, I, H, LAYERS = 64, 32, 128, 256, 2


def make_weights():
    r = np.random.default_rng(0)
    k = 1 / np.sqrt(H)
    ws = []
    for layer in range(LAYERS):
        i = I if layer == 0 else H
        ws.append([r.uniform(-k, k, s).astype(np.float32) for s in [(4 * H, i), (4 * H, H), (4 * H,), (4 * H,)]])
    return ws


def ingot_runs(x, ws):
    h0 = np.zeros((B, H), np.float32)

    def forward(x, *flat):
        y = x
        for layer in range(LAYERS):
            y, _, _ = ml.lstm(y, h0, h0, *flat[4 * layer:4 * layer + 4])
        return y

    def loss(flat, x):
        return ml.sum(forward(x, *flat) ** 2)

    fwd = ml.compile(forward)
    step = ml.compile(ml.grad(loss))
    xs = ml.array(x)
    flat = [ml.array(w) for layer in ws for w in layer]
    return (lambda: np.asarray(fwd(xs, *flat)),
            lambda: ml.eval(step(flat, xs)))


def ingot_block_runs(x, ws):
    """The zoo's ml.LSTM block in a logical model (PyTorch's parameter names), compiled for the CPU
    backend: evaluate, and evaluate with the gradients of a sum-of-squares loss."""
    model = ml.Model()
    model |= ml.LSTM(I, H, num_layers=LAYERS)(input="x", output=ml.IOKey("y", expose=True))
    model |= ml.Model.primitive("mul", ["left", "right"])(left="y", right="y", output="sq")
    model |= ml.Model.primitive("sum", ["input"])(input="sq", output=ml.IOKey("loss", expose=True))
    pm = ml.compile(model, ml.CpuBackend(), shapes={"x": [T, B, I]})
    names = ["weight_ih_l{}", "weight_hh_l{}", "bias_ih_l{}", "bias_hh_l{}"]
    params = {"lstm_0." + n.format(layer): w for layer in range(LAYERS) for n, w in zip(names, ws[layer])}
    seed = {"loss": np.float32(1.0)}
    return (lambda: np.asarray(pm.evaluate(params, {"x": x})["y"]),
            lambda: pm.evaluate(params, {"x": x}, output_gradients=seed))


def torch_runs(x, ws, compile_too):
    import torch
    torch.set_num_threads(THREADS)
    m = torch.nn.LSTM(I, H, num_layers=LAYERS)
    with torch.no_grad():
        for layer, w in enumerate(ws):
            for name, v in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), w):
                getattr(m, f"{name}_l{layer}").copy_(torch.from_numpy(v))
    xt = torch.from_numpy(x)

    def fwd(module):
        def run():
            with torch.no_grad():
                return module(xt)[0].numpy()
        return run

    def step(module):
        def run():
            module.zero_grad()
            (module(xt)[0] ** 2).sum().backward()
        return run

    runs = {"PyTorch eager": (fwd(m), step(m))}
    if compile_too:
        c = torch.compile(m)
        runs["torch.compile"] = (fwd(c), step(c))
    return runs


def jax_runs(x, ws):
    import jax
    import jax.numpy as jnp

    def layer(y, w):
        w_ih, w_hh, b_ih, b_hh = w
        xw = y @ w_ih.T + b_ih

        def cell(carry, xt):
            h, c = carry
            g = xt + h @ w_hh.T + b_hh
            i, f, gg, o = jnp.split(g, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        z = jnp.zeros((B, H), jnp.float32)
        return jax.lax.scan(cell, (z, z), xw)[1]

    def forward(params, x):
        y = x
        for w in params:
            y = layer(y, w)
        return y

    params = [[jnp.asarray(v) for v in w] for w in ws]
    xj = jnp.asarray(x)
    f = jax.jit(forward)
    g = jax.jit(jax.grad(lambda p, x: jnp.sum(forward(p, x) ** 2)))
    return (lambda: np.asarray(f(params, xj)),
            lambda: jax.tree_util.tree_map(lambda a: a.block_until_ready(), g(params, xj)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default="")
    ap.add_argument("--no-torch-compile", action="store_true")
    a = ap.parse_args()
    x = np.random.default_rng(1).standard_normal((T, B, I)).astype(np.float32)
    ws = make_weights()
    runs = {"ingot (ml.compile, CPU)": ingot_runs(x, ws), "ingot ml.LSTM block (CPU)": ingot_block_runs(x, ws)}
    try:
        runs.update(torch_runs(x, ws, not a.no_torch_compile))
    except ImportError:
        pass
    try:
        runs["JAX jit (lax.scan)"] = jax_runs(x, ws)
    except ImportError:
        pass
    reference = runs["PyTorch eager"][0]() if "PyTorch eager" in runs else None
    rows = []
    for name, (fwd, step) in runs.items():
        out = fwd()
        err = float(np.max(np.abs(out - reference)) / max(1.0, np.max(np.abs(reference)))) if reference is not None else None
        f, s = timed(fwd, a.reps), timed(step, a.reps)
        rows.append({"runtime": name, "forward_ms": f["ms"], "forward_spread": (f["min_ms"], f["max_ms"]),
                     "step_ms": s["ms"], "step_spread": (s["min_ms"], s["max_ms"]), "max_rel_err_vs_torch": err})
    base = rows[0]
    print(f"2-layer LSTM, input {I}, hidden {H}, seq {T}, batch {B}, float32, 2 threads (x: peer ms / ingot ms)")
    print("| runtime | forward ms (spread) | training step ms (spread) | forward error vs PyTorch |\n|---|---|---|---|")
    for r in rows:
        ratio = "" if r is base else f" ({r['forward_ms'] / base['forward_ms']:.2f}x)"
        sratio = "" if r is base else f" ({r['step_ms'] / base['step_ms']:.2f}x)"
        err = "-" if r["max_rel_err_vs_torch"] is None else f"{r['max_rel_err_vs_torch']:.1e}"
        print(f"| {r['runtime']} | {r['forward_ms']:.1f} ({r['forward_spread'][0]:.1f}-{r['forward_spread'][1]:.1f}){ratio} | "
              f"{r['step_ms']:.1f} ({r['step_spread'][0]:.1f}-{r['step_spread'][1]:.1f}){sratio} | {err} |")
    if a.json:
        write_json(a.json, {"machine": machine(THREADS), "measured_utc": measured_utc(), "rows": rows})


if __name__ == "__main__":
    main()
