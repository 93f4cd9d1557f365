#!/usr/bin/env python3
"""mixed_precision="bfloat16" against float32 on the CPU backend, both compiles in one process,
rounds alternating (median of `reps` calls each), so the ratio of each round compares the two
under the same machine state:
  - a BERT-base FFN block ([rows, 768] -> Linear 3072 -> GELU -> Linear 768, a logical model
    compiled with inference=True, weights passed per call) at 128 and 1,024 rows;
  - a BERT-base encoder layer (the zoo's TransformerEncoderLayer, d 768, 12 heads, FFN 3072,
    weights compiled in as constants) at 1 x 128 and 1 x 512: under mixed precision its
    projections, FFN and attention (scaled_dot_product_attention) run in bfloat16;
  - the zoo's ResNet-50 (weights compiled in as constants, 3 x 224 x 224) at batch 1 and 8: its
    convolutions run in bfloat16 (oneDNN's AMX kernels where the host has AMX, else widened to
    float32), batch norms folded into them;
  - a training step of the zoo's ResNet-18 (batch 8, 3 x 128 x 128 and 3 x 224 x 224, weights
    passed per call, every parameter's gradient): the forward convolutions and both gradients of
    each run on bfloat16 operands (on AMX, where the conv's output is 6x6 or more: oneDNN's bf16
    backward kernels), batch norms in training mode in float32. Its error column is the output's;
    the JSON also holds the median over parameters of each gradient's largest difference from
    float32's, relative to its largest value;
  - a training step of a 4-layer transformer encoder (the zoo's TransformerEncoderLayer stacked,
    d 256, 4 heads, FFN 1024, batch 8 x seq 128: issue 13's training benchmark), weights passed
    per call, every parameter's gradient: its matmuls, attention and the attention's gradient
    (scaled_dot_product_attention_grad) in bfloat16; layer norms, softmax sums and GELU float32.
On a host whose oneDNN runs bfloat16 natively (ISA avx512_core_bf16 or avx512_core_amx:
AVX512_BF16, AMX) the bfloat16 matmuls and the attention's block products run its bf16 matmul;
elsewhere they are widened to float32 and the ratio shows the casts' cost. The error column is the
bfloat16 output's largest difference from float32's, relative to float32's largest value
(bfloat16 keeps 8 bits: about 4e-3).

  python bench/mixed_precision.py [--rounds 5] [--reps 10] [--out bench/results/mixed_precision.json]
"""
import argparse
import os
import statistics
import sys

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine, measured_utc, timed, write_json  # noqa: E402

import ingot as ml  # noqa: E402


def bf16_flags():
    """The host's bfloat16 instruction sets (/proc/cpuinfo flags): avx512_bf16, amx_bf16, or none."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    return [f for f in ("avx512_bf16", "amx_bf16") if f in flags]


def ffn_block():
    m = ml.Model()
    m |= ml.Linear(3072)(input="input", output="h")
    m |= ml.Gelu()(input="h", output="g")
    m |= ml.Linear(768)(input="g", output=ml.IOKey("output", expose=True))
    return m


def compare(pms, run, rounds, reps):
    """Both compiles' outputs and times, rounds alternating; the fields of a result row."""
    out = {mp: np.asarray(run(pm), dtype=np.float32) for mp, pm in pms.items()}
    error = float(np.abs(out["bfloat16"] - out["none"]).max() / np.abs(out["none"]).max())
    ms = {mp: [] for mp in pms}
    for _ in range(rounds):
        for mp, pm in pms.items():
            ms[mp].append(timed(lambda: run(pm), reps)["ms"])  # noqa: B023
    ratios = [f / b for f, b in zip(ms["none"], ms["bfloat16"])]
    return {"float32_ms": ms["none"], "bfloat16_ms": ms["bfloat16"], "float32_over_bfloat16": ratios,
            "median_ratio": statistics.median(ratios), "bfloat16_error": error}


def ffn_row(rows, rounds, reps):
    model = ffn_block()
    x = (np.random.default_rng(0).random((rows, 768), dtype=np.float32) - 0.5)
    pms = {mp: ml.compile(model, ml.CpuBackend(num_threads=THREADS), shapes={"input": [rows, 768]}, inference=True,
                          mixed_precision=mp) for mp in ("none", "bfloat16")}
    params = pms["none"].randomize_params(1)
    return {"block": f"FFN, {rows} rows", "rows": rows,
            **compare(pms, lambda pm: pm.evaluate(params, {"input": x})["output"], rounds, reps)}


def layer_row(batch, seq, rounds, reps):
    shapes = {"input": [batch, seq, 768]}
    layer = ml.TransformerEncoderLayer(768, 12, 3072)
    params = ml.compile(layer, ml.ReferenceBackend(), shapes=shapes, inference=True).randomize_params(1)
    x = np.random.default_rng(0).standard_normal((batch, seq, 768)).astype(np.float32)
    pms = {mp: ml.compile(layer, ml.CpuBackend(num_threads=THREADS), shapes=shapes, inference=True,
                          constant_keys=params, mixed_precision=mp) for mp in ("none", "bfloat16")}
    return {"block": f"BERT-base layer, {batch} x {seq}", "rows": batch * seq,
            **compare(pms, lambda pm: pm.evaluate({}, {"input": x})["output"], rounds, reps)}


