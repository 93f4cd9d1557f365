#!/usr/bin/env python3
"""The ONNX round trip (scripts/onnx_models.sh): each exported model was imported by ingot and
exported again by ingot (<name>.ingot.onnx, written by bench/onnx_models.py); ONNX Runtime runs
both files on the same input, and the largest difference (over max(1, max |original|)) is added
to <dir>/onnx_models.json as roundtrip_err_under_onnxruntime.

  python bench/onnx_roundtrip.py --dir DIR      (in an environment with onnxruntime)
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import ort_session  # noqa: E402


def run(path, x):
    sess = ort_session(ort, path, 2)
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    path = os.path.join(args.dir, "onnx_models.json")
    with open(path) as f:
        results = json.load(f)
    for row in results["rows"]:
        name = row.get("key", row["model"])
        again = os.path.join(args.dir, f"{name}.ingot.onnx")
        if not os.path.exists(again):
            continue
        onnx.checker.check_model(onnx.load(again), full_check=True)
        x = np.load(os.path.join(args.dir, f"{name}.npz"))["input"]
        a, b = run(os.path.join(args.dir, f"{name}.onnx"), x), run(again, x)
        row["roundtrip_err_under_onnxruntime"] = float(np.max(np.abs(b - a)) / max(1.0, float(np.max(np.abs(a)))))
        print(f"{name}: import -> export round trip under ONNX Runtime, max rel. difference "
              f"{row['roundtrip_err_under_onnxruntime']:.1e}", flush=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
