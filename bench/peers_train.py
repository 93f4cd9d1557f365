#!/usr/bin/env python3
"""The peers of bench/bench_train.cpp: one training step (forward, backward, SGD update) of the
same models in other frameworks.

  train_mlp: 784 -> 256 -> relu -> 10, batch 128
  train_cnn: conv 3->64 k3, batch norm (training mode: batch statistics, running statistics
             updated), relu, conv 64->128 k3, global average pool, linear 128 -> 10; batch 32,
             3x64x64 (--quick: 3x16x16)

Both with softmax cross-entropy on integer labels and SGD (lr 0.01, momentum 0.9, PyTorch's
formula), parameters and momentum updated every step. Peers: PyTorch eager (torch.optim.SGD),
torch.compile (the whole step, optimizer included, compiled), JAX jit (the whole step, buffers
donated). Timing and threads as bench/peers.py (medians after two warm-up calls, the first one
timed as "first_ms"; 2 threads).

  python bench/peers_train.py [--quick] [--out bench/results/peers_train.json] [--only torch,jax]
"""
import sys

from peers import THREADS, run_main  # sets the thread environment first

import numpy as np  # noqa: E402

LR, MOMENTUM = 0.01, 0.9


def workloads(quick):
    return {"train_mlp": {"input_shape": [128, 784]},
            "train_cnn": {"input_shape": [32, 3, 16, 16] if quick else [32, 3, 64, 64]}}


def reps_for(name, quick):
    return {"train_mlp": 5 if quick else 50, "train_cnn": 2 if quick else 5}[name]


def make_data(wl):
    rng = np.random.default_rng(2)
    f32 = np.float32

    def uniform(shape, fan_in):
        return (rng.uniform(-1, 1, shape) / np.sqrt(fan_in)).astype(f32)
    mlp_n = wl["train_mlp"]["input_shape"][0]
    cnn_shape = wl["train_cnn"]["input_shape"]
    return {
        "mlp_x": rng.standard_normal(wl["train_mlp"]["input_shape"]).astype(f32),
        "mlp_y": np.arange(mlp_n, dtype=np.int64) % 10,
        "mlp": {"w1": uniform((784, 256), 784), "b1": np.zeros(256, f32),
                "w2": uniform((256, 10), 256), "b2": np.zeros(10, f32)},
        "cnn_x": rng.standard_normal(cnn_shape).astype(f32),
        "cnn_y": np.arange(cnn_shape[0], dtype=np.int64) % 10,
        "cnn": {"w1": uniform((64, 3, 3, 3), 27), "b1": np.zeros(64, f32),
                "gamma": np.ones(64, f32), "beta": np.zeros(64, f32),
                "w2": uniform((128, 64, 3, 3), 576), "b2": np.zeros(128, f32),
                "wl": uniform((128, 10), 128), "bl": np.zeros(10, f32)},
    }


