#!/usr/bin/env python3
"""The peers of bench/bench_cpu.cpp: the same workloads and shapes in other frameworks.

  gelu (erf form) on float32 [32, 1000, 4096]
  ExampleMLP forward: 784 -> 256 -> relu -> 10, batch 128
  mlp_train (PyTorch only, for bench_fncompile): one SGD step of that MLP with softmax
      cross-entropy, batch 128, lr 0.01 (eager and torch.compile)
  ExampleCNN forward (inference): conv 3->64 k3, batch_norm, relu, conv 64->128 k3,
                                  global average pool, linear 128 -> 10; batch 32, 3x224x224

Peers: PyTorch eager, torch.compile, JAX jit, ONNX Runtime (graphs built with the onnx helper),
MLX mx.compile. Each runs only if it imports; otherwise it is recorded as "not installed".
Threads: 2 everywhere it can be set. Times are medians of a few repetitions after one warm-up
call; the first call is timed on its own ("first_ms": tracing + compiling for the compiled ones).
A workload whose first call takes over 30 s is repeated once; over 120 s, not at all (its figure is
then that first call, compile included: "reps": 0).

  python bench/peers.py [--quick] [--out bench/results/peers.json] [--only torch,jax,...]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))
os.environ.setdefault(
    "XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={THREADS}")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402  (numpy is required; the peers are optional)

from machine import cpu_model, measured_utc, ort_session  # noqa: E402


def workloads(quick):
    return {
        "gelu": {"shape": [4, 1000, 4096] if quick else [32, 1000, 4096]},
        "mlp": {"batch": 128},
        "cnn": {"batch": 2 if quick else 32},
    }


def reps_for(name, quick):
    return {"gelu": 5, "mlp": 5 if quick else 20, "mlp_train": 5 if quick else 20, "cnn": 2 if quick else 3}[name]


def make_data(wl):
    rng = np.random.default_rng(1)
    f32 = np.float32
    i = np.arange(int(np.prod(wl["gelu"]["shape"])), dtype=np.int64) % 100003
    gx = (3.0 * np.sin(0.37 * i)).astype(f32).reshape(wl["gelu"]["shape"])
    b, n = wl["mlp"]["batch"], wl["cnn"]["batch"]
    d = {
        "gelu_x": gx,
        "mlp_x": rng.standard_normal((b, 784)).astype(f32),
        "mlp_w1": (rng.uniform(-1, 1, (784, 256)) / np.sqrt(784)).astype(f32),
        "mlp_b1": np.zeros(256, f32),
        "mlp_w2": (rng.uniform(-1, 1, (256, 10)) / np.sqrt(256)).astype(f32),
        "mlp_b2": np.zeros(10, f32),
        "mlp_y": (np.arange(b, dtype=np.int64) * 7) % 10,
        "cnn_x": rng.standard_normal((n, 3, 224, 224)).astype(f32),
        "cnn_w1": (rng.uniform(-1, 1, (64, 3, 3, 3)) / np.sqrt(27)).astype(f32),
        "cnn_b1": np.zeros(64, f32),
        "bn_g": np.ones(64, f32), "bn_b": np.zeros(64, f32),
        "bn_m": np.zeros(64, f32), "bn_v": np.ones(64, f32),
        "cnn_w2": (rng.uniform(-1, 1, (128, 64, 3, 3)) / np.sqrt(576)).astype(f32),
        "cnn_b2": np.zeros(128, f32),
        "cnn_wl": (rng.uniform(-1, 1, (128, 10)) / np.sqrt(128)).astype(f32),
        "cnn_bl": np.zeros(10, f32),
    }
    return d


SLOW_MS = 30000.0        # first call slower than this: one timed repetition only
VERY_SLOW_MS = 120000.0  # slower than this: the first call is the figure, not repeated


def timeit(fn, reps, warmups=0):
    """Median ms of `reps` calls; the first call is timed on its own ("first_ms"), then `warmups`
    more calls run untimed."""
    t0 = time.perf_counter()
    fn()
    first = (time.perf_counter() - t0) * 1e3
    for _ in range(warmups):
        fn()
    if first > VERY_SLOW_MS:  # too slow to repeat on this machine: the first call is the figure
        return {"ms": first, "first_ms": first, "reps": 0, "note": "first call only (slow)"}
    if first > SLOW_MS:
        reps = 1
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return {"ms": statistics.median(times), "first_ms": first, "reps": reps}


# ---- peers: each returns {workload: callable running it once, to completion} ---------------

def torch_fns(d, compiled):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(THREADS)
    t = {k: torch.from_numpy(v) for k, v in d.items()}

    def gelu(x):
        return F.gelu(x)  # erf form (approximate='none')

    def mlp(x):
        h = torch.relu(x @ t["mlp_w1"] + t["mlp_b1"])
        return h @ t["mlp_w2"] + t["mlp_b2"]

    def cnn(x):
        h = F.conv2d(x, t["cnn_w1"], t["cnn_b1"])
        h = F.batch_norm(h, t["bn_m"], t["bn_v"], t["bn_g"], t["bn_b"], training=False, eps=1e-5)
        h = torch.relu(h)
        h = F.conv2d(h, t["cnn_w2"], t["cnn_b2"])
        h = h.mean(dim=(2, 3))
        return h @ t["cnn_wl"] + t["cnn_bl"]

    fns = {"gelu": gelu, "mlp": mlp, "cnn": cnn}
    if compiled:
        fns = {k: torch.compile(f, dynamic=False) for k, f in fns.items()}
    args = {"gelu": t["gelu_x"], "mlp": t["mlp_x"], "cnn": t["cnn_x"]}

    def run(name):
        def go():
            with torch.inference_mode():
                fns[name](args[name])
        return go
    runs = {k: run(k) for k in fns}

    # One SGD step with autograd (not under inference_mode); torch.compile compiles the step.
    params = [t[k].clone().requires_grad_(True) for k in ("mlp_w1", "mlp_b1", "mlp_w2", "mlp_b2")]

    def train_step(x, y):
        w1, b1, w2, b2 = params
        loss = F.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, y)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= 0.01 * p.grad
                p.grad = None
        return loss

    step = torch.compile(train_step, dynamic=False) if compiled else train_step
    runs["mlp_train"] = lambda: step(t["mlp_x"], t["mlp_y"])
    return runs, {"torch": torch.__version__}


def jax_fns(d):
    import jax
    import jax.numpy as jnp
    from jax import lax
    j = {k: jax.device_put(v) for k, v in d.items()}

    @jax.jit
    def gelu(x):
        return jax.nn.gelu(x, approximate=False)

    @jax.jit
    def mlp(x, w1, b1, w2, b2):
        return jnp.maximum(x @ w1 + b1, 0) @ w2 + b2

    @jax.jit
    def cnn(x, w1, b1, g, b, m, v, w2, b2, wl, bl):
        dn = ("NCHW", "OIHW", "NCHW")
        h = lax.conv_general_dilated(x, w1, (1, 1), "VALID", dimension_numbers=dn) + b1[None, :, None, None]
        s = g / jnp.sqrt(v + 1e-5)
        h = (h - m[None, :, None, None]) * s[None, :, None, None] + b[None, :, None, None]
        h = jnp.maximum(h, 0)
        h = lax.conv_general_dilated(h, w2, (1, 1), "VALID", dimension_numbers=dn) + b2[None, :, None, None]
        return h.mean(axis=(2, 3)) @ wl + bl

    fns = {
        "gelu": lambda: gelu(j["gelu_x"]).block_until_ready(),
        "mlp": lambda: mlp(j["mlp_x"], j["mlp_w1"], j["mlp_b1"], j["mlp_w2"], j["mlp_b2"]).block_until_ready(),
        "cnn": lambda: cnn(j["cnn_x"], j["cnn_w1"], j["cnn_b1"], j["bn_g"], j["bn_b"], j["bn_m"], j["bn_v"],
                           j["cnn_w2"], j["cnn_b2"], j["cnn_wl"], j["cnn_bl"]).block_until_ready(),
    }
    import jaxlib
    return fns, {"jax": jax.__version__, "jaxlib": jaxlib.__version__}


def ort_fns(d):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    def session(nodes, inputs, outputs, inits):
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
            [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = min(model.ir_version, 9)
        return ort_session(ort, model.SerializeToString(), THREADS)

    N = helper.make_node
    gelu = session(
        [N("Mul", ["x", "rsqrt2"], ["a"]), N("Erf", ["a"], ["e"]), N("Add", ["e", "one"], ["p"]),
         N("Mul", ["x", "p"], ["q"]), N("Mul", ["q", "half"], ["y"])],
        [("x", list(d["gelu_x"].shape))], ["y"],
        {"rsqrt2": np.float32(0.7071067811865476), "one": np.float32(1.0), "half": np.float32(0.5)})
    mlp = session(
        [N("MatMul", ["x", "w1"], ["h0"]), N("Add", ["h0", "b1"], ["h1"]), N("Relu", ["h1"], ["h2"]),
         N("MatMul", ["h2", "w2"], ["h3"]), N("Add", ["h3", "b2"], ["y"])],
        [("x", list(d["mlp_x"].shape))], ["y"],
        {"w1": d["mlp_w1"], "b1": d["mlp_b1"], "w2": d["mlp_w2"], "b2": d["mlp_b2"]})
    cnn = session(
        [N("Conv", ["x", "w1", "b1"], ["c1"]),
         N("BatchNormalization", ["c1", "g", "b", "m", "v"], ["n1"], epsilon=1e-5),
         N("Relu", ["n1"], ["r1"]), N("Conv", ["r1", "w2", "b2"], ["c2"]),
         N("GlobalAveragePool", ["c2"], ["p"]), N("Flatten", ["p"], ["f"]),
         N("Gemm", ["f", "wl", "bl"], ["y"])],
        [("x", list(d["cnn_x"].shape))], ["y"],
        {"w1": d["cnn_w1"], "b1": d["cnn_b1"], "g": d["bn_g"], "b": d["bn_b"], "m": d["bn_m"],
         "v": d["bn_v"], "w2": d["cnn_w2"], "b2": d["cnn_b2"], "wl": d["cnn_wl"], "bl": d["cnn_bl"]})
    fns = {
        "gelu": lambda: gelu.run(None, {"x": d["gelu_x"]}),
        "mlp": lambda: mlp.run(None, {"x": d["mlp_x"]}),
        "cnn": lambda: cnn.run(None, {"x": d["cnn_x"]}),
    }
    return fns, {"onnxruntime": ort.__version__, "onnx": onnx.__version__}


def mlx_fns(d):
    import mlx.core as mx
    mx.set_default_device(mx.cpu)
    m = {k: mx.array(v) for k, v in d.items()}
    # MLX convolutions are NHWC with OHWI weights: the layouts are converted here, untimed.
    x_nhwc = mx.array(np.ascontiguousarray(d["cnn_x"].transpose(0, 2, 3, 1)))
    w1 = mx.array(np.ascontiguousarray(d["cnn_w1"].transpose(0, 2, 3, 1)))
    w2 = mx.array(np.ascontiguousarray(d["cnn_w2"].transpose(0, 2, 3, 1)))

    @mx.compile
    def gelu(x):
        return x * 0.5 * (1.0 + mx.erf(x * 0.7071067811865476))

    @mx.compile
    def mlp(x, w1_, b1, w2_, b2):
        return mx.maximum(x @ w1_ + b1, 0) @ w2_ + b2

    @mx.compile
    def cnn(x, w1_, b1, g, b, mu, v, w2_, b2, wl, bl):
        h = mx.conv2d(x, w1_) + b1
        h = (h - mu) * (g / mx.sqrt(v + 1e-5)) + b
        h = mx.maximum(h, 0)
        h = mx.conv2d(h, w2_) + b2
        return h.mean(axis=(1, 2)) @ wl + bl

    fns = {
        "gelu": lambda: mx.eval(gelu(m["gelu_x"])),
        "mlp": lambda: mx.eval(mlp(m["mlp_x"], m["mlp_w1"], m["mlp_b1"], m["mlp_w2"], m["mlp_b2"])),
        "cnn": lambda: mx.eval(cnn(x_nhwc, w1, m["cnn_b1"], m["bn_g"], m["bn_b"], m["bn_m"], m["bn_v"],
                                   w2, m["cnn_b2"], m["cnn_wl"], m["cnn_bl"])),
    }
    return fns, {"mlx": getattr(mx, "__version__", "unknown")}


PEERS = {
    "torch eager": ("torch", lambda d: torch_fns(d, False)),
    "torch.compile": ("torch", lambda d: torch_fns(d, True)),
    "jax jit": ("jax", jax_fns),
    "onnxruntime": ("onnxruntime", ort_fns),
    "mlx mx.compile": ("mlx.core", mlx_fns),
}


def importable(module):
    try:
        __import__(module)
        return True, ""
    except Exception as e:  # an installed package that fails to import counts as missing
        return False, f"{type(e).__name__}: {e}"


def run_main(tool, default_out, workloads_of, make_data_of, peers, reps_for, warmups=0, extra=None):
    """The command line shared with bench/peers_train.py: [--quick] [--out PATH] [--only a,b].
    Runs each importable peer's workloads (`peers`: name -> (module, make(data) -> ({workload:
    callable}, versions))) and writes the JSON the README tables are made from."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=default_out)
    ap.add_argument("--only", default="", help="comma-separated peer names (default: all)")
    args = ap.parse_args()
    wl = workloads_of(args.quick)
    d = make_data_of(wl)
    result = {
        "tool": tool,
        "quick": args.quick,
        "measured_utc": measured_utc(),
        "machine": {"cpu": cpu_model(), "hardware_threads": os.cpu_count(), "threads_used": THREADS},
        "versions": {"python": platform.python_version(), "numpy": np.__version__},
        **(extra or {}),
        "workloads": wl,
        "peers": {},
    }
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    for name, (module, make) in peers.items():
        if only and name not in only:
            continue
        ok, why = importable(module)
        if not ok:
            print(f"{name:16s} not installed ({why.splitlines()[0][:120] if why else module})", flush=True)
            result["peers"][name] = {"status": "not installed", "detail": why[:300]}
            continue
        entry = {"status": "ok"}
        try:
            fns, versions = make(d)
            result["versions"].update(versions)
            for wname, fn in fns.items():
                try:
                    r = timeit(fn, reps_for(wname, args.quick), warmups)
                    entry[wname] = r
                    print(f"{name:16s} {wname:9s} {r['ms']:10.2f} ms (median of {r['reps']}; "
                          f"first call {r['first_ms']:.1f} ms)", flush=True)
                except Exception as e:
                    entry[wname] = {"error": f"{type(e).__name__}: {e}"[:300]}
                    print(f"{name:16s} {wname:9s} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
        except Exception as e:
            traceback.print_exc()
            entry = {"status": "failed", "detail": f"{type(e).__name__}: {e}"[:300]}
        result["peers"][name] = entry
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {args.out}")
    return 0


def main():
    return run_main("peers.py", "bench/results/peers.json", workloads, make_data, PEERS, reps_for)


if __name__ == "__main__":
    sys.exit(main())
