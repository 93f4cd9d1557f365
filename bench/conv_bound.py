#!/usr/bin/env python3
"""How fast a CNN could run on this machine with the convolution library ingot calls: the bound
that README's "Vision models" sets beside ONNX Runtime's time (issue 22: ResNet-50's 1.2x).

The model (ml.ResNet50, ResNet18 or MobileNetV2 from the zoo, weights as constants, batch B,
3x224x224, 2 threads) runs in a child process under ONEDNN_VERBOSE=1, which prints each oneDNN
convolution of a call with its kernel, shape and time. The bound adds up, for one call:
  - each Winograd convolution (3x3 stride 1: fewer multiplies than any GEMM on the same shape) at
    the time it took in the network;
  - each direct convolution at the time the library GEMM (dnnl_sgemm, what ingot's matmuls call)
    takes for the matrix product of the same work, [N*OH*OW, C/g*KH*KW] x [C/g*KH*KW, OC] per
    group, with its operands hot in cache after the first of 15 calls (build/release/
    bench_gemm_shapes): no im2col, no weights from memory, so no convolution kernel reaches it;
  - every other kernel of the call at its time in ml.profile().
With --ort-python (an interpreter with onnxruntime, torch and torchvision: the benchmark
environment), ONNX Runtime's time for torchvision's model is taken in rounds alternating with
ingot's, and the bound's ratio to it is the most any kernels as fast as the library GEMM could
reach.

  python bench/conv_bound.py [--model resnet50] [--batch 1] [--gemm build/release/bench_gemm_shapes]
                             [--ort-python PYTHON] [--rounds 5] [--reps 10] [--json OUT]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

THREADS = 2
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(var, str(THREADS))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine, measured_utc, write_json  # noqa: E402

ZOO = {"resnet18": "ResNet18", "resnet50": "ResNet50", "mobilenet_v2": "MobileNetV2"}
CALLS = 4  # calls the verbose child makes; each prints the same convolutions

# The ingot side, run in this interpreter: the compiled model and a timed call.
INGOT_CHILD = r"""
import sys, numpy as np, ingot as ml
name, batch = sys.argv[1], int(sys.argv[2])
net = getattr(ml, name)(num_classes=1000)
be = ml.CpuBackend(num_threads=2)
opts = dict(shapes={"input": [batch, 3, 224, 224]}, inference=True)
params = {k: np.asarray(v) for k, v in ml.compile(net, be, **opts).randomize_params(seed=0).items()}
pm = ml.compile(net, be, constant_keys=params, **opts)
x = np.random.default_rng(0).random((batch, 3, 224, 224), dtype=np.float32)
if sys.argv[3] == "verbose":
    for _ in range(int(sys.argv[4])): pm.evaluate({}, {"input": x})
    sys.exit(0)
import time
for _ in range(3): pm.evaluate({}, {"input": x})
with ml.profile() as prof:
    for _ in range(5): pm.evaluate({}, {"input": x})
