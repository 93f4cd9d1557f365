#!/usr/bin/env python3
"""Transformer layers side by side (scripts/bench_attention.sh --layers): a BERT-base encoder
layer (post-norm, d_model 768, 12 heads, feed-forward 3072, erf GELU) at batch 1 and 8, sequence
128 and 512, and a GPT-2 small block (pre-norm, causal, tanh GELU) at batch 1, sequence 1024,
float32, run by

  ingot compile(fn)   ml.compile of the layer written with ml ops (weights passed each call)
  ingot zoo           ml.TransformerEncoderLayer compiled with its weights as constants
  ONNX Runtime        the PyTorch layer exported with torch.onnx.export (opset 17)
  PyTorch eager       the same layer in torch (F.scaled_dot_product_attention)
  torch.compile       that module under torch.compile
  JAX jit             the same layer in jax.numpy under jax.jit (weights passed each call)

and a training step of a 4-layer encoder (d_model 256, 4 heads, feed-forward 1024, batch 8,
sequence 128; mean squared error against a random target, SGD lr 0.01): ingot's compile(fn) of
value_and_grad and the update against PyTorch eager, torch.compile and JAX jit.

Coexistence (the first layer row): ingot compile(fn) and each of ONNX Runtime (as configured
above, and again with its workers' busy-wait off: session.intra_op.allow_spinning 0), PyTorch
eager and JAX jit share the process; each is timed alone, then the two alternate call by call,
and each side's slowdown (interleaved median / solo median) is reported.

Each runtime is timed alone in its own loop (2 threads; the median of --reps calls after a
warm-up, half a second after the last runtime's calls so its threads have stopped spinning); the
whole set runs --runs times and each cell shows the least and most of the runs' medians. GFLOP
counts the products (2 per multiply-add; attention's halved when causal; a training step 3x the
forward), beside the library GEMM peak measured in the same run (a 2048³ float32 matmul through
ingot's CPU backend). Outputs are compared with PyTorch eager's. Writes
bench/results/transformer_layers.json and, with --readme, the README's table between its
<!-- transformer-layers --> markers.

  python bench/transformer_layers.py [--quick] [--runs 2] [--reps 5] [--readme README.md]

Needs `import ingot` and numpy; torch, ONNX Runtime (with onnx) and JAX are measured where
importable (scripts/bench_attention.sh puts its benchmark environment on PYTHONPATH).
"""
import argparse
import os
import sys
import tempfile
import time
import traceback

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))
os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={THREADS}")

import numpy as np  # noqa: E402

import ingot as ml  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import cpu_model, measured_utc, ort_session, timed, write_json  # noqa: E402
from vision import gemm_peak_gflops  # noqa: E402

LAYERS = [("BERT-base layer", "bert", 1, 128), ("BERT-base layer", "bert", 8, 128), ("BERT-base layer", "bert", 1, 512),
          ("BERT-base layer", "bert", 8, 512), ("GPT-2 small block, causal", "gpt2", 1, 1024)]
WIDTH = dict(d=768, heads=12, ffn=3072)
TRAIN = dict(d=256, heads=4, ffn=1024, layers=4, batch=8, seq=128, lr=0.01)
RUNTIMES = ["ingot compile(fn)", "ingot zoo", "ONNX Runtime", "PyTorch eager", "torch.compile", "JAX jit"]
ORT_QUIET = "ONNX Runtime, no spinning"
# The runtimes that share the process with ingot in the coexistence rows (issue: threads that
# coexist): each alternates call by call with ingot compile(fn).
COEXIST = ["ONNX Runtime", ORT_QUIET, "PyTorch eager", "JAX jit"]


def random_weights(rng, d, ffn, prefix=""):
    """One layer's weights under the zoo's names, Linear weights stored [in, out]."""
    w = lambda *s: (rng.standard_normal(s) * 0.02).astype(np.float32)  # noqa: E731
    p = {}
    for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
        p[f"{prefix}self_attn.{n}.weight"], p[f"{prefix}self_attn.{n}.bias"] = w(d, d), w(d)
    p[prefix + "linear1.weight"], p[prefix + "linear1.bias"] = w(d, ffn), w(ffn)
    p[prefix + "linear2.weight"], p[prefix + "linear2.bias"] = w(ffn, d), w(d)
    for n in ("norm1", "norm2"):
        p[f"{prefix}{n}.weight"] = (1 + 10 * w(d)).astype(np.float32)
        p[f"{prefix}{n}.bias"] = w(d)
    return p


