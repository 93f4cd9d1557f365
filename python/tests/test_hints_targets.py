"""compile(..., hints=..., target_hardware=..., cpu_options=..., optimize_for=...): each decision
observed (the thread count the generated code runs with, SIMD and -Os in the source and build
command, batch chunks in the optimized graph, gradient checkpointing, the batch fixed or checked,
the memory plan at the top of the batch range) with results matching the reference backend, and
every bad key or value rejected with an error naming the option and what is valid."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import ingot as ml
from conftest import cpu

X = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}


def exp_model():
    m = ml.Model()
    m |= ml.Model.primitive("exp", ["in0"], ["output"])(in0="x", output=ml.IOKey("y", expose=True))
    return m


def slices(pm):
    return sum(n["op"] == "slice" for n in json.loads(pm.graph_json())["nodes"])


def report_threads(source):
    """A code transformer: the generated code writes the OpenMP thread count it runs with into
    the output's first element, at the end of the call."""
    end = source.rfind("  return 0;\n}", 0, source.find("// ---- entry ----"))
    return ('extern "C" int omp_get_max_threads();\n' + source[:end] +
            "  static_cast<float*>(outputs[0])[0] = float(omp_get_max_threads());\n" + source[end:])


def test_compile_option_names_lists_every_option():
    names = ml.compile_option_names()
    for name in ("hints", "target_hardware", "cpu_options", "optimize_for", "shapes", "visualize", "template_path"):
        assert name in names
    with pytest.raises(TypeError, match=r"unknown option 'hint' \(valid options: .*hints.*cpu_options"):
        ml.compile(exp_model(), ml.ReferenceBackend(), hint={"inference_priority": "latency"})


def test_num_threads_is_the_running_calls_thread_count(tmp_path):
    path = tmp_path / "m.cpp"
    pm = ml.compile(exp_model(), cpu(), shapes={"x": [3, 4]}, cpu_options={"num_threads": 3},
                    file_path=path, code_transformers=[report_threads])
    assert pm.evaluate({}, X)["y"][0, 0] == 3.0
    assert "const ig_threads_per_call threads(3);" in path.read_text()
    plain = ml.compile(exp_model(), cpu(), shapes={"x": [3, 4]}, cpu_options={"num_threads": 3})
    np.testing.assert_allclose(plain.evaluate({}, X)["y"], np.exp(X["x"]), rtol=1e-6)


def test_vectorize_false_builds_without_simd(tmp_path, capfd):
    path = tmp_path / "m.cpp"
    pm = ml.compile(exp_model(), cpu(), shapes={"x": [3, 4]}, cpu_options={"vectorize": False}, file_path=path,
                    verbose=True)
    err = capfd.readouterr().err
    assert "-fno-tree-vectorize" in err and "vectorize off" in err
    source = path.read_text()
    assert not re.search(r"^\s*#pragma omp simd", source, re.M) and "// vectorize off: pragma omp simd" in source
    ref = ml.compile(exp_model(), ml.ReferenceBackend(), shapes={"x": [3, 4]})
    np.testing.assert_allclose(pm.evaluate({}, X)["y"], ref.evaluate({}, X)["y"], rtol=1e-6)


@pytest.mark.parametrize("priority", ["latency", "throughput"])
def test_inference_priority_chooses_the_threads_per_call(tmp_path, capfd, priority):
    path = tmp_path / "m.cpp"
    pm = ml.compile(exp_model(), cpu(), shapes={"x": [3, 4]}, hints={"inference_priority": priority},
                    file_path=path, verbose=True)
    threads = int(re.search(r"\[cpu\] threads per call: (\d+)", capfd.readouterr().err).group(1))
    assert f"const ig_threads_per_call threads({threads});" in path.read_text()
    if priority == "throughput":
        assert threads == 1
    else:
        assert threads >= 1  # every thread of ingot's ($INGOT_NUM_THREADS or the hardware's)
    np.testing.assert_allclose(pm.evaluate({}, X)["y"], np.exp(X["x"]), rtol=1e-6)
    # optimize_for says the same; without either, OpenMP's default (no count in the source).
    ml.compile(exp_model(), cpu(), shapes={"x": [3, 4]}, optimize_for=priority, file_path=path)
    assert f"threads({threads});" in path.read_text()
    ml.compile(exp_model(), cpu(), shapes={"x": [3, 4]}, file_path=path)
    assert "ig_threads_per_call" not in path.read_text()


def test_priority_and_goal_choose_the_batch_chunks():
    def chunked(batch, **options):
        return slices(ml.compile(ml.ExampleCNN(), ml.ReferenceBackend(), shapes={"input": [batch, 3, 32, 32]},
                                 inference=True, jit=False, **options))

    # About 0.6 MiB per sample is live at the second conv; a batch is split when its live set is
    # over twice the chunk size: 256 MiB by default, 64 MiB for throughput, 16 MiB for memory.
    assert chunked(64) == 0 and chunked(64, optimize_for="memory") > 1
    assert chunked(256) == 0 and chunked(256, hints={"inference_priority": "latency"}) == 0
    assert chunked(256, hints={"inference_priority": "throughput"}) > 1


def test_memory_goal_checkpoints_gradient_graphs(capfd):
    shapes = {"input": [8, 784]}
    plain = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes=shapes)
    lean = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes=shapes, optimize_for="memory", verbose=True)
    params = plain.randomize_params(1)
    x = {"input": np.random.default_rng(0).standard_normal((8, 784)).astype(np.float32)}
    cot = {"output": np.ones((8, 10), np.float32)}
    capfd.readouterr()
    _, got = lean.evaluate(params, x, output_gradients=cot)
    assert "[ingot] gradient checkpointing" in capfd.readouterr().err
    _, want = plain.evaluate(params, x, output_gradients=cot)
    for name, g in want.items():
        np.testing.assert_allclose(got[name], g, rtol=1e-5, atol=1e-6)


