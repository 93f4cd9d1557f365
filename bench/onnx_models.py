#!/usr/bin/env python3
"""ingot's side of the ONNX real-model check (scripts/onnx_models.sh): each model that
bench/onnx_export.py exported is imported with ml.onnx.load, compiled for the CPU backend and
run on the same input; its output is compared with ONNX Runtime's and PyTorch's (max |diff| over
max(1, max |want|)), and timed in its own loop (2 threads) beside the times of ONNX Runtime,
PyTorch eager and torch.compile from the same run. Import + compile is timed in fresh processes:
cold (an empty cache directory: the C++ compiler runs) and warm (the cache that run filled). The
imported model is exported again as <key>.ingot.onnx for the round-trip check
(bench/onnx_roundtrip.py). Writes <dir>/onnx_models.json and prints a Markdown table.

  python bench/onnx_models.py --dir DIR [--reps 5]
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


def ratio(peer, ingot_ms):
    return None if peer is None else peer["ms"] / ingot_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--reps", type=int, default=5)
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
            row["ingot"] = timed(lambda: pm.evaluate({}, {"input": data["input"]}), args.reps)
            row["ratio_onnxruntime_over_ingot"] = info["onnxruntime"]["ms"] / row["ingot"]["ms"]
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
    print("\n| model | batch | ingot CPU (ms) | ONNX Runtime (ms) | ORT / ingot | PyTorch eager / ingot | "
          "torch.compile / ingot | import + compile, cold / warm (s) | max rel. error vs ORT |")
    print("|---|---|---|---|---|---|---|---|---|")
    fmt = lambda r: "-" if r is None else f"{r:.2f}x"  # noqa: E731
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['batch']} | import failed: {r['error'][:120]} | {r['onnxruntime_ms']:.1f} | | | | | |")
        else:
            print(f"| {r['model']} | {r['batch']} | {r['ingot']['ms']:.1f} | {r['onnxruntime_ms']:.1f} | "
                  f"{r['ratio_onnxruntime_over_ingot']:.2f}x | {fmt(r['ratio_torch_eager_over_ingot'])} | "
                  f"{fmt(r['ratio_torch_compile_over_ingot'])} | {r['import_compile_cold_s']:.2f} / "
                  f"{r['import_compile_warm_s']:.3f} | {r['err_vs_onnxruntime']:.1e} |")


if __name__ == "__main__":
    main()