def layer(op, p, x, kind, heads, prefix=""):
    """One encoder layer in the primitives of `op` (ingot, torch or jax): post-norm with erf GELU
    ("bert") or pre-norm, causal, with tanh GELU ("gpt2"). The same definition for every side."""
    b, s, d = x.shape
    g = lambda name: p[prefix + name]  # noqa: E731

    def split(t):  # [B, S, D] -> [B, H, S, D / H]
        return op.transpose(op.reshape(t, (b, s, heads, d // heads)), (0, 2, 1, 3))

    def attention(h):
        q, k, v = (split(h @ g(f"self_attn.{n}.weight") + g(f"self_attn.{n}.bias")) for n in ("q_proj", "k_proj", "v_proj"))
        o = op.reshape(op.transpose(op.attention(q, k, v, kind == "gpt2"), (0, 2, 1, 3)), (b, s, d))
        return o @ g("self_attn.out_proj.weight") + g("self_attn.out_proj.bias")

    def feed_forward(h):
        a = op.gelu(h @ g("linear1.weight") + g("linear1.bias"), kind == "gpt2")
        return a @ g("linear2.weight") + g("linear2.bias")

    def norm(h, n):
        return op.layer_norm(h, g(n + ".weight"), g(n + ".bias"))

    if kind == "gpt2":
        x = x + attention(norm(x, "norm1"))
        return x + feed_forward(norm(x, "norm2"))
    x = norm(x + attention(x), "norm1")
    return norm(x + feed_forward(x), "norm2")


class IngotOps:
    transpose = staticmethod(ml.transpose)
    reshape = staticmethod(ml.reshape)
    layer_norm = staticmethod(ml.layer_norm)

    @staticmethod
    def attention(q, k, v, causal):
        return ml.scaled_dot_product_attention(q, k, v, is_causal=causal)

    @staticmethod
    def gelu(x, tanh):
        return ml.gelu(x, tanh_approximation=tanh)


def torch_ops(torch):
    F = torch.nn.functional

    class TorchOps:
        @staticmethod
        def transpose(x, axes):
            return x.permute(*axes)

        @staticmethod
        def reshape(x, shape):
            return x.reshape(shape)

        @staticmethod
        def layer_norm(x, w, b):
            return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)

        @staticmethod
        def attention(q, k, v, causal):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        @staticmethod
        def gelu(x, tanh):
            return F.gelu(x, approximate="tanh" if tanh else "none")

    return TorchOps


def jax_ops(jax):
    jnp = jax.numpy

    class JaxOps:
        transpose = staticmethod(jnp.transpose)
        reshape = staticmethod(jnp.reshape)

        @staticmethod
        def layer_norm(x, w, b):
            mu = jnp.mean(x, axis=-1, keepdims=True)
            var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
            return (x - mu) / jnp.sqrt(var + 1e-5) * w + b

        @staticmethod
        def attention(q, k, v, causal):
            s = q @ jnp.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]).astype(np.float32)
            if causal:
                n = s.shape[-1]
                s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
            return jax.nn.softmax(s, axis=-1) @ v

        @staticmethod
        def gelu(x, tanh):
            return jax.nn.gelu(x, approximate=tanh)

    return JaxOps


def forward_gflop(kind, b, s, d, ffn):
    dense = 2 * b * s * (4 * d * d + 2 * d * ffn)
    scores = 4 * b * s * s * d / (2 if kind == "gpt2" else 1)
    return (dense + scores) / 1e9


def rel_err(got, want):
    got = np.asarray(got, dtype=np.float64)
    return float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))


def try_import(name):
    try:
        return __import__(name), None
    except Exception as e:  # noqa: BLE001
        return None, f"not installed ({type(e).__name__}: {e})"[:200]


