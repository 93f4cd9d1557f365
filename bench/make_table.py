#!/usr/bin/env python3
"""Builds the README "## Benchmarks" section from bench/results/cpu.json (bench_cpu) and
bench/results/peers.json (bench/peers.py; optional), plus the function-compile table
(fncompile.json), the training-step table (train.json, peers_train.json) and the graph
optimization / memory planning table (graph_opt.json) when present, and writes
bench/results/summary.json: every ratio of every file (the peers' against ingot computed here),
each file's machine description and every version involved.

  python3 bench/make_table.py [--cpu bench/results/cpu.json] [--peers bench/results/peers.json]
                              [--fncompile ...] [--train ...] [--peers-train ...] [--graph-opt ...]
                              [--readme README.md] [--summary bench/results/summary.json]
                              [--print-ratios]

Without --readme the section is printed; with it, the body of "## Benchmarks" (up to the next
"## " heading or the end) is replaced in place. --print-ratios prints the ratio table (what
scripts/bench.sh shows at its end). A figure that is missing (absent, an error, or -1) is never
counted as meeting a target: it reads "not measured". Standard library only.
"""
import argparse
import datetime
import json
import math
import os
import sys

PEERS = ["torch eager", "torch.compile", "jax jit", "onnxruntime", "mlx mx.compile"]
PEER_TITLES = {"torch eager": "PyTorch eager", "torch.compile": "torch.compile", "jax jit": "JAX jit",
               "onnxruntime": "ONNX Runtime", "mlx mx.compile": "MLX mx.compile"}


def measured(x):
    """A figure that was measured: a finite number >= 0 (the tools write -1 or leave it out
    when they could not measure it)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def ratio(a, b):
    """a / b when both were measured (and b is not 0), else None."""
    return a / b if measured(a) and measured(b) and b > 0 else None


def verdict(ok):
    """A target's state: True met, False not met, None (a figure missing) not measured."""
    return "not measured" if ok is None else ("met" if ok else "not met")


def fmt_ms(ms):
    if not measured(ms):
        return "—"
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    if ms >= 10:
        return f"{ms:.1f} ms"
    return f"{ms:.3f} ms" if ms < 1 else f"{ms:.2f} ms"


def cell(ms, base, note=""):
    if not measured(ms):
        return "—"
    r = ratio(ms, base)
    return f"{fmt_ms(ms)} ({r:.2f}×){note}" if r is not None else f"{fmt_ms(ms)}{note}"