other = sum(r["total_s"] for r in prof.rows() if "conv2d" not in r["name"]) / 5 * 1e3
print("other", other, flush=True)
for line in sys.stdin:
    ts = []
    for _ in range(int(line)):
        t = time.perf_counter(); pm.evaluate({}, {"input": x}); ts.append(time.perf_counter() - t)
    print(sorted(ts)[len(ts) // 2] * 1e3, flush=True)
"""

ORT_CHILD = r"""
import sys, os, tempfile, time, numpy as np, torch, torchvision, onnxruntime as ort
sys.path.insert(0, sys.argv[3])
from machine import ort_session
name, batch = sys.argv[1], int(sys.argv[2])
model = getattr(torchvision.models, name)(weights=None, num_classes=1000).eval()
xt = torch.rand(batch, 3, 224, 224)
path = os.path.join(tempfile.mkdtemp(), name + ".onnx")
torch.onnx.export(model, (xt,), path, input_names=["input"], output_names=["logits"], opset_version=17, dynamo=False)
sess = ort_session(ort, path, 2)
x = xt.numpy()
for _ in range(3): sess.run(None, {"input": x})
print("ready", flush=True)
for line in sys.stdin:
    ts = []
    for _ in range(int(line)):
        t = time.perf_counter(); sess.run(None, {"input": x}); ts.append(time.perf_counter() - t)
    print(sorted(ts)[len(ts) // 2] * 1e3, flush=True)
"""

SHAPE = re.compile(r"mb(\d+)_(?:g(\d+))?ic(\d+)oc(\d+)_ih\d+oh(\d+)kh(\d+).*?iw\d+ow(\d+)kw(\d+)")


def parse_convs(verbose_text):
    """One call's convolutions from ONEDNN_VERBOSE output: (kernel, (n, groups, ic, oc, oh, ow, kh, kw), ms)."""
    lines = [ln for ln in verbose_text.splitlines() if ln.startswith("onednn_verbose,exec,cpu,convolution,")
             or ln.startswith("dnnl_verbose,exec,cpu,convolution,")]
    if not lines or len(lines) % CALLS:
        raise SystemExit(f"conv_bound: expected the same convolutions in each of {CALLS} calls, got {len(lines)} lines")
    convs = []
    for ln in lines[-len(lines) // CALLS:]:
        fields = ln.split(",")
        m = SHAPE.search(fields[-2])
        if m is None:
            raise SystemExit(f"conv_bound: cannot read the shape of: {ln}")
        n, g, ic, oc, oh, kh, ow, kw = (int(v) if v else 1 for v in m.groups())
        convs.append((fields[4], (n, g, ic, oc, oh, ow, kh, kw), float(fields[-1])))
    return convs


def gemm_work(convs):
    """The library GEMMs doing the direct convolutions' work: {(m, k, n): how many}, one per group."""
    work = {}
    for kernel, (n, g, ic, oc, oh, ow, kh, kw), _ in convs:
        if "wino" not in kernel:
            shape = (n * oh * ow, ic // g * kh * kw, oc // g)
            work[shape] = work.get(shape, 0) + g
    return work


def gemm_times(gemm, shapes):
    out = subprocess.run([gemm], input="".join(f"{m} {k} {n}\n" for m, k, n in shapes), capture_output=True,
                         text=True, check=True).stdout.split("\n")
    return {tuple(int(v) for v in ln.split()[:3]): float(ln.split()[3]) for ln in out if ln.strip()}


def worker(cmd):
    """A child that times `n` calls for each line "n" it reads and prints their median in ms."""
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def timed_round(p, reps):
    p.stdin.write(f"{reps}\n")
    p.stdin.flush()
    return float(p.stdout.readline())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet50", choices=sorted(ZOO))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--gemm", default="build/release/bench_gemm_shapes")
    ap.add_argument("--ort-python", help="interpreter with onnxruntime, torch and torchvision")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    if not os.access(args.gemm, os.X_OK):
        raise SystemExit(f"conv_bound: {args.gemm} not found (build it: cmake --build build/release --target bench_gemm_shapes)")
    name = ZOO[args.model]
    env = dict(os.environ, ONEDNN_VERBOSE="1")
    verbose = subprocess.run([sys.executable, "-c", INGOT_CHILD, name, str(args.batch), "verbose", str(CALLS)],
                             env=env, capture_output=True, text=True, check=True).stdout
    convs = parse_convs(verbose)
    work = gemm_work(convs)
    gemm = gemm_times(args.gemm, sorted(work))
    wino_ms = sum(ms for kernel, _, ms in convs if "wino" in kernel)
    direct_ms = sum(ms for kernel, _, ms in convs if "wino" not in kernel)
    direct_gemm_ms = sum(gemm[s] * count for s, count in work.items())

    ingot = worker([sys.executable, "-c", INGOT_CHILD, name, str(args.batch), "time"])
    other_ms = float(ingot.stdout.readline().split()[1])
    ort = None
    if args.ort_python:
        ort = worker([args.ort_python, "-c", ORT_CHILD, args.model, str(args.batch), os.path.dirname(os.path.abspath(__file__))])
        if ort.stdout.readline().strip() != "ready":
            raise SystemExit("conv_bound: the ONNX Runtime child did not start")
    rounds = []
    for _ in range(args.rounds):
        r = {"ingot_ms": timed_round(ingot, args.reps)}
        if ort:
            r["onnxruntime_ms"] = timed_round(ort, args.reps)
        rounds.append(r)
    for p in (ingot, ort):
        if p:
            p.stdin.close()
            p.wait()
    bound_ms = wino_ms + direct_gemm_ms + other_ms
    result = {"model": args.model, "batch": args.batch, "measured_utc": measured_utc(), "machine": machine(THREADS),
              "convs": len(convs), "winograd_convs": sum("wino" in k for k, _, _ in convs),
              "winograd_ms": wino_ms, "direct_in_network_ms": direct_ms, "direct_as_library_gemm_ms": direct_gemm_ms,
              "other_kernels_ms": other_ms, "bound_ms": bound_ms, "rounds": rounds}
    ingot_ms = statistics.median(r["ingot_ms"] for r in rounds)
    print(f"{args.model} batch {args.batch}, {measured_utc()} UTC, {THREADS} threads")
    print(f"  ingot call {ingot_ms:.2f} ms (median of {args.rounds} rounds' medians of {args.reps})")
    print(f"  {result['winograd_convs']} Winograd convs in the network: {wino_ms:.2f} ms (as oneDNN's verbose timed them)")
    print(f"  {len(convs) - result['winograd_convs']} direct convs in the network: {direct_ms:.2f} ms; the library GEMM on "
          f"the same products, hot: {direct_gemm_ms:.2f} ms")
    print(f"  other kernels: {other_ms:.2f} ms (ml.profile)")
    print(f"  bound: {bound_ms:.2f} ms")
    if ort:
        ratios = [r["onnxruntime_ms"] / r["ingot_ms"] for r in rounds]
        ort_ms = statistics.median(r["onnxruntime_ms"] for r in rounds)
        result.update(onnxruntime_ms=ort_ms, ratio=statistics.median(ratios), bound_ratio=ort_ms / bound_ms)
        print(f"  ONNX Runtime {ort_ms:.2f} ms: ingot at {min(ratios):.3f}-{max(ratios):.3f}x its speed (rounds); "
              f"the bound at {ort_ms / bound_ms:.3f}x")
    if args.json:
        write_json(args.json, result)
    else:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