def layer_runners(kind, b, s, p, x, mods):
    """name -> (callable returning the output as NumPy, or an error string)."""
    d, heads, ffn = WIDTH["d"], WIDTH["heads"], WIDTH["ffn"]
    runners = {}
    fn = ml.compile(lambda params, inp: layer(IngotOps, params, inp, kind, heads))
    mp, mx = {k: ml.array(v) for k, v in p.items()}, ml.array(x)
    runners["ingot compile(fn)"] = lambda: np.asarray(fn(mp, mx))
    zoo = ml.TransformerEncoderLayer(d, heads, ffn, causal=kind == "gpt2", norm_first=kind == "gpt2",
                                     activation="gelu_tanh" if kind == "gpt2" else "gelu")
    pm = ml.compile(zoo, ml.CpuBackend(num_threads=THREADS), shapes={"input": [b, s, d]}, inference=True,
                    constant_keys=p)
    runners["ingot zoo"] = lambda: np.asarray(pm.evaluate({}, {"input": x})["output"])
    torch, why = mods["torch"]
    if torch is None:
        for name in ("ONNX Runtime", "PyTorch eager", "torch.compile"):
            runners[name] = why
    else:
        tp = {k: torch.from_numpy(v) for k, v in p.items()}
        tx = torch.from_numpy(x)
        ops = torch_ops(torch)

        class Layer(torch.nn.Module):
            def forward(self, inp):
                return layer(ops, tp, inp, kind, heads)

        module = Layer().eval()

        def eager():
            with torch.no_grad():
                return module(tx).numpy()

        runners["PyTorch eager"] = eager
        try:
            compiled = torch.compile(module)

            def run_compiled():
                with torch.no_grad():
                    return compiled(tx).numpy()

            runners["torch.compile"] = run_compiled
        except Exception as e:  # noqa: BLE001
            runners["torch.compile"] = f"{type(e).__name__}: {e}"[:200]
        ort, why_ort = mods["onnxruntime"]
        if ort is None:
            runners["ONNX Runtime"] = why_ort
        else:
            try:
                path = os.path.join(tempfile.mkdtemp(), f"{kind}.onnx")
                torch.onnx.export(module, (tx,), path, input_names=["input"], output_names=["output"], opset_version=17,
                                  dynamo=False)
                sess = ort_session(ort, path, THREADS)
                runners["ONNX Runtime"] = lambda: sess.run(None, {"input": x})[0]
                # For the coexistence rows: the same session with its workers' busy-wait off.
                quiet = ort_session(ort, path, THREADS, spinning=False)
                runners[ORT_QUIET] = lambda: quiet.run(None, {"input": x})[0]
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                runners["ONNX Runtime"] = f"{type(e).__name__}: {e}"[:200]
    jax, why_jax = mods["jax"]
    if jax is None:
        runners["JAX jit"] = why_jax
    else:
        jops = jax_ops(jax)
        jp = {k: jax.device_put(v) for k, v in p.items()}
        jx = jax.device_put(x)
        jitted = jax.jit(lambda params, inp: layer(jops, params, inp, kind, heads))
        runners["JAX jit"] = lambda: np.asarray(jitted(jp, jx).block_until_ready())
    return runners


