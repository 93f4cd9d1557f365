#!/usr/bin/env python3
"""How fast a transformer layer could run on this machine with the GEMM library ingot calls: the
bound README's "Transformer layers" sets beside ONNX Runtime's and JAX jit's times (issue 13's
1.2x targets), as bench/conv_bound.py does for the CNNs.

A layer of bench/transformer_layers.py (BERT-base at batch B and sequence S, or GPT-2 small's
causal block; float32, 2 threads) through ingot's compile(fn). The bound adds up, for one call:
  - its six matrix products ([B*S, d] x [d, d] four times, [B*S, d] x [d, ffn], [B*S, ffn] x
    [ffn, d]) at the time the library GEMM (dnnl_sgemm, what ingot's matmuls call) takes for them
    with their operands hot in cache after the first of 15 calls (build/release/bench_gemm_shapes):
    no product inside the layer, whose 28 MB of weights stream from the L3 or memory, is faster;
  - every other kernel of ingot's call (attention, layer norms, bias + GELU) at its time in
    ml.profile().
ONNX Runtime (the PyTorch layer exported, as transformer_layers.py runs it) and JAX jit are each
timed in a child process of their own, in rounds alternating with ingot's: the bound's ratio to
each is the most that kernels as fast as the library GEMM could reach.

  PYTHONPATH=<benchmark site-packages> python bench/transformer_bound.py [--row bert:1:128]
      [--gemm build/release/bench_gemm_shapes] [--rounds 5] [--reps 10] [--quick] [--json OUT]
(./scripts/bench_attention.sh --bound runs every row into bench/results/transformer_bound.json.)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conv_bound import gemm_times, timed_round, worker  # noqa: E402
from machine import machine, measured_utc, write_json  # noqa: E402

THREADS = 2
ROWS = ["bert:1:128", "bert:8:128", "bert:1:512", "bert:8:512", "gpt2:1:1024"]
PEERS = {"onnxruntime": "ONNX Runtime", "jax": "JAX jit"}

# A child: builds one runtime's layer (transformer_layers.layer_runners, the peers the benchmark
# compares), then times `n` calls for each line "n" it reads and prints their median in ms. The
# ingot child first prints its kernels' times from ml.profile() as one JSON line.
CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import transformer_layers as tl
runtime, kind, b, s = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rng = np.random.default_rng(0)
p = tl.random_weights(rng, tl.WIDTH["d"], tl.WIDTH["ffn"])
x = rng.standard_normal((b, s, tl.WIDTH["d"])).astype(np.float32)
wanted = {"ingot": [], "onnxruntime": ["torch", "onnxruntime"], "jax": ["jax"]}[runtime]
mods = {m: (tl.try_import(m) if m in wanted else (None, "not needed")) for m in ("torch", "onnxruntime", "jax")}
name = {"ingot": "ingot compile(fn)", "onnxruntime": "ONNX Runtime", "jax": "JAX jit"}[runtime]
run = tl.layer_runners(kind, b, s, p, x, mods)[name]
if isinstance(run, str):
    print(json.dumps({"error": run}), flush=True)
    sys.exit(0)
for _ in range(3): run()
if runtime == "ingot":
    import ingot as ml
    with ml.profile() as prof:
        for _ in range(5): run()
    print(json.dumps({r["name"]: r["total_s"] / 5 * 1e3 for r in prof.rows()}), flush=True)
else:
    print(json.dumps({}), flush=True)
for line in sys.stdin:
    ts = []
    for _ in range(int(line)):
        t = time.perf_counter(); run(); ts.append(time.perf_counter() - t)
    print(sorted(ts)[len(ts) // 2] * 1e3, flush=True)
"""


def products(b, s, d=768, ffn=3072):
    """The layer's matrix products as {(m, k, n): how many}."""
    m = b * s
    return {(m, d, d): 4, (m, d, ffn): 1, (m, ffn, d): 1}


def child(runtime, kind, b, s, python):
    p = worker([python, "-c", CHILD, os.path.dirname(os.path.abspath(__file__)), runtime, kind, str(b), str(s)])
    first = json.loads(p.stdout.readline() or '{"error": "the child exited"}')
    if "error" in first:
        p.stdin.close()
        p.wait()
        return None, first["error"]
    return p, first


