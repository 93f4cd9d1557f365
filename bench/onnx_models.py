#!/usr/bin/env python3
"""ingot's side of the ONNX real-model check (scripts/onnx_models.sh): each model that
bench/onnx_export.py exported is imported with ml.onnx.load, compiled for the CPU backend and
run on the same input; its output is compared with ONNX Runtime's and PyTorch's (max |diff| over
max(1, max |want|)), and timed in its own loop (2 threads) beside the times of ONNX Runtime,
PyTorch eager and torch.compile from the same run. With --ort-python (the benchmark environment's
interpreter, which has onnxruntime), ONNX Runtime is timed again beside ingot, in rounds that
alternate the two (ingot's loop, then ONNX Runtime's in a child process, --rounds times), so that
each ratio compares loops seconds apart: this VM's speed drifts by up to 1.5x over minutes, and
the export step's ONNX Runtime times were taken minutes before ingot's. Import + compile is timed in fresh processes:
cold (an empty cache directory: the C++ compiler runs) and warm (the cache that run filled). The
imported model is exported again as <key>.ingot.onnx for the round-trip check
(bench/onnx_roundtrip.py). Writes <dir>/onnx_models.json and prints a Markdown table.

  python bench/onnx_models.py --dir DIR [--reps 5] [--ort-python PYTHON] [--rounds 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import timed  # noqa: E402

import ingot as ml  # noqa: E402


def rel(got, want):
    return float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))


# Import + compile in a new process, its cache in CACHE_DIR: prints the seconds.
_COMPILE = """
import sys, time
t = time.perf_counter()
import ingot as ml
pm = ml.compile(ml.onnx.load(sys.argv[1]), ml.CpuBackend(num_threads=2))
print(time.perf_counter() - t)
"""


def compile_seconds(path, cache_dir):
    env = dict(os.environ, INGOT_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", _COMPILE, path], env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


# ONNX Runtime's loop on one model, run by the benchmark environment's interpreter: prints
# machine.timed's JSON. The session is machine.ort_session's, as in bench/onnx_export.py.
_ORT_LOOP = """
import json, sys
import numpy as np, onnxruntime as ort
sys.path.insert(0, sys.argv[4])
from machine import ort_session, timed
sess = ort_session(ort, sys.argv[1], int(sys.argv[5]))
x = np.load(sys.argv[2])["input"]
print(json.dumps(timed(lambda: sess.run(None, {"input": x}), int(sys.argv[3]))))
"""


def ort_loop(python, path, npz, reps):
    out = subprocess.run([python, "-c", _ORT_LOOP, path, npz, str(reps), os.path.dirname(os.path.abspath(__file__)),
                          str(THREADS)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def over_rounds(rounds, key, reps):
    """One runtime's medians over the alternating rounds: their median, least and most."""
    ms = sorted(r[key] for r in rounds)
    return {"ms": ms[len(ms) // 2], "min_ms": ms[0], "max_ms": ms[-1], "reps": reps, "rounds": len(ms)}


def ratio(peer, ingot_ms):
    return None if peer is None else peer["ms"] / ingot_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ort-python", help="interpreter with onnxruntime: time it again, alternating with ingot")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds with --ort-python")
    args = ap.parse_args()
    with open(os.path.join(args.dir, "ort.json")) as f:
        ort = json.load(f)
    rows = []
    for key, info in ort["models"].items():
        data = np.load(os.path.join(args.dir, f"{key}.npz"))
        path = os.path.join(args.dir, f"{key}.onnx")
        row = {"model": info.get("model", key), "key": key, "batch": info.get("batch", 1), "shape": info["shape"],
               "onnxruntime_ms": info["onnxruntime"]["ms"], "onnxruntime": info["onnxruntime"],
               "torch_eager": info.get("torch_eager"), "torch_compile": info.get("torch_compile")}
        try:
            with tempfile.TemporaryDirectory(prefix="ingot-onnx-bench-") as cache:
                row["import_compile_cold_s"] = compile_seconds(path, cache)
                row["import_compile_warm_s"] = compile_seconds(path, cache)
            t = time.perf_counter()
            m = ml.onnx.load(path)
            pm = ml.compile(m, ml.CpuBackend(num_threads=THREADS))
            got = np.asarray(pm.evaluate({}, {"input": data["input"]})["output"])
            row["import_compile_first_run_s"] = time.perf_counter() - t
            row["err_vs_onnxruntime"] = rel(got, data["ort"])
            row["err_vs_torch"] = rel(got, data["torch"])
            run = lambda: pm.evaluate({}, {"input": data["input"]})  # noqa: E731
            if args.ort_python:
                row["onnxruntime_export_step"] = info["onnxruntime"]
                rounds = []
                for _ in range(args.rounds):
                    mine = timed(run, args.reps)
                    theirs = ort_loop(args.ort_python, path, os.path.join(args.dir, f"{key}.npz"), args.reps)
                    rounds.append({"ingot_ms": mine["ms"], "onnxruntime_ms": theirs["ms"]})
                row["rounds"] = rounds
                ratios = sorted(r["onnxruntime_ms"] / r["ingot_ms"] for r in rounds)
                row["ratio_onnxruntime_over_ingot_range"] = [ratios[0], ratios[-1]]
                row["ingot"] = over_rounds(rounds, "ingot_ms", args.reps)
                row["onnxruntime"] = over_rounds(rounds, "onnxruntime_ms", args.reps)
                row["onnxruntime_ms"] = row["onnxruntime"]["ms"]
            else:
                row["ingot"] = timed(run, args.reps)
            row["ratio_onnxruntime_over_ingot"] = row["onnxruntime_ms"] / row["ingot"]["ms"]
            row["ratio_torch_eager_over_ingot"] = ratio(row["torch_eager"], row["ingot"]["ms"])
            row["ratio_torch_compile_over_ingot"] = ratio(row["torch_compile"], row["ingot"]["ms"])
            # The round trip: ingot's import exported again (bench/onnx_roundtrip.py runs it in ONNX Runtime).
            ml.onnx.save(m, os.path.join(args.dir, f"{key}.ingot.onnx"))
        except ml.IngotError as e:
            row["error"] = str(e)[:400]
        print(json.dumps(row), flush=True)
        rows.append(row)
    out = {"machine": ort["machine"], "measured_utc": ort["measured_utc"], "versions": ort["versions"], "rows": rows}
    with open(os.path.join(args.dir, "onnx_models.json"), "w") as f:
        json.dump(out, f, indent=1)
    print("\n| model | batch | ingot CPU (ms) | ONNX Runtime (ms) | ORT / ingot (each round) | PyTorch eager / ingot | "
          "torch.compile / ingot | import + compile, cold / warm (s) | max rel. error vs ORT |")
    print("|---|---|---|---|---|---|---|---|---|")
    fmt = lambda r: "-" if r is None else f"{r:.2f}x"  # noqa: E731
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['batch']} | import failed: {r['error'][:120]} | {r['onnxruntime_ms']:.1f} | | | | | |")
        else:
            rng = r.get("ratio_onnxruntime_over_ingot_range")
            ort_ratio = f"{rng[0]:.2f}-{rng[1]:.2f}x" if rng else f"{r['ratio_onnxruntime_over_ingot']:.2f}x"
            print(f"| {r['model']} | {r['batch']} | {r['ingot']['ms']:.1f} | {r['onnxruntime_ms']:.1f} | "
                  f"{ort_ratio} | {fmt(r['ratio_torch_eager_over_ingot'])} | "
                  f"{fmt(r['ratio_torch_compile_over_ingot'])} | {r['import_compile_cold_s']:.2f} / "
                  f"{r['import_compile_warm_s']:.3f} | {r['err_vs_onnxruntime']:.1e} |")


if __name__ == "__main__":
    main()