def resnet_row(batch, rounds, reps):
    shapes = {"input": [batch, 3, 224, 224]}
    model = ml.ResNet50()
    params = ml.compile(model, ml.ReferenceBackend(), shapes=shapes, inference=True).randomize_params(1)
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype(np.float32)
    pms = {mp: ml.compile(model, ml.CpuBackend(num_threads=THREADS), shapes=shapes, inference=True,
                          constant_keys=params, mixed_precision=mp) for mp in ("none", "bfloat16")}
    return {"block": f"ResNet-50, batch {batch}", "rows": batch,
            **compare(pms, lambda pm: pm.evaluate({}, {"input": x})["output"], rounds, reps)}


def resnet_train_row(batch, size, rounds, reps):
    shapes = {"input": [batch, 3, size, size]}
    model = ml.ResNet18()
    pms = {mp: ml.compile(model, ml.CpuBackend(num_threads=THREADS), shapes=shapes, mixed_precision=mp)
           for mp in ("none", "bfloat16")}
    params = pms["none"].randomize_params(1)
    x = np.random.default_rng(0).standard_normal((batch, 3, size, size)).astype(np.float32)
    cot = {"output": np.random.default_rng(1).standard_normal((batch, 1000)).astype(np.float32)}
    grads = {mp: pm.evaluate(params, {"input": x}, cot)[1] for mp, pm in pms.items()}
    rel = [float(np.abs(np.asarray(grads["bfloat16"][k]) - np.asarray(g)).max() / np.abs(np.asarray(g)).max())
           for k, g in grads["none"].items() if np.abs(np.asarray(g)).max() > 0]
    return {"block": f"ResNet-18 training step, {batch} x {size} x {size}", "rows": batch,
            **compare(pms, lambda pm: pm.evaluate(params, {"input": x}, cot)[0]["output"], rounds, min(reps, 5)),
            "gradient_error_median": statistics.median(rel)}


def encoder_train_row(layers, batch, seq, d, heads, ffn, rounds, reps):
    model = ml.Model()
    prev = "input"
    for i in range(layers):
        out = ml.IOKey("output", expose=True) if i == layers - 1 else f"h{i}"
        model |= ml.TransformerEncoderLayer(d, heads, ffn)(input=prev, output=out)
        prev = f"h{i}"
    shapes = {"input": [batch, seq, d]}
    pms = {mp: ml.compile(model, ml.CpuBackend(num_threads=THREADS), shapes=shapes, mixed_precision=mp)
           for mp in ("none", "bfloat16")}
    params = pms["none"].randomize_params(1)
    x = np.random.default_rng(0).standard_normal((batch, seq, d)).astype(np.float32)
    cot = {"output": np.random.default_rng(1).standard_normal((batch, seq, d)).astype(np.float32)}
    grads = {mp: pm.evaluate(params, {"input": x}, cot)[1] for mp, pm in pms.items()}
    rel = [float(np.abs(np.asarray(grads["bfloat16"][k]) - np.asarray(g)).max() / np.abs(np.asarray(g)).max())
           for k, g in grads["none"].items() if np.abs(np.asarray(g)).max() > 0]
    return {"block": f"{layers}-layer encoder training step, {batch} x {seq}, d {d}", "rows": batch * seq,
            **compare(pms, lambda pm: pm.evaluate(params, {"input": x}, cot)[0]["output"], rounds, min(reps, 5)),
            "gradient_error_median": statistics.median(rel)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                  "mixed_precision.json"))
    args = ap.parse_args()
    results = {"benchmark": "mixed_precision", "measured_utc": measured_utc(), "machine": machine(THREADS),
               "bf16_instructions": bf16_flags(),
               "rows": [ffn_row(r, args.rounds, args.reps) for r in (128, 1024)] +
                       [layer_row(1, s, args.rounds, args.reps) for s in (128, 512)] +
                       [resnet_row(b, args.rounds, args.reps) for b in (1, 8)] +
                       [resnet_train_row(8, s, args.rounds, args.reps) for s in (128, 224)] +
                       [encoder_train_row(4, 8, 128, 256, 4, 1024, args.rounds, args.reps)]}
    write_json(args.out, results)
    print("| block | float32 ms | bfloat16 ms | float32 / bfloat16 (median) | bfloat16 error |")
    print("|---|---|---|---|---|")
    for r in results["rows"]:
        f, b, q = sorted(r["float32_ms"]), sorted(r["bfloat16_ms"]), sorted(r["float32_over_bfloat16"])
        print(f"| {r['block']} | {f[0]:.1f}-{f[-1]:.1f} | {b[0]:.1f}-{b[-1]:.1f} | "
              f"{q[0]:.2f}-{q[-1]:.2f}x ({r['median_ratio']:.2f}x) | "
              f"{r['bfloat16_error']:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