def train_runners(mods, rng):
    """name -> a callable running one training step (the parameters carried from step to step)."""
    c = TRAIN
    p = {}
    for i in range(c["layers"]):
        p.update(random_weights(rng, c["d"], c["ffn"], prefix=f"layers.{i}."))
    x = rng.standard_normal((c["batch"], c["seq"], c["d"])).astype(np.float32)
    t = rng.standard_normal((c["batch"], c["seq"], c["d"])).astype(np.float32)

    def encoder(op, params, inp):
        for i in range(c["layers"]):
            inp = layer(op, params, inp, "bert", c["heads"], prefix=f"layers.{i}.")
        return inp

    runners = {}

    def ingot_step(params, inp, target):
        def loss_fn(q):
            e = encoder(IngotOps, q, inp) - target
            return ml.mean(e * e)

        loss, grads = ml.value_and_grad(loss_fn)(params)
        return loss, {k: params[k] - c["lr"] * grads[k] for k in params}

    step = ml.compile(ingot_step)
    state = {"p": {k: ml.array(v) for k, v in p.items()}}
    mx, mt = ml.array(x), ml.array(t)

    def run_ingot():
        loss, state["p"] = step(state["p"], mx, mt)
        return float(np.asarray(loss))

    runners["ingot compile(fn)"] = run_ingot
    torch, why = mods["torch"]
    if torch is None:
        runners["PyTorch eager"] = runners["torch.compile"] = why
    else:
        ops = torch_ops(torch)
        tx, tt = torch.from_numpy(x), torch.from_numpy(t)

        def torch_runner(compile_it):
            tp = {k: torch.from_numpy(v.copy()).requires_grad_() for k, v in p.items()}

            def loss_fn(params, inp, target):
                e = encoder(ops, params, inp) - target
                return (e * e).mean()

            f = torch.compile(loss_fn) if compile_it else loss_fn

            def run():
                loss = f(tp, tx, tt)
                loss.backward()
                with torch.no_grad():
                    for v in tp.values():
                        v -= c["lr"] * v.grad
                        v.grad = None
                return float(loss)

            return run

        runners["PyTorch eager"] = torch_runner(False)
        runners["torch.compile"] = torch_runner(True)
    jax, why_jax = mods["jax"]
    if jax is None:
        runners["JAX jit"] = why_jax
    else:
        jops = jax_ops(jax)
        jx, jt = jax.device_put(x), jax.device_put(t)

        def loss_fn(params, inp, target):
            e = encoder(jops, params, inp) - target
            return (e * e).mean()

        @jax.jit
        def jstep(params, inp, target):
            loss, grads = jax.value_and_grad(loss_fn)(params, inp, target)
            return loss, jax.tree_util.tree_map(lambda a, g: a - c["lr"] * g, params, grads)

        jstate = {"p": {k: jax.device_put(v) for k, v in p.items()}}

        def run_jax():
            loss, jstate["p"] = jstep(jstate["p"], jx, jt)
            return float(loss.block_until_ready())

        runners["JAX jit"] = run_jax
    return runners


def time_all(runners, reps, check=None):
    """Each runtime alone in its own loop: {name: {"ms": ..} or {"error": ..}}, plus each output's
    error against `check`'s reference (PyTorch eager's output) when given."""
    out = {}
    for name in RUNTIMES:
        r = runners.get(name)
        if r is None:
            continue
        if isinstance(r, str):
            out[name] = {"error": r}
            continue
        time.sleep(0.5)
        try:
            t = time.perf_counter()
            first = r()
            first_ms = (time.perf_counter() - t) * 1e3
            out[name] = timed(r, reps)
            out[name]["first_ms"] = first_ms
            if check is not None:
                out[name]["output"] = first
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            out[name] = {"error": f"{type(e).__name__}: {e}"[:200]}
    return out


