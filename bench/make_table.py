#!/usr/bin/env python3
"""Builds the README "## Benchmarks" section from bench/results/cpu.json (bench_cpu) and
bench/results/peers.json (bench/peers.py; optional), plus the function-compile table
(fncompile.json) and the training-step table (train.json, peers_train.json) when present.

  python3 bench/make_table.py [--cpu bench/results/cpu.json] [--peers bench/results/peers.json]
                              [--fncompile ...] [--train ...] [--peers-train ...] [--readme README.md]

Without --readme the section is printed; with it, the body of "## Benchmarks" (up to the next
"## " heading or the end) is replaced in place. Standard library only.
"""
import argparse
import datetime
import json
import os
import sys

PEERS = ["torch eager", "torch.compile", "jax jit", "onnxruntime", "mlx mx.compile"]
PEER_TITLES = {"torch eager": "PyTorch eager", "torch.compile": "torch.compile", "jax jit": "JAX jit",
               "onnxruntime": "ONNX Runtime", "mlx mx.compile": "MLX mx.compile"}


def fmt_ms(ms):
    if ms is None:
        return "—"
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 10:
        return f"{ms:.1f} ms"
    return f"{ms:.3f} ms" if ms < 1 else f"{ms:.2f} ms"


def cell(ms, base, note=""):
    if ms is None:
        return "—"
    ratio = ms / base if base else float("nan")
    return f"{fmt_ms(ms)} ({ratio:.2f}×){note}"


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def build(cpu, peers, cpu_path):
    when = datetime.datetime.fromtimestamp(os.path.getmtime(cpu_path), datetime.timezone.utc)
    g = cpu["gelu"]
    models = cpu["models"]
    mlp = next(m for m in models if m["model"].startswith("mlp"))
    cnn = next(m for m in models if m["model"].startswith("cnn"))
    rows = [("gelu", f"gelu (erf) {g['shape']} f32", g["cpu_ms"], g["reference_ms"], g["reference_reps"]),
            ("mlp", f"ExampleMLP fwd, {mlp['model']}", mlp["cpu_ms"], mlp["reference_ms"], mlp["reference_reps"]),
            ("cnn", f"ExampleCNN fwd, {cnn['model']}", cnn["cpu_ms"], cnn["reference_ms"], cnn["reference_reps"])]
    out = []
    w = out.append
    w("Measured by `./scripts/bench.sh` (builds `build-bench`, runs `build-bench/bench_cpu`, installs")
    w("the Python peers from PyPI when it can and runs `bench/peers.py` in a separate process, then")
    w("rewrites this section with `bench/make_table.py` from `bench/results/cpu.json` and")
    w("`bench/results/peers.json`).")
    w("")
    m = cpu["machine"]
    w(f"Run of {when:%Y-%m-%d %H:%M} UTC on {m['cpu']}, {m['hardware_threads']} hardware threads, "
      f"{m['threads_used']} threads for every framework (a shared machine: other work ran beside it, "
      f"so expect ±20% noise).{' QUICK MODE (reduced shapes).' if cpu.get('quick') else ''}")
    vers = dict(cpu.get("versions", {}))
    pv = (peers or {}).get("versions", {})
    vtext = [f"compiler `{vers.get('compiler', '?')}`", f"OpenBLAS `{vers.get('openblas') or 'none'}`"]
    vtext += [f"{k} {v}" for k, v in pv.items()]
    w("Versions: " + ", ".join(vtext) + ".")
    w("")
    w("Inference time, median of a few runs after a warm-up (reference: reps shown); in brackets the")
    w("time relative to ingot cpu (above 1: slower than ingot cpu).")
    w("")
    present = [p for p in PEERS if peers and p in peers.get("peers", {})]
    head = ["workload", "ingot cpu", "ingot reference"] + [PEER_TITLES[p] for p in present]
    w("| " + " | ".join(head) + " |")
    w("|" + "---|" * len(head))
    for key, label, cpu_ms, ref_ms, ref_reps in rows:
        cells = [label, fmt_ms(cpu_ms), cell(ref_ms, cpu_ms, f" [{ref_reps} run]" if ref_reps == 1 else "")]
        for p in present:
            e = peers["peers"][p]
            r = e.get(key) if e.get("status") == "ok" else None
            if r is None:
                cells.append(e.get("status", "—"))
            elif "error" in r:
                cells.append("failed")
            else:
                note = " [1st call]" if r.get("reps") == 0 else (" [1 run]" if r.get("reps") == 1 else "")
                cells.append(cell(r["ms"], cpu_ms, note))
        w("| " + " | ".join(cells) + " |")
    w("")
    missing = [p for p in PEERS if not peers or p not in peers.get("peers", {})
               or peers["peers"][p].get("status") != "ok"]
    if not peers:
        w("Peers: not run (no `bench/results/peers.json`).")
        w("")
    elif missing:
        w("Not measured: " + "; ".join(
            f"{PEER_TITLES[p]} ({peers['peers'].get(p, {}).get('status', 'not run')})" for p in missing) + ".")
        w("")

    gemm = cpu["gemm"]
    w("Bandwidth and compute, same run:")
    w("")
    w("| figure | value |")
    w("|---|---|")
    w(f"| gelu, ingot cpu (read + write; output buffer recycled by the buffer cache) | {g['cpu_gbps']:.2f} GB/s |")
    if "memcpy_new_tensor_warm_gbps" in g:
        w(f"| memcpy of the same bytes into a new tensor each call (same allocation path) | "
          f"{g['memcpy_new_tensor_warm_gbps']:.2f} GB/s |")
        w(f"| gelu / memcpy bandwidth (warm) | {100 * g['fraction_of_memcpy']:.1f}% |")
        w(f"| fresh (buffer cache off): gelu / memcpy into new memory | {g['cpu_fresh_gbps']:.2f} / "
          f"{g['memcpy_fresh_dst_gbps']:.2f} GB/s ({100 * g['fraction_of_memcpy_fresh']:.1f}%) |")
        w(f"| memcpy into one reused buffer, best of 1 and 2 threads | {g['memcpy_best_gbps']:.2f} GB/s "
          f"(gelu at {100 * g['fraction_of_memcpy_reused_buffer']:.1f}%) |")
    else:
        w(f"| memcpy of the same bytes, best of 1 and 2 threads | {g['memcpy_best_gbps']:.2f} GB/s |")
        w(f"| memcpy into a fresh allocation (page faults, as a new output tensor pays) | "
          f"{g['memcpy_fresh_dst_gbps']:.2f} GB/s |")
        w(f"| gelu / memcpy bandwidth | {100 * g['fraction_of_memcpy']:.1f}% |")
    if "cpu_in_cache_gbps" in g:
        w(f"| gelu, ingot cpu, on a {g['cpu_in_cache_shape']} array that stays in the L3 cache (the math's own "
          f"ceiling) | {g['cpu_in_cache_gbps']:.2f} GB/s ({g['cpu_in_cache_gbps'] / 8:.2f} G elements/s) |")
    w(f"| library GEMM peak: {gemm['n']}³ float32 matmul through CpuBackend (OpenBLAS) | "
      f"{gemm['gflops']:.1f} GFLOP/s |")
    for r in (mlp, cnn):
        w(f"| {r['model'].split(' ')[0].upper()} forward, ingot cpu | {r['cpu_gflops']:.1f} GFLOP/s "
          f"({100 * r['cpu_gflops'] / gemm['gflops']:.0f}% of GEMM peak) |")
    for r in (mlp, cnn):
        if "cpu_arena_bytes" in r:
            mib = lambda b: b / (1 << 20)
            w(f"| {r['model']}: planned peak / lower bound / unplanned (compiler) | "
              f"{mib(r['planned_peak_bytes']):.2f} / {mib(r['lower_bound_bytes']):.2f} / "
              f"{mib(r['unplanned_bytes']):.2f} MiB |")
            w(f"| {r['model']}: CPU backend arena (materialized buffers only) | {mib(r['cpu_arena_bytes']):.2f} MiB"
              + (f"; conv2d: oneDNN {r['conv2d_kernels']}" if r.get("conv2d_kernels") else "") + " |")
    w("")
    w("Compile time, ingot cpu (cold: empty cache directory, the system compiler runs; warm, memory:")
    w("second compile in the process; warm, disk: in-memory cache cleared, library loaded from the")
    w("disk cache; warm, new process: a fresh child process compiling against the same directory,")
    w("timed inside it around `compile`). Peers' first call (trace + compile + run) for comparison:")
    w("")
    head = ["model", "cold", "warm, memory", "warm, disk", "warm, new process"] + \
           [f"{PEER_TITLES[p]} 1st call" for p in ("torch.compile", "jax jit") if p in present]
    w("| " + " | ".join(head) + " |")
    w("|" + "---|" * len(head))
    for key, r in (("mlp", mlp), ("cnn", cnn)):
        cells = [r["model"], fmt_ms(r["compile_cold_ms"]), fmt_ms(r["compile_warm_memory_ms"]),
                 fmt_ms(r["compile_warm_disk_ms"]) + ("" if r["warm_disk_was_cache_hit"] else " (rebuilt!)"),
                 fmt_ms(r["compile_warm_disk_child_process_ms"]) if r["compile_warm_disk_child_process_ms"] >= 0
                 else "failed"]
        for p in ("torch.compile", "jax jit"):
            if p in present:
                e = peers["peers"][p].get(key)
                cells.append(fmt_ms(e["first_ms"]) if e and "first_ms" in e else "—")
        w("| " + " | ".join(cells) + " |")
    w("")

    # The targets, stated next to the figures.
    w("Issue 3 targets against this run:")
    w("")
    frac = g["fraction_of_memcpy"]
    w(f"- fused elementwise at ≥ 80% of memcpy bandwidth: **{100 * frac:.0f}%** — "
      f"{'met' if frac >= 0.8 else 'not met'}.")
    slower = []
    for p in ("torch.compile", "jax jit"):
        if p not in present or peers["peers"][p].get("status") != "ok":
            slower.append(f"{PEER_TITLES[p]} not measured")
            continue
        for key, label, cpu_ms, _, _ in rows:
            r = peers["peers"][p].get(key)
            if r and "ms" in r and r["ms"] < cpu_ms:
                slower.append(f"{key}: {PEER_TITLES[p]} {cpu_ms / r['ms']:.2f}× faster")
    w("- at least as fast as torch.compile and JAX jit on every row: "
      + ("**met**." if not slower else "**not met** (" + "; ".join(slower) + ")."))
    warm = [r["compile_warm_disk_child_process_ms"] for r in (mlp, cnn)]
    worst = max(warm)
    w(f"- warm-cache load under 10 ms (new process, disk hit): **{fmt_ms(warm[0])}** (MLP), "
      f"**{fmt_ms(warm[1])}** (CNN) — {'met' if 0 <= worst < 10 else 'not met'}.")
    w("")
    w("Correctness check in the same run: max |cpu − reference| is "
      f"{g['max_abs_diff_vs_reference']:.1e} (gelu), {mlp['max_abs_diff_vs_reference']:.1e} (MLP), "
      f"{cnn['max_abs_diff_vs_reference']:.1e} (CNN). Peers use the same shapes with their own random "
      "weights; ONNX Runtime runs graphs built with the `onnx` helper (opset 17); MLX runs the CNN in NHWC "
      "(its layout; inputs converted untimed) and its thread count cannot be set.")
    return "\n".join(out) + "\n"