def torch_fns(d, compiled):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(THREADS)

    def params(group):
        return {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in d[group].items()}
    mlp_p, cnn_p = params("mlp"), params("cnn")
    running = {"mean": torch.zeros(64), "var": torch.ones(64)}

    def mlp_loss(p, x, y):
        return F.cross_entropy(torch.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"], y)

    def cnn_loss(p, x, y):
        h = F.conv2d(x, p["w1"], p["b1"])
        h = F.batch_norm(h, running["mean"], running["var"], p["gamma"], p["beta"], training=True, momentum=0.1)
        h = F.conv2d(torch.relu(h), p["w2"], p["b2"]).mean(dim=(2, 3))
        return F.cross_entropy(h @ p["wl"] + p["bl"], y)

    def stepper(loss_fn, p):
        opt = torch.optim.SGD(list(p.values()), lr=LR, momentum=MOMENTUM)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(p, x, y)
            loss.backward()
            opt.step()
            return loss
        return torch.compile(step, dynamic=False) if compiled else step
    mlp_step, cnn_step = stepper(mlp_loss, mlp_p), stepper(cnn_loss, cnn_p)
    t = {k: torch.from_numpy(d[k]) for k in ("mlp_x", "mlp_y", "cnn_x", "cnn_y")}
    return {"train_mlp": lambda: mlp_step(t["mlp_x"], t["mlp_y"]).item(),
            "train_cnn": lambda: cnn_step(t["cnn_x"], t["cnn_y"]).item()}, {"torch": torch.__version__}


def jax_fns(d):
    import jax
    import jax.numpy as jnp
    from jax import lax

    def cross_entropy(logits, y):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    def mlp_loss(p, state, x, y):
        return cross_entropy(jnp.maximum(x @ p["w1"] + p["b1"], 0) @ p["w2"] + p["b2"], y), state

    def cnn_loss(p, state, x, y):
        dn = ("NCHW", "OIHW", "NCHW")
        h = lax.conv_general_dilated(x, p["w1"], (1, 1), "VALID", dimension_numbers=dn) + p["b1"][None, :, None, None]
        mean, var = h.mean(axis=(0, 2, 3)), h.var(axis=(0, 2, 3))
        n = h.shape[0] * h.shape[2] * h.shape[3]
        state = {"mean": 0.9 * state["mean"] + 0.1 * mean, "var": 0.9 * state["var"] + 0.1 * var * n / (n - 1)}
        h = (h - mean[None, :, None, None]) * lax.rsqrt(var + 1e-5)[None, :, None, None]
        h = jnp.maximum(h * p["gamma"][None, :, None, None] + p["beta"][None, :, None, None], 0)
        h = lax.conv_general_dilated(h, p["w2"], (1, 1), "VALID", dimension_numbers=dn) + p["b2"][None, :, None, None]
        return cross_entropy(h.mean(axis=(2, 3)) @ p["wl"] + p["bl"], y), lax.stop_gradient(state)

    def stepper(loss_fn):
        def step(p, momentum, state, x, y):
            (loss, state), g = jax.value_and_grad(loss_fn, has_aux=True)(p, state, x, y)
            momentum = jax.tree_util.tree_map(lambda m, gi: MOMENTUM * m + gi, momentum, g)
            p = jax.tree_util.tree_map(lambda pi, m: pi - LR * m, p, momentum)
            return p, momentum, state, loss
        return jax.jit(step, donate_argnums=(0, 1, 2))

    def runner(loss_fn, group, x, y, state):
        box = {"p": {k: jnp.asarray(v) for k, v in d[group].items()},
               "m": {k: jnp.zeros_like(jnp.asarray(v)) for k, v in d[group].items()}, "s": state}
        step = stepper(loss_fn)
        xs, ys = jnp.asarray(x), jnp.asarray(y)

        def go():
            box["p"], box["m"], box["s"], loss = step(box["p"], box["m"], box["s"], xs, ys)
            return float(loss)
        return go
    import jaxlib
    return {"train_mlp": runner(mlp_loss, "mlp", d["mlp_x"], d["mlp_y"], {}),
            "train_cnn": runner(cnn_loss, "cnn", d["cnn_x"], d["cnn_y"],
                                {"mean": jnp.zeros(64), "var": jnp.ones(64)})}, \
        {"jax": jax.__version__, "jaxlib": jaxlib.__version__}


PEERS = {
    "torch eager": ("torch", lambda d: torch_fns(d, False)),
    "torch.compile": ("torch", lambda d: torch_fns(d, True)),
    "jax jit": ("jax", jax_fns),
}


def main():
    # One more warm-up call than peers.py: torch.compile compiles the step again on the second
    # call, once the optimizer has state (momentum buffers).
    return run_main("peers_train.py", "bench/results/peers_train.json", workloads, make_data, PEERS, reps_for,
                    warmups=1, extra={"optimizer": f"SGD lr {LR} momentum {MOMENTUM}"})


if __name__ == "__main__":
    sys.exit(main())