def coexistence(runners, reps):
    """ingot compile(fn) and each peer of COEXIST in one process: each alone in its own loop, then
    the two alternating call by call (ingot, peer, ingot, ...), as a program that mixes runtimes
    does. The slowdown is the interleaved median over the solo median; a runtime whose threads
    busy-wait after a call take cores from the next call of the other."""
    me = runners["ingot compile(fn)"]
    out = {}
    for peer in COEXIST:
        other = runners.get(peer)
        if other is None or isinstance(other, str):
            out[peer] = {"error": other or "not measured"}
            continue
        try:
            solo = {}
            for name, fn in (("ingot", me), ("peer", other)):
                time.sleep(0.5)
                solo[name] = timed(fn, reps)["ms"]
            time.sleep(0.5)
            me(), other()
            mixed = {"ingot": [], "peer": []}
            for _ in range(reps):
                for name, fn in (("ingot", me), ("peer", other)):
                    t = time.perf_counter()
                    fn()
                    mixed[name].append((time.perf_counter() - t) * 1e3)
            row = {}
            for name in ("ingot", "peer"):
                m = sorted(mixed[name])[reps // 2]
                row[name] = {"solo_ms": solo[name], "interleaved_ms": m, "slowdown": m / solo[name]}
            out[peer] = row
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            out[peer] = {"error": f"{type(e).__name__}: {e}"[:200]}
    return out


def coexistence_table(rows):
    """The runs' coexistence rows as least-most slowdowns per pair."""
    lines = ["| alternating with | ingot solo ms | ingot interleaved ms | ingot slowdown | peer solo ms | "
             "peer interleaved ms | peer slowdown |", "|---|---|---|---|---|---|---|"]
    for peer in COEXIST:
        got = [r[peer] for r in rows if "ingot" in r.get(peer, {})]
        if not got:
            continue
        cells = [peer]
        for side in ("ingot", "peer"):
            for key, fmt in (("solo_ms", "{:.1f}"), ("interleaved_ms", "{:.1f}"), ("slowdown", "{:.2f}×")):
                lo, hi = min(g[side][key] for g in got), max(g[side][key] for g in got)
                cells.append(fmt.format(lo) + ("" if fmt.format(lo) == fmt.format(hi) else "-" + fmt.format(hi)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def merge(runs):
    """The runs' medians as least and most per runtime."""
    merged = {}
    for name in RUNTIMES:
        got = [r[name] for r in runs if name in r]
        if not got:
            continue
        ok = [g for g in got if "ms" in g]
        if not ok:
            merged[name] = {"error": got[0]["error"]}
            continue
        merged[name] = {"min_ms": min(g["ms"] for g in ok), "max_ms": max(g["ms"] for g in ok),
                        "first_ms": ok[0]["first_ms"]}
    return merged


def cell(m, base=None):
    if "error" in m:
        return "—"
    text = f"{m['min_ms']:.1f}-{m['max_ms']:.1f}" if m["max_ms"] - m["min_ms"] >= 0.05 else f"{m['min_ms']:.1f}"
    if base is not None and "min_ms" in base:
        lo, hi = m["min_ms"] / base["max_ms"], m["max_ms"] / base["min_ms"]
        text += f" ({lo:.2f}-{hi:.2f}×)" if hi - lo >= 0.005 else f" ({lo:.2f}×)"
    return text


def tables(result):
    peak = result["gemm_peak_gflops"]
    lines = ["| layer | batch x seq | GFLOP | " + " | ".join(f"{n} ms" for n in RUNTIMES) +
             " | ingot GFLOP/s (of peak) | error vs PyTorch (compile(fn) / zoo) |", "|" + "---|" * (len(RUNTIMES) + 5)]
    for row in result["layers"]:
        t = row["times"]
        base = t.get("ingot compile(fn)", {})
        cells = [row["name"], f"{row['batch']} x {row['seq']}", f"{row['gflop']:.1f}"]
        cells += [cell(t[n], None if n.startswith("ingot") else base) if n in t else "—" for n in RUNTIMES]
        best = min((t[n]["min_ms"] for n in ("ingot compile(fn)", "ingot zoo") if "min_ms" in t.get(n, {})), default=None)
        g = row["gflop"] / (best * 1e-3) if best else None
        cells.append(f"{g:.0f} ({100 * g / peak:.0f}%)" if g else "—")
        cells.append(" / ".join(f"{row['errors'].get(n, float('nan')):.1e}" for n in ("ingot compile(fn)", "ingot zoo")))
        lines.append("| " + " | ".join(cells) + " |")
    if result.get("coexistence"):
        c = result["coexistence"]
        lines += ["", f"Coexistence, {c['layer']} (ingot compile(fn) alternating call by call with each peer in one "
                  "process; slowdown = interleaved median / solo median):", "", coexistence_table(c["runs"])]
    if result.get("train"):
        tr = result["train"]
        t = tr["times"]
        base = t.get("ingot compile(fn)", {})
        names = [n for n in RUNTIMES if n in t]
        lines += ["", f"Training step, {TRAIN['layers']}-layer encoder (d_model {TRAIN['d']}, {TRAIN['heads']} heads, "
                  f"feed-forward {TRAIN['ffn']}), batch {TRAIN['batch']} x seq {TRAIN['seq']}, {tr['gflop']:.1f} GFLOP "
                  "a step:", "",
                  "| " + " | ".join(f"{n} ms" for n in names) + " |", "|" + "---|" * len(names),
                  "| " + " | ".join(cell(t[n], None if n.startswith("ingot") else base) for n in names) + " |"]
    errors = sorted({(n, m["error"]) for row in result["layers"] + ([result["train"]] if result.get("train") else [])
                     for n, m in row["times"].items() if "error" in m})
    for n, why in errors:
        lines.append(f"\n{n}: no figure ({why}).")
    return "\n".join(lines)


def replace_between_markers(readme, body):
    with open(readme) as f:
        text = f.read()
    start, end = "<!-- transformer-layers -->\n", "<!-- /transformer-layers -->"
    a, z = text.index(start) + len(start), text.index(end)
    with open(readme + ".tmp", "w") as f:
        f.write(text[:a] + body.rstrip() + "\n" + text[z:])
    os.replace(readme + ".tmp", readme)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the first layer row only, no training step")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "transformer_layers.json"))
    ap.add_argument("--readme", default="")
    args = ap.parse_args()
    mods = {name: try_import(name) for name in ("torch", "onnxruntime", "jax")}
    if mods["torch"][0] is not None:
        mods["torch"][0].set_num_threads(THREADS)
    versions = {"ingot": getattr(ml, "__version__", "?")}
    for name, (mod, _) in mods.items():
        if mod is not None:
            versions[name] = mod.__version__
    result = {"machine": cpu_model(), "measured_utc": measured_utc(), "threads": THREADS, "versions": versions,
              "gemm_peak_gflops": gemm_peak_gflops(), "layers": [], "coexistence": None, "train": None}
    print(f"library GEMM peak: {result['gemm_peak_gflops']:.0f} GFLOP/s", flush=True)
    rng = np.random.default_rng(0)
    for name, kind, b, s in LAYERS[:1] if args.quick else LAYERS:
        p = random_weights(rng, WIDTH["d"], WIDTH["ffn"])
        x = rng.standard_normal((b, s, WIDTH["d"])).astype(np.float32)
        runners = layer_runners(kind, b, s, p, x, mods)
        runs = [time_all(runners, args.reps, check=True) for _ in range(args.runs)]
        want = runs[0].get("PyTorch eager", {}).get("output")
        errors = {}
        for n in RUNTIMES:
            out = runs[0].get(n, {}).get("output")
            if want is not None and out is not None:
                errors[n] = rel_err(out, np.asarray(want, dtype=np.float64))
        row = {"name": name, "kind": kind, "batch": b, "seq": s, "gflop": forward_gflop(kind, b, s, WIDTH["d"], WIDTH["ffn"]),
               "times": merge(runs), "errors": errors}
        print(row["name"], b, s, {n: (m.get("min_ms"), m.get("error")) for n, m in row["times"].items()}, errors, flush=True)
        result["layers"].append(row)
        if not result.get("coexistence"):
            result["coexistence"] = {"layer": f"{name} {b} x {s}",
                                     "runs": [coexistence(runners, args.reps * 4) for _ in range(args.runs)]}
    if not (args.quick or args.no_train):
        runners = train_runners(mods, rng)
        runs = [time_all(runners, args.reps) for _ in range(args.runs)]
        result["train"] = {"gflop": 3 * TRAIN["layers"] * forward_gflop("bert", TRAIN["batch"], TRAIN["seq"], TRAIN["d"],
                                                                      TRAIN["ffn"]), "times": merge(runs)}
        print("train", {n: (m.get("min_ms"), m.get("error")) for n, m in result["train"]["times"].items()}, flush=True)
    write_json(args.out, result)
    text = tables(result)
    print(text)
    if args.readme:
        body = (f"Measured {result['measured_utc']} UTC on {result['machine']}, {THREADS} threads for every runtime, "
                f"{args.runs} runs of the median of {args.reps} calls (ms as the least and most of the runs' medians; "
                "(×) = peer time / ingot compile(fn) time, so above 1 ingot is faster); versions: "
                + ", ".join(f"{k} {v}" for k, v in versions.items()) +
                f". Library GEMM peak in this run: {result['gemm_peak_gflops']:.0f} GFLOP/s "
                "(2048³ float32 matmul through the CPU backend). Regenerate: `./scripts/bench_attention.sh --layers` "
                "(`bench/transformer_layers.py`, `bench/results/transformer_layers.json`).\n\n" + text + "\n")
        replace_between_markers(args.readme, body)


if __name__ == "__main__":
    main()