def build_fncompile(fn, peers, fn_py=None):
    """The function-compile / auto-compile table: bench_fncompile, the PyTorch peers and, when
    measured, Python's ml.compile (bench/bench_fncompile.py), as ratios to ingot eager."""
    g, m = fn["gelu"], fn["mlp_train"]
    same_gelu = lambda res: str(res.get("gelu_shape", res.get("workloads", {}).get("gelu", {}).get("shape"))) \
        .replace(" ", "") == g["shape"].replace(" ", "")

    def peer(name, key):
        if not peers or (key == "gelu" and not same_gelu(peers)):  # only figures of the same size
            return None
        r = peers.get("peers", {}).get(name, {}).get(key)
        return r["ms"] if r and "ms" in r else None

    def python(key):
        if not fn_py or (key == "gelu" and not same_gelu(fn_py)):
            return None
        return fn_py.get(key, {}).get("compiled_ms")

    out = []
    w = out.append
    w("")
    w("### Function compile and auto-compile")
    w("")
    w("From `build-bench/bench_fncompile` (`bench/results/fncompile.json`" + (", quick run" if fn.get("quick") else "")
      + "), `bench/bench_fncompile.py` (Python's `ml.compile`, `bench/results/fncompile_py.json`) and the PyTorch "
      "peers of `bench/peers.py` (`gelu`, `mlp_train`), per call or training iteration; in brackets the time "
      "relative to ingot eager (lazy arrays run op by op on the reference interpreter; below 1 is faster). The MLP "
      f"step is 784 -> 256 -> 10, batch {m['batch']}, softmax cross-entropy, SGD, its backward written with array ops.")
    w("")
    w("| workload | ingot eager | `compile(fn)` | auto-compile, before the switch | auto-compile, after the switch "
      "| Python `ml.compile` | PyTorch eager | torch.compile |")
    w("|---|---|---|---|---|---|---|---|")
    base = g["eager_ms"]
    w(f"| gelu as array ops {g['shape']} f32 | {fmt_ms(base)} | {cell(g['compiled_ms'], base)} | — | — "
      f"| {cell(python('gelu'), base)} | {cell(peer('torch eager', 'gelu'), base)} "
      f"| {cell(peer('torch.compile', 'gelu'), base)} |")
    base = m["eager_ms"]
    w(f"| MLP SGD step, batch {m['batch']} | {fmt_ms(base)} | {cell(m['compiled_fn_ms'], base)} "
      f"| {cell(m['auto_before_ms'], base)} | {cell(m['auto_after_ms'], base)} | {cell(python('mlp_train'), base)} "
      f"| {cell(peer('torch eager', 'mlp_train'), base)} | {cell(peer('torch.compile', 'mlp_train'), base)} |")
    w("")
    wait = m.get("auto_wait_ms")
    w(f"- First call of `compile(fn)` (trace, passes, C++ build, cold cache): gelu {fmt_ms(g['compiled_first_call_ms'])}, "
      f"MLP step {fmt_ms(m['compiled_fn_first_call_ms'])}; max |compiled − eager| on gelu {g['max_abs_diff']:.1e}.")
    w(f"- Auto-compile (`INGOT_AUTO_COMPILE=1`, threshold {m['auto_threshold']}): the build started at iteration "
      f"{m['auto_threshold']} and iteration {m['auto_switched_at_iteration']} was the first to run compiled"
      + (f" ({fmt_ms(wait)} of eager iterations later, which shared the cores with the compiler: hence the "
         "'before' column)" if wait is not None else "") + ".")
    return "\n".join(out) + "\n"