def test_size_goal_builds_with_os(capfd):
    pm = ml.compile(exp_model(), cpu(), shapes={"x": [3, 4]}, optimize_for="size", verbose=True)
    err = capfd.readouterr().err
    assert " -Os " in err and " -O3 " not in err
    np.testing.assert_allclose(pm.evaluate({}, X)["y"], np.exp(X["x"]), rtol=1e-6)
    with pytest.raises(ml.IngotError, match="'size' builds the CPU backend's generated library"):
        ml.compile(exp_model(), ml.ReferenceBackend(), shapes={"x": [3, 4]}, optimize_for="size")
    with pytest.raises(ml.IngotError, match="cpu_options' tunes the CPU backend's generated code"):
        ml.compile(exp_model(), ml.NumpyBackend(), shapes={"x": [3, 4]}, cpu_options={"num_threads": 2})


def test_one_batch_size_is_fixed_at_compile_time():
    pm = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [None, 784]},
                    hints={"input_batch_size_range": (4, 4)}, static_shapes=True)
    assert pm.get_shapes()["input"] == [4, 784]
    params = pm.randomize_params(0)
    with pytest.raises(ml.IngotError, match=r"Input 'input' has batch 5 \(its dim 0\), outside the compile option "
                                            r"hints\['input_batch_size_range'\] = \(4, 4\)"):
        pm.evaluate(params, {"input": np.zeros((5, 784), np.float32)})


def test_batch_range_plans_the_top_and_checks_every_call(capfd):
    capfd.readouterr()
    pm = ml.compile(ml.ExampleMLP(), cpu(), shapes={"input": [None, 784]}, hints={"input_batch_size_range": [1, 8]},
                    verbose=True)
    err = capfd.readouterr().err
    assert "(at batch 8, the top of hints input_batch_size_range)" in err
    assert pm.get_shapes()["input"][0] not in (1, 8)  # still symbolic
    ref = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [None, 784]})
    params = ref.randomize_params(2)
    x = np.random.default_rng(1).standard_normal((3, 784)).astype(np.float32)
    np.testing.assert_allclose(pm.evaluate(params, {"input": x})["output"], ref.evaluate(params, {"input": x})["output"],
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(ml.IngotError, match="has batch 9"):
        pm.evaluate(params, {"input": np.zeros((9, 784), np.float32)})
    with pytest.raises(ml.IngotError, match=r"has batch 16 \(its dim 0\) at compile time, outside input_batch_size_range"):
        ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [16, 784]},
                   hints={"input_batch_size_range": (1, 8)})


def test_target_hardware():
    pm = ml.compile(exp_model(), ml.ReferenceBackend(), shapes={"x": [3, 4]}, target_hardware="cpu")
    np.testing.assert_allclose(pm.evaluate({}, X)["y"], np.exp(X["x"]), rtol=1e-6)
    for target in ("gpu", "cuda", "tpu", "mobile", "metal"):
        with pytest.raises(ml.IngotError, match=f"ingot cannot compile for '{target}' here \\(supported: cpu"):
            ml.compile(exp_model(), cpu(), shapes={"x": [3, 4]}, target_hardware=target)


@pytest.mark.parametrize("options, message", [
    ({"hints": {"batch": (1, 4)}}, r"unknown key 'batch' \(valid keys: input_batch_size_range, inference_priority\)"),
    ({"hints": {"input_batch_size_range": (8, 2)}}, r"input_batch_size_range \(8, 2\) must be \(lo, hi\) with 1 <= lo <= hi"),
    ({"hints": {"input_batch_size_range": (0, 2)}}, r"1 <= lo <= hi"),
    ({"hints": {"input_batch_size_range": (1, 2, 3)}}, r"'input_batch_size_range' must be a \(lo, hi\) pair, got 3 items"),
    ({"hints": {"input_batch_size_range": (1.5, 4)}}, r"input_batch_size_range's lo: expected a whole number, got '1.5'"),
    ({"hints": {"input_batch_size_range": 4}}, r"input_batch_size_range must be a \(lo, hi\) pair"),
    ({"hints": {"inference_priority": "fast"}}, r"unknown inference_priority 'fast' \(valid: latency, throughput\)"),
    ({"hints": ["latency"]}, r"Option 'hints': expected a dict, got list"),
    ({"cpu_options": {"threads": 2}}, r"unknown key 'threads' \(valid keys: num_threads, vectorize\)"),
    ({"cpu_options": {"num_threads": 0}}, r"num_threads must be a whole number from 1 to 4096, got 0"),
    ({"cpu_options": {"num_threads": True}}, r"num_threads: expected a whole number, got 'true'"),
    ({"cpu_options": {"vectorize": "maybe"}}, r"cpu_options\['vectorize'\]': expected true or false, got 'maybe'"),
    ({"optimize_for": "speed"}, r"unknown goal 'speed' \(valid: default, latency, throughput, memory, size\)"),
    ({"optimize_for": "latency", "hints": {"inference_priority": "throughput"}}, r"give one priority"),
    ({"optimize_for": "memory", "memory_planning": "none"}, r"use memory_planning 'greedy'"),
])
def test_bad_values_are_rejected(options, message):
    with pytest.raises(ml.IngotError, match=message):
        ml.compile(exp_model(), cpu(), shapes={"x": [3, 4]}, **options)