def bound_row(row, args):
    kind, b, s = row.split(":")
    b, s = int(b), int(s)
    work = products(b, s)
    gemm = gemm_times(args.gemm, sorted(work))
    gemm_ms = sum(gemm[shape] * count for shape, count in work.items())
    ingot, kernels = child("ingot", kind, b, s, sys.executable)
    if ingot is None:
        raise SystemExit(f"transformer_bound: ingot's layer did not build: {kernels}")
    matmul_ms = sum(ms for name, ms in kernels.items() if name.endswith("_matmul"))
    other_ms = sum(ms for name, ms in kernels.items() if not name.endswith("_matmul"))
    peers, skipped = {}, {}
    for key in PEERS:
        proc, why = child(key, kind, b, s, sys.executable)
        if proc is None:
            skipped[key] = why
        else:
            peers[key] = proc
    rounds = []
    for _ in range(args.rounds):
        r = {}
        for key, proc in [("ingot", ingot)] + list(peers.items()):
            time.sleep(0.2)  # the last runtime's workers stop spinning (ONNX Runtime's spin ~50 ms)
            r[key + "_ms"] = timed_round(proc, args.reps)
        rounds.append(r)
    for proc in [ingot] + list(peers.values()):
        proc.stdin.close()
        proc.wait()
    bound_ms = gemm_ms + other_ms
    result = {"row": row, "kind": kind, "batch": b, "seq": s, "products": [[*k, v] for k, v in sorted(work.items())],
              "matmuls_in_layer_ms": matmul_ms, "matmuls_as_library_gemm_ms": gemm_ms, "other_kernels_ms": other_ms,
              "kernels_ms": kernels, "bound_ms": bound_ms, "rounds": rounds, "skipped": skipped}
    ingot_ms = statistics.median(r["ingot_ms"] for r in rounds)
    result["ingot_ms"] = ingot_ms
    print(f"{kind} {b} x {s}: ingot {ingot_ms:.2f} ms (median of {args.rounds} rounds' medians of {args.reps}); "
          f"matmuls {matmul_ms:.2f} ms in the layer, {gemm_ms:.2f} as library GEMMs hot; other kernels "
          f"{other_ms:.2f} ms; bound {bound_ms:.2f} ms", flush=True)
    for key, label in PEERS.items():
        if key not in peers:
            print(f"  {label}: skipped ({skipped[key]})")
            continue
        ratios = [r[key + "_ms"] / r["ingot_ms"] for r in rounds]
        peer_ms = statistics.median(r[key + "_ms"] for r in rounds)
        result[key] = {"ms": peer_ms, "ingot_ratio_min": min(ratios), "ingot_ratio_max": max(ratios),
                       "ingot_ratio_median": statistics.median(ratios), "bound_ratio": peer_ms / bound_ms}
        print(f"  {label} {peer_ms:.2f} ms: ingot at {min(ratios):.2f}-{max(ratios):.2f}x its speed (rounds); "
              f"the bound at {peer_ms / bound_ms:.2f}x", flush=True)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--row", action="append", choices=ROWS, help="kind:batch:seq (default: every row)")
    ap.add_argument("--gemm", default="build/release/bench_gemm_shapes")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="the first row only, 2 rounds of 3 calls")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.quick:
        args.row, args.rounds, args.reps = args.row or ROWS[:1], 2, 3
    if args.rounds < 1 or args.reps < 1:
        ap.error("--rounds and --reps must be at least 1")
    if not os.access(args.gemm, os.X_OK):
        ap.error(f"{args.gemm} not found (build it: cmake --build build/release --target bench_gemm_shapes)")
    os.environ.update(OMP_NUM_THREADS=str(THREADS), OPENBLAS_NUM_THREADS=str(THREADS))
    result = {"measured_utc": measured_utc(), "machine": machine(THREADS),
              "rows": [bound_row(row, args) for row in (args.row or ROWS)]}
    if args.json:
        write_json(args.json, result)
    else:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