TRAIN_PEERS = ["torch eager", "torch.compile", "jax jit"]


def build_train(train, peers):
    """The training-step table (bench_train + bench/peers_train.py) and checkpointing memory."""
    mib = lambda b: b / (1 << 20)
    out = []
    w = out.append
    w("")
    w("### Training step")
    w("")
    w("From `build-bench/bench_train` (`bench/results/train.json`" + (", quick run" if train.get("quick") else "")
      + ") and `bench/peers_train.py` (`bench/results/peers_train.json`): one training step (forward, "
      f"backward, {train.get('optimizer', 'SGD')}) with softmax cross-entropy, median of a few steps; in "
      "brackets the time relative to the ingot compiled step (above 1: slower than it). ingot eager is "
      "`evaluate` with gradients, then `Optimizer::update` on the host.")
    w("")

    def peer(name, row):
        if not peers:
            return None, "not run"
        e = peers.get("peers", {}).get(name)
        if not e or e.get("status") != "ok":
            return None, (e or {}).get("status", "not run")
        if peers.get("workloads", {}).get(row["key"], {}).get("input_shape") != row["input_shape"]:
            return None, "other shape"
        r = e.get(row["key"])
        if not r or "ms" not in r:
            return None, "failed"
        return r["ms"], ""
    head = ["workload", "ingot compiled step", "ingot eager"] + [PEER_TITLES[p] for p in TRAIN_PEERS]
    w("| " + " | ".join(head) + " |")
    w("|" + "---|" * len(head))
    for row in train["rows"]:
        base = row["compiled_step_ms"]
        cells = [row["workload"], fmt_ms(base), cell(row["eager_ms"], base)]
        for p in TRAIN_PEERS:
            ms, why = peer(p, row)
            cells.append(cell(ms, base) if ms is not None else why)
        w("| " + " | ".join(cells) + " |")
    w("")
    w("Memory of a training step without and with gradient checkpointing (`checkpoint_segments` 2): the "
      "compiler's planned peak of the joint forward + backward + update graph, and the CPU backend's arena "
      "(what its executable allocates for intermediates, after its own fusion and in-place reuse):")
    w("")
    w("| model | planned, without | planned, with checkpointing | saved | CPU arena, without | "
      "CPU arena, with checkpointing | saved | forward nodes recomputed |")
    w("|---|---|---|---|---|---|---|---|")
    saved = lambda without, with_: f"{100 * (1 - with_ / without):.0f}%" if without else "—"
    for m in [r["memory"] | {"model": r["workload"]} for r in train["rows"]] + train.get("checkpointing", []):
        arena = ("not measured", "not measured", "—")
        if "arena_bytes" in m:
            arena = (f"{mib(m['arena_bytes']):.2f} MiB", f"{mib(m['checkpointed_arena_bytes']):.2f} MiB",
                     saved(m["arena_bytes"], m["checkpointed_arena_bytes"]))
        w(f"| {m['model']} | {mib(m['peak_bytes']):.2f} MiB | {mib(m['checkpointed_bytes']):.2f} MiB | "
          f"{saved(m['peak_bytes'], m['checkpointed_bytes'])} | {' | '.join(arena)} | {m['recomputed_nodes']} |")
    w("")
    w("Issue 4 targets against this run:")
    w("")
    for row in train["rows"]:
        base = row["compiled_step_ms"]
        eager, why = peer("torch eager", row)
        if eager is None:
            w(f"- {row['workload']}: ≥ 2× faster than PyTorch eager: not measured (PyTorch eager {why}).")
        else:
            w(f"- {row['workload']}: ≥ 2× faster than PyTorch eager: PyTorch eager takes **{eager / base:.2f}×** "
              f"the ingot step's time — {'met' if eager >= 2 * base else 'not met'}.")
    for row in train["rows"]:
        base = row["compiled_step_ms"]
        slower = []
        for p in ("torch.compile", "jax jit"):
            ms, why = peer(p, row)
            if ms is None:
                slower.append(f"{PEER_TITLES[p]} {why}")
            elif ms < base:
                slower.append(f"{PEER_TITLES[p]} {base / ms:.2f}× faster")
        w(f"- {row['workload']}: as fast as torch.compile and JAX jit: "
          + ("**met**." if not slower else "**not met** (" + "; ".join(slower) + ")."))
    return "\n".join(out) + "\n"