def load(path):
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def build(cpu, peers, cpu_path):
    when = cpu.get("measured_utc") or \
        f"{datetime.datetime.fromtimestamp(os.path.getmtime(cpu_path), datetime.timezone.utc):%Y-%m-%d %H:%M}"
    g = cpu["gelu"]
    models = cpu["models"]
    mlp = next(m for m in models if m["model"].startswith("mlp"))
    cnn = next(m for m in models if m["model"].startswith("cnn"))
    rows = [("gelu", f"gelu (erf) {g['shape']} f32", g["cpu_ms"], g["reference_ms"], g["reference_reps"]),
            ("mlp", f"ExampleMLP fwd, {mlp['model']}", mlp["cpu_ms"], mlp["reference_ms"], mlp["reference_reps"]),
            ("cnn", f"ExampleCNN fwd, {cnn['model']}", cnn["cpu_ms"], cnn["reference_ms"], cnn["reference_reps"])]
    out = []
    w = out.append
    w("Measured by `./scripts/bench.sh` (builds `build-bench`, runs `build-bench/bench_cpu` and the other")
    w("benchmarks, installs the Python peers from PyPI when it can and runs `bench/peers.py` in a separate")
    w("process, then rewrites this section with `bench/make_table.py` from `bench/results/*.json`, writes")
    w("every ratio with each file's machine and versions to `bench/results/summary.json` and prints the")
    w("ratios). A figure that could not be measured never counts as meeting a target: it reads \"not measured\".")
    w("")
    m = cpu["machine"]
    w(f"Run of {when} UTC on {m['cpu']}, {m['hardware_threads']} hardware threads, "
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
    frac = g.get("fraction_of_memcpy") if measured(g.get("cpu_ms")) else None
    frac = frac if measured(frac) else None
    w("- fused elementwise at ≥ 80% of memcpy bandwidth: "
      + (f"**{100 * frac:.0f}%** — " if frac is not None else "") + verdict(None if frac is None else frac >= 0.8) + ".")
    slower, missing_peer = [], []
    for p in ("torch.compile", "jax jit"):
        if p not in present or peers["peers"][p].get("status") != "ok":
            missing_peer.append(f"{PEER_TITLES[p]} not measured")
            continue
        for key, label, cpu_ms, _, _ in rows:
            r = peers["peers"][p].get(key) or {}
            if not measured(cpu_ms) or not measured(r.get("ms")):
                missing_peer.append(f"{key}: {PEER_TITLES[p]} not measured" if measured(cpu_ms)
                                    else f"{key}: ingot cpu not measured")
            elif r["ms"] < cpu_ms:
                slower.append(f"{key}: {PEER_TITLES[p]} {cpu_ms / r['ms']:.2f}× faster")
    missing_peer = list(dict.fromkeys(missing_peer))  # "ingot cpu not measured" once per row
    state = False if slower else (None if missing_peer else True)
    w("- at least as fast as torch.compile and JAX jit on every row: **" + verdict(state) + "**"
      + (" (" + "; ".join(slower + missing_peer) + ")" if slower or missing_peer else "") + ".")
    warm = [r.get("compile_warm_disk_child_process_ms") for r in (mlp, cnn)]
    state = None if not all(measured(x) for x in warm) else max(warm) < 10
    w(f"- warm-cache load under 10 ms (new process, disk hit): **{fmt_ms(warm[0])}** (MLP), "
      f"**{fmt_ms(warm[1])}** (CNN) — {verdict(state)}.")
    w("")
    w("Correctness check in the same run: max |cpu − reference| is "
      f"{g['max_abs_diff_vs_reference']:.1e} (gelu), {mlp['max_abs_diff_vs_reference']:.1e} (MLP), "
      f"{cnn['max_abs_diff_vs_reference']:.1e} (CNN). Peers use the same shapes with their own random "
      "weights; ONNX Runtime runs graphs built with the `onnx` helper (opset 17); MLX runs the CNN in NHWC "
      "(its layout; inputs converted untimed) and its thread count cannot be set.")
    return "\n".join(out) + "\n"


def subsection(title, tool, results, data, sources):
    """The opening lines of a "### " subsection: where its figures come from (`sources` goes on)."""
    return ["", f"### {title}", "",
            f"From `build-bench/{tool}` (`{results}`" + (", quick run" if data.get("quick") else "") + ")" + sources, ""]


def same_gelu_shape(res, shape):
    """Whether a peers' or Python results file measured gelu at `shape` (only such figures compare)."""
    return str(res.get("gelu_shape", res.get("workloads", {}).get("gelu", {}).get("shape"))) \
        .replace(" ", "") == shape.replace(" ", "")


def build_fncompile(fn, peers, fn_py=None):
    """The function-compile / auto-compile table: bench_fncompile, the PyTorch peers and, when
    measured, Python's ml.compile (bench/bench_fncompile.py), as ratios to ingot eager."""
    g, m = fn["gelu"], fn["mlp_train"]
    same_gelu = lambda res: same_gelu_shape(res, g["shape"])

    def peer(name, key):
        if not peers or (key == "gelu" and not same_gelu(peers)):  # only figures of the same size
            return None
        r = peers.get("peers", {}).get(name, {}).get(key)
        return r["ms"] if r and "ms" in r else None

    def python(key):
        if not fn_py or (key == "gelu" and not same_gelu(fn_py)):
            return None
        return fn_py.get(key, {}).get("compiled_ms")

    out = subsection(
        "Function compile and auto-compile", "bench_fncompile", "bench/results/fncompile.json", fn,
        ", `bench/bench_fncompile.py` (Python's `ml.compile`, `bench/results/fncompile_py.json`) and the PyTorch "
        "peers of `bench/peers.py` (`gelu`, `mlp_train`), per call or training iteration; in brackets the time "
        "relative to ingot eager (lazy arrays run op by op on the reference interpreter; below 1 is faster). The MLP "
        f"step is 784 -> 256 -> 10, batch {m['batch']}, softmax cross-entropy, SGD, its backward written with array ops.")
    w = out.append
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
    out = subsection(
        "Training step", "bench_train", "bench/results/train.json", train,
        " and `bench/peers_train.py` (`bench/results/peers_train.json`): one training step (forward, "
        f"backward, {train.get('optimizer', 'SGD')}) with softmax cross-entropy, median of a few steps; in "
        "brackets the time relative to the ingot compiled step (above 1: slower than it). ingot eager is "
        "`evaluate` with gradients, then `Optimizer::update` on the host. The physical limit: a step's dense "
        "FLOPs (matmul and convolution: forward, weight gradients, input gradients but the first layer's) at the "
        "library GEMM's peak, measured in the same run, is the least time any implementation here needs.")
    w = out.append
    gemm = train.get("gemm")
    gflops = lambda row: row["flops"] / (row["compiled_step_ms"] * 1e-3) / 1e9
    floor_ms = lambda row: row["flops"] / (gemm["gflops"] * 1e9) * 1e3  # the step's dense work at the GEMM peak
    has_limit = lambda row: bool(gemm) and measured(row.get("flops")) and measured(row.get("compiled_step_ms"))

    def peer(name, row):
        if not peers:
            return None, "not run"
        e = peers.get("peers", {}).get(name)
        if not e or e.get("status") != "ok":
            return None, (e or {}).get("status", "not run")
        if peers.get("workloads", {}).get(row["key"], {}).get("input_shape") != row["input_shape"]:
            return None, "other shape"
        r = e.get(row["key"])
        if not r or not measured(r.get("ms")):
            return None, "failed"
        return r["ms"], ""
    head = (["workload", "ingot compiled step", "compiled step GFLOP/s (of GEMM peak)", "least time at the GEMM peak",
             "ingot eager"] + [PEER_TITLES[p] for p in TRAIN_PEERS])
    w("| " + " | ".join(head) + " |")
    w("|" + "---|" * len(head))
    for row in train["rows"]:
        base = row["compiled_step_ms"]
        limit = ((f"{gflops(row):.1f} ({100 * gflops(row) / gemm['gflops']:.0f}%)",
                  fmt_ms(floor_ms(row))) if has_limit(row)
                 else ("not measured", "not measured"))
        cells = [row["workload"], fmt_ms(base), *limit, cell(row["eager_ms"], base)]
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
    if gemm:
        w(f"Library GEMM peak in this run: {gemm['gflops']:.1f} GFLOP/s ({gemm['n']}³ float32 matmul through "
          "CpuBackend).")
        w("")
    w("Issue 4 targets against this run:")
    w("")
    for row in train["rows"]:
        base = row.get("compiled_step_ms")
        eager, why = peer("torch eager", row)
        if not measured(base):
            w(f"- {row['workload']}: ≥ 2× faster than PyTorch eager: not measured (the ingot step was not).")
        elif eager is None:
            w(f"- {row['workload']}: ≥ 2× faster than PyTorch eager: not measured (PyTorch eager {why}).")
        else:
            bound = ""
            if has_limit(row) and eager < 2 * base:
                floor = floor_ms(row)
                bound = (f" Half of PyTorch eager's time is {fmt_ms(eager / 2)}; at the GEMM peak the step's dense "
                         f"work alone takes {fmt_ms(floor)}, so "
                         + ("it would take more than the library GEMM's peak." if eager / 2 < floor else
                            f"reaching it needs {100 * floor / (eager / 2):.0f}% of the GEMM peak "
                            f"(the compiled step runs at {100 * gflops(row) / gemm['gflops']:.0f}%)."))
            w(f"- {row['workload']}: ≥ 2× faster than PyTorch eager: PyTorch eager takes **{eager / base:.2f}×** "
              f"the ingot step's time — {verdict(eager >= 2 * base)}.{bound}")
    for row in train["rows"]:
        base = row.get("compiled_step_ms")
        slower, missing = [], []
        for p in ("torch.compile", "jax jit"):
            ms, why = peer(p, row)
            if ms is None or not measured(base):
                missing.append(f"{PEER_TITLES[p]} {why or 'not measured'}" if measured(base)
                               else "the ingot step not measured")
            elif ms < base:
                slower.append(f"{PEER_TITLES[p]} {base / ms:.2f}× faster")
        state = False if slower else (None if missing else True)
        w(f"- {row['workload']}: as fast as torch.compile and JAX jit: **{verdict(state)}**"
          + (" (" + "; ".join(slower + missing) + ")" if slower or missing else "") + ".")
    return "\n".join(out) + "\n"


def build_graph_opt(go):
    """The graph optimization / memory planning table (bench_graph_opt) and mixed-precision accuracy."""
    mib = lambda b: f"{b / (1 << 20):.2f}" if measured(b) else "—"
    num = lambda x: f"{x:.3f}" if measured(x) else "—"
    out = subsection(
        "Graph optimization and memory planning", "bench_graph_opt", "bench/results/graph_opt.json", go,
        ", reference backend, no timing: node counts at `optimization_level` none and medium, and the memory "
        "plan (greedy) of the graph that runs: in inference the optimized graph, in training the joint forward + "
        "backward graph of every output. Peak / lower bound = 1 is the best any placement can do.")
    w = out.append
    w("| model | mode | nodes (none) | nodes (medium) | fusion groups | planned peak MiB | unplanned MiB "
      "| lower bound MiB | peak / lower bound | peak / unplanned | in place |")
    w("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in go.get("models", []):
        w(f"| {r['model']} | {r.get('mode', 'inference')} | {r['nodes_before']} | {r['nodes_after']} "
          f"| {r['fusion_groups']} | {mib(r['planned_peak_bytes'])} | {mib(r['unplanned_bytes'])} "
          f"| {mib(r['lower_bound_bytes'])} | {num(ratio(r['planned_peak_bytes'], r['lower_bound_bytes']))} "
          f"| {num(ratio(r['planned_peak_bytes'], r['unplanned_bytes']))} | {r['inplace']} |")
    mp = go.get("mixed_precision", [])
    if mp:
        w("")
        w("Mixed precision (`mixed_precision`) against float32, outputs of randomly initialized models on the "
          "input `sin(0.37 i)`; relative = max abs error / max |output|:")
        w("")
        w("| model | type | max abs error | max relative error |")
        w("|---|---|---|---|")
        for a in mp:
            w(f"| {a['model']} | {a['type']} | {a['max_abs_error']:.3e} | {a['max_rel_error']:.3e} |")
    return "\n".join(out) + "\n"


def peer_ms(peers, name, key):
    """A peer's median for workload `key`, or None when it was not measured."""
    e = (peers or {}).get("peers", {}).get(name, {})
    r = e.get(key) if e.get("status") == "ok" else None
    return r.get("ms") if r and measured(r.get("ms")) else None


def summarize(files):
    """summary.json: for every results file present, its machine description and versions, its
    own ratios, and the ratios that need two files (each peer against ingot), computed here.
    `files`: name -> (path, data or None). A ratio over a missing figure is null."""
    get = lambda n: files.get(n, (None, None))[1]
    summary = {"tool": "make_table.py", "files": {}, "machine": {}, "versions": {}, "ratios": {}}
    for name, (path, data) in files.items():
        if data is None:
            continue
        summary["files"][name] = {"path": path, "quick": data.get("quick", False)}
        summary["machine"][name] = data.get("machine")
        summary["versions"][name] = data.get("versions")
        if data.get("ratios"):
            summary["ratios"][name] = data["ratios"]
    cpu, peers = get("cpu"), get("peers")
    if cpu:
        base = {"gelu": cpu["gelu"]["cpu_ms"]}
        base.update({m["model"].split(" ")[0]: m["cpu_ms"] for m in cpu["models"]})
        refs = {"gelu": cpu["gelu"]["reference_ms"]}
        refs.update({m["model"].split(" ")[0]: m["reference_ms"] for m in cpu["models"]})
        summary["ratios"]["inference_over_ingot_cpu"] = {
            k: {"ingot reference": ratio(refs[k], b), **{p: ratio(peer_ms(peers, p, k), b) for p in PEERS}}
            for k, b in base.items()}
    fn = get("fncompile")
    if fn:
        fpy, g, m = get("fncompile_py") or {}, fn["gelu"], fn["mlp_train"]
        gpy = fpy.get("gelu", {}) if fpy and same_gelu_shape(fpy, g["shape"]) else {}
        gpeers = peers if peers and same_gelu_shape(peers, g["shape"]) else None
        summary["ratios"]["fncompile_over_ingot_eager"] = {
            "gelu": {"compile(fn)": ratio(g["compiled_ms"], g["eager_ms"]),
                     "Python ml.compile": ratio(gpy.get("compiled_ms"), g["eager_ms"]),
                     **{p: ratio(peer_ms(gpeers, p, "gelu"), g["eager_ms"]) for p in ("torch eager", "torch.compile")}},
            "mlp_train": {"compile(fn)": ratio(m["compiled_fn_ms"], m["eager_ms"]),
                          "auto-compile before": ratio(m["auto_before_ms"], m["eager_ms"]),
                          "auto-compile after": ratio(m["auto_after_ms"], m["eager_ms"]),
                          "Python ml.compile": ratio(fpy.get("mlp_train", {}).get("compiled_ms"), m["eager_ms"]),
                          **{p: ratio(peer_ms(peers, p, "mlp_train"), m["eager_ms"])
                             for p in ("torch eager", "torch.compile")}}}
    train, ptrain = get("train"), get("peers_train")
    if train:
        same = lambda row: (ptrain or {}).get("workloads", {}).get(row["key"], {}).get("input_shape") == row["input_shape"]
        summary["ratios"]["train_over_ingot_compiled_step"] = {
            row["key"]: {"ingot eager": ratio(row["eager_ms"], row["compiled_step_ms"]),
                         **{p: ratio(peer_ms(ptrain, p, row["key"]) if same(row) else None, row["compiled_step_ms"])
                            for p in TRAIN_PEERS}}
            for row in train["rows"]}
    go = get("graph_opt")
    if go:
        summary["ratios"]["graph_opt"] = {
            f"{r['model']}, {r.get('mode', 'inference')}": {
                "planned_over_lower_bound": ratio(r["planned_peak_bytes"], r["lower_bound_bytes"]),
                "planned_over_unplanned": ratio(r["planned_peak_bytes"], r["unplanned_bytes"]),
                "nodes_after_over_before": ratio(r["nodes_after"], r["nodes_before"])}
            for r in go.get("models", [])}
    return summary


def ratio_lines(summary):
    """The ratio table scripts/bench.sh prints: one line per ratio, 'not measured' for nulls."""
    lines = []

    def walk(prefix, d):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(prefix + [k], v)
            else:
                lines.append((" / ".join(prefix + [k]), "not measured" if v is None else f"{v:.3f}"))
    walk([], summary["ratios"])
    width = max((len(a) for a, _ in lines), default=0)
    return [f"{a:<{width}}  {b}" for a, b in lines]


NOTES_OPEN, NOTES_CLOSE = "<!-- hand-written notes -->", "<!-- /hand-written notes -->"


def keep_notes(old_body, body):
    """Carries the hand-written notes of the old section (each block between NOTES_OPEN and
    NOTES_CLOSE) into the new one, at the end of the subsection ("### " heading) they were in."""
    pos = 0
    while True:
        start = old_body.find(NOTES_OPEN, pos)
        if start < 0:
            return body
        end = old_body.find(NOTES_CLOSE, start)
        if end < 0:
            return body
        end += len(NOTES_CLOSE)
        block, pos = old_body[start:end], end
        heading = old_body.rfind("\n### ", 0, start)
        title = old_body[heading + 1:old_body.find("\n", heading + 1)] if heading >= 0 else None
        at = body.find("\n" + title + "\n") if title else 0
        if title and at < 0:
            at = len(body)
        nxt = body.find("\n### ", at + 1)
        cut = len(body) if nxt < 0 else nxt
        body = body[:cut].rstrip("\n") + "\n\n" + block + "\n" + body[cut:]


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
        old_body = text[begin:] if end < 0 else text[begin:end]
        text = text[:begin] + "\n" + keep_notes(old_body, body) + tail
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
    ap.add_argument("--graph-opt", default="bench/results/graph_opt.json")
    ap.add_argument("--readme", default="")
    ap.add_argument("--summary", default="", help="write every ratio and version here (JSON)")
    ap.add_argument("--print-ratios", action="store_true", help="print the ratio table")
    a = ap.parse_args()
    cpu = load(a.cpu)
    if cpu is None:
        print(f"make_table: {a.cpu} not found; run build-bench/bench_cpu first", file=sys.stderr)
        return 1
    files = {name: (path, load(path)) for name, path in (
        ("cpu", a.cpu), ("peers", a.peers), ("fncompile", a.fncompile), ("fncompile_py", a.fncompile_py),
        ("train", a.train), ("peers_train", a.peers_train), ("graph_opt", a.graph_opt))}
    peers = files["peers"][1]
    body = build(cpu, peers, a.cpu)
    fn = files["fncompile"][1]
    if fn is not None:
        body += build_fncompile(fn, peers, files["fncompile_py"][1])
    train = files["train"][1]
    if train is not None:
        body += build_train(train, files["peers_train"][1])
    go = files["graph_opt"][1]
    if go is not None:
        body += build_graph_opt(go)
    summary = summarize(files)
    if a.summary:
        os.makedirs(os.path.dirname(a.summary) or ".", exist_ok=True)
        with open(a.summary, "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")
        print(f"wrote {a.summary}")
    if a.readme:
        replace_section(a.readme, body)
        print(f"updated the Benchmarks section of {a.readme}")
    elif not a.print_ratios:
        sys.stdout.write(body)
    if a.print_ratios:
        print("\n".join(["ratios (bench/results/summary.json):"] + ratio_lines(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
