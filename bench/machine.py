"""The machine description and run time every Python benchmark writes into its JSON, as the C++
benchmarks do (bench/bench_util.h), and the timing loop of the vision benchmark's two sides.
Standard library only, and nothing happens on import (unlike bench/peers.py, which sets the thread
environment)."""
import datetime
import json
import os
import platform
import time


def timed(fn, reps):
    """fn() once to warm up (and compile), then `reps` timed calls: median, fastest and slowest ms."""
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return {"ms": times[len(times) // 2], "min_ms": times[0], "max_ms": times[-1], "reps": reps}


def measured_utc():
    """When the run happened (UTC), "2026-11-23 01:43"."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine(threads):
    """The "machine" entry of a result file: CPU model, hardware threads, threads the run used."""
    return {"cpu": cpu_model(), "hardware_threads": os.cpu_count(), "threads_used": threads}


def ort_session(ort, model, threads, spinning=True):
    """ONNX Runtime's CPU session on `model` (a path or a serialized ModelProto) as every benchmark
    here runs it: `threads` intra-op threads, one inter-op thread, ONNX Runtime's default graph
    optimizations (all of them). spinning=False turns its workers' busy-wait after a run off
    (session.intra_op.allow_spinning 0: the coexistence rows of bench/transformer_layers.py).
    `ort` is the imported onnxruntime, passed in because it is optional and this file imports the
    standard library only."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if not spinning:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def write_json(path, obj):
    """Writes a result file atomically (a reader never sees half of one)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)
