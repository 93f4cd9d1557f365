#!/usr/bin/env python3
"""ingot's side of the ONNX real-model check (scripts/onnx_models.sh): each model that
bench/onnx_export.py exported is imported with ml.onnx.load, compiled for the CPU backend and
run on the same input; its output is compared with ONNX Runtime's and PyTorch's (max |diff| over
max(1, max |want|)), and timed in its own loop (2 threads) beside ONNX Runtime's time from the
same run; the imported model is exported again as <name>.ingot.onnx for the round-trip check
(bench/onnx_roundtrip.py). Writes <dir>/onnx_models.json and prints a Markdown table.

  python bench/onnx_models.py --dir DIR [--reps 5]
"""
import argparse
import json
import os
import sys
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    with open(os.path.join(args.dir, "ort.json")) as f:
        ort = json.load(f)
    rows = []
    for name, info in ort["models"].items():
        data = np.load(os.path.join(args.dir, f"{name}.npz"))
        row = {"model": name, "shape": info["shape"], "onnxruntime_ms": info["onnxruntime"]["ms"]}
        try:
            t = time.perf_counter()
            m = ml.onnx.load(os.path.join(args.dir, f"{name}.onnx"))
            pm = ml.compile(m, ml.CpuBackend(num_threads=THREADS))
            got = np.asarray(pm.evaluate({}, {"input": data["input"]})["output"])
            row["import_compile_first_run_s"] = time.perf_counter() - t
            row["err_vs_onnxruntime"] = rel(got, data["ort"])
            row["err_vs_torch"] = rel(got, data["torch"])
            row["ingot"] = timed(lambda: pm.evaluate({}, {"input": data["input"]}), args.reps)
            row["ratio_onnxruntime_over_ingot"] = info["onnxruntime"]["ms"] / row["ingot"]["ms"]
            # The round trip: ingot's import exported again (bench/onnx_roundtrip.py runs it in ONNX Runtime).
            ml.onnx.save(m, os.path.join(args.dir, f"{name}.ingot.onnx"))
        except ml.IngotError as e:
            row["error"] = str(e)[:400]
        print(json.dumps(row), flush=True)
        rows.append(row)
    out = {"machine": ort["machine"], "measured_utc": ort["measured_utc"], "versions": ort["versions"], "rows": rows}
    with open(os.path.join(args.dir, "onnx_models.json"), "w") as f:
        json.dump(out, f, indent=1)
    print("\n| model (batch 1) | ingot CPU (ms) | ONNX Runtime (ms) | ORT / ingot | max rel. error vs ORT | vs PyTorch |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | import failed: {r['error'][:120]} | {r['onnxruntime_ms']:.1f} | | | |")
        else:
            print(f"| {r['model']} | {r['ingot']['ms']:.1f} | {r['onnxruntime_ms']:.1f} | "
                  f"{r['ratio_onnxruntime_over_ingot']:.2f}x | {r['err_vs_onnxruntime']:.1e} | {r['err_vs_torch']:.1e} |")


if __name__ == "__main__":
    main()