def replace_section(readme, body):
    with open(readme) as f:
        text = f.read()
    marker = "## Benchmarks\n"
    start = text.find(marker)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + marker + "\n" + body
    else:
        begin = start + len(marker)
        end = text.find("\n## ", begin)
        tail = "" if end < 0 else text[end:]
        text = text[:begin] + "\n" + body + tail
    with open(readme, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpu", default="bench/results/cpu.json")
    ap.add_argument("--peers", default="bench/results/peers.json")
    ap.add_argument("--fncompile", default="bench/results/fncompile.json")
    ap.add_argument("--fncompile-py", default="bench/results/fncompile_py.json")
    ap.add_argument("--train", default="bench/results/train.json")
    ap.add_argument("--peers-train", default="bench/results/peers_train.json")
    ap.add_argument("--readme", default="")
    a = ap.parse_args()
    cpu = load(a.cpu)
    if cpu is None:
        print(f"make_table: {a.cpu} not found; run build-bench/bench_cpu first", file=sys.stderr)
        return 1
    peers = load(a.peers)
    body = build(cpu, peers, a.cpu)
    fn = load(a.fncompile)
    if fn is not None:
        body += build_fncompile(fn, peers, load(a.fncompile_py))
    train = load(a.train)
    if train is not None:
        body += build_train(train, load(a.peers_train))
    if a.readme:
        replace_section(a.readme, body)
        print(f"updated the Benchmarks section of {a.readme}")
    else:
        sys.stdout.write(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
