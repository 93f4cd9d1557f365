"""ml.onnx.load: ONNX models (written with the `onnx` package's helpers) imported, compiled and
checked against NumPy; bad input is an IngotError; and ONNX's own node tests (the data shipped in
the `onnx` wheel) through the importer: every test listed in onnx_node_tests_passing.txt on the
reference backend, and the first of each operator's tests on the CPU backend, against the
expected outputs with ONNX's tolerances (rtol 1e-3, atol 1e-7); and the nine real architectures
the wheel ships (test_onnx_real_models) on both backends. Skipped without `onnx`
(pip install onnx==1.22.0; scripts/python-test.sh installs it)."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import re

import numpy as np
import pytest

import ingot as ml

from conftest import cpu, onnx_runner_feed

HAVE_ONNX = importlib.util.find_spec("onnx") is not None
pytestmark = pytest.mark.skipif(not HAVE_ONNX, reason="onnx is not installed (pip install onnx==1.22.0)")

PASSING = [line.strip() for line in (pathlib.Path(__file__).parent / "onnx_node_tests_passing.txt").read_text().splitlines()
           if line.strip() and not line.startswith("#")]


def _mlp_model():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((3, 4)).astype(np.float32)
    b1 = rng.standard_normal(4).astype(np.float32)
    w2 = rng.standard_normal((5, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]),
             helper.make_node("Gemm", ["h2", "w2"], ["logits"], transB=1, alpha=0.5),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 5])],
                              [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                               numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)

    def want(x):
        logits = 0.5 * (np.maximum(x @ w1 + b1, 0) @ w2.T)
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    return model, want


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_mlp_from_bytes_and_path_matches_numpy(tmp_path, backend):
    model, want = _mlp_model()
    path = tmp_path / "mlp.onnx"
    path.write_bytes(model.SerializeToString())
    x = np.random.default_rng(1).standard_normal((7, 3)).astype(np.float32)
    for source in (model.SerializeToString(), path, str(path)):
        m = ml.onnx.load(source)
        pm = ml.compile(m, ml.ReferenceBackend() if backend == "reference" else cpu())
        got = pm.evaluate({}, {"x": x})["probs"]
        np.testing.assert_allclose(got, want(x), rtol=1e-5, atol=1e-6)


def test_constants_fix_shape_inputs():
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    with pytest.raises(ml.IngotError, match="only known at run time"):
        ml.onnx.load(model)
    m = ml.onnx.load(model, constants={"shape": np.array([3, 4], dtype=np.int64)})
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(ml.compile(m, ml.ReferenceBackend()).evaluate({}, {"x": x})["y"], x.reshape(3, 4))
    with pytest.raises(ml.IngotError, match="not an input of the graph"):
        ml.onnx.load(model, constants={"nope": np.array([1])})
    del onnx


def test_bad_input_is_an_ingot_error(tmp_path):
    with pytest.raises(ml.IngotError, match="not a valid ONNX ModelProto"):
        ml.onnx.load(b"\x08\x07garbage that is no protobuf")
    with pytest.raises(ml.IngotError, match="cannot open"):
        ml.onnx.load(tmp_path / "missing.onnx")
    (tmp_path / "t.pb").write_bytes(b"\xff\xff\xff")
    with pytest.raises(ml.IngotError, match="not a valid TensorProto"):
        ml.onnx.load_tensor(str(tmp_path / "t.pb"))


def test_load_tensor_reads_what_numpy_helper_writes(tmp_path):
    from onnx import numpy_helper

    for a in (np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, -2, 3], dtype=np.int64),
              np.array([True, False]), np.zeros((0, 4), dtype=np.float64)):
        p = tmp_path / "t.pb"
        p.write_bytes(numpy_helper.from_array(a, "t").SerializeToString())
        got = ml.onnx.load_tensor(str(p))
        assert got.dtype == a.dtype and got.shape == a.shape
        np.testing.assert_array_equal(got, a)


def _node_tests_dir() -> pathlib.Path:
    import onnx

    return pathlib.Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "node"


def _run_node_test(name: str, backend) -> None:
    """One ONNX node test: inputs fed (integer inputs fixed while importing where the import
    needs them), every output compared as ONNX's runner does."""
    import onnx
    from onnx import numpy_helper

    d = _node_tests_dir() / name
    assert d.is_dir(), f"{name} is not among the onnx package's node tests (onnx==1.22.0 expected)"
    proto = onnx.load(str(d / "model.onnx"), load_external_data=False)
    init = {t.name for t in proto.graph.initializer}
    inputs = [i.name for i in proto.graph.input if i.name not in init]
    outputs = [o.name for o in proto.graph.output]
    data = d / "test_data_set_0"
    feed = {}
    for k, n in enumerate(inputs):
        p = data / f"input_{k}.pb"
        if p.exists():
            feed[n] = numpy_helper.to_array(onnx.load_tensor(str(p)))
    # Shape-deciding inputs (integers, and any the importer names: Resize's float scales) are
    # fixed while importing, as the conformance runner does.
    constants = {}
    for attempt in range(len(inputs) + 2):
        try:
            m = ml.onnx.load(d / "model.onnx", constants=constants)
            break
        except ml.IngotError as e:
            if "only known at run time" not in str(e):
                raise
            before = set(constants)
            if attempt == 0:
                constants.update({n: v for n, v in feed.items() if not np.issubdtype(v.dtype, np.floating)})
            named = re.search(r"\('([^']+)'\) is only known at run time", str(e))
            if named and named.group(1) in feed:
                constants[named.group(1)] = feed[named.group(1)]
            if set(constants) == before:
                raise
    pm = ml.compile(m, backend, dynamic_control_flow=True)  # ONNX's If and Loop decide at run time
    reads = set(pm.input_names())
    got = pm.evaluate({}, {n: v for n, v in feed.items() if n in reads})
    for k, n in enumerate(outputs):
        p = data / f"output_{k}.pb"
        if not p.exists():
            continue
        want = numpy_helper.to_array(onnx.load_tensor(str(p)))
        g = np.asarray(got[n])
        assert g.dtype == want.dtype, f"{name}: output {n} dtype {g.dtype}, expected {want.dtype}"
        np.testing.assert_allclose(g, want, rtol=1e-3, atol=1e-7, err_msg=f"{name}: output {n}")


@pytest.mark.parametrize("name", PASSING)
def test_onnx_node_suite_reference(name):
    _run_node_test(name, ml.ReferenceBackend())


def _first_per_operator(names):
    seen, out = set(), []
    for n in names:
        op = n[len("test_"):].split("_")[0]
        if op not in seen:
            seen.add(op)
            out.append(n)
    return out


@pytest.mark.parametrize("name", _first_per_operator(PASSING))
def test_onnx_node_suite_cpu(name):
    _run_node_test(name, cpu())


# The nine real architectures the onnx wheel ships (onnx/backend/test/data/light: weights as
# ConstantOfShape fills, expected output beside), fed and judged as ONNX's runner does: each input
# of its declared shape (unknown dims 1) holding arange(n) / n in float32; rtol 2e-3 for
# DenseNet-121, 1e-3 for the rest, atol 1e-7.
#
# Except where float32 cannot decide the output: constant weights make ResNet-50's 1,000 logits
# equal and 1.28e19 in size, where one float32 unit is 1.1e12, so its softmax is set by rounding
# alone (the expected output, uniform, comes from logits that happen to round alike; the CPU
# backend's AVX-512 GEMM, whose 1,000 columns take a main and a tail kernel, gives logits
# 1.5e-5 apart, relatively: a softmax of 0.125 on eight of them). An output of a Softmax whose
# logits exceed 100 (where 1e-4 of them moves a probability by a factor e^0.01) is judged on the
# CPU backend by its logits against the reference interpreter's (rtol 1e-4) and by being a
# distribution.
REAL_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
               "vgg19", "zfnet512"]


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("name", REAL_MODELS)
def test_onnx_real_models(name, backend):
    import onnx
    from onnx import numpy_helper

    light = _node_tests_dir().parent / "light"
    path = light / f"light_{name}.onnx"
    assert path.exists(), f"{path} is not in the onnx package (onnx==1.22.0 expected)"
    proto = onnx.load(str(path))
    feed = onnx_runner_feed(proto)
    # The logits of every output that a Softmax makes, exposed as outputs too.
    logits_of = {n.output[0]: n.input[0] for n in proto.graph.node if n.op_type == "Softmax"}
    logits_of = {o.name: logits_of[o.name] for o in proto.graph.output if o.name in logits_of}
    for lg in logits_of.values():
        proto.graph.output.append(onnx.helper.make_tensor_value_info(lg, onnx.TensorProto.FLOAT, None))
    model = proto.SerializeToString()
    pm = ml.compile(ml.onnx.load(model), ml.ReferenceBackend() if backend == "reference" else cpu())
    got = pm.evaluate({}, feed)
    rtol = 2e-3 if name == "densenet121" else 1e-3
    for k, o in enumerate(proto.graph.output[:len(proto.graph.output) - len(logits_of)]):
        want = numpy_helper.to_array(onnx.load_tensor(str(light / f"light_{name}_output_{k}.pb")))
        lg = logits_of.get(o.name)
        if backend == "cpu" and lg is not None:
            ref = np.asarray(ml.compile(ml.onnx.load(model), ml.ReferenceBackend()).evaluate({}, feed)[lg])
            if np.max(np.abs(ref)) > 100:
                np.testing.assert_allclose(np.asarray(got[lg]), ref, rtol=1e-4, err_msg=f"{name}: {lg}")
                probs = np.asarray(got[o.name])
                assert probs.shape == want.shape and np.all(probs >= 0)
                np.testing.assert_allclose(probs.reshape(probs.shape[0], -1).sum(axis=-1), 1.0, rtol=1e-5)  # batch 1
                continue
        np.testing.assert_allclose(np.asarray(got[o.name]), want, rtol=rtol, atol=1e-7, err_msg=f"{name}: {o.name}")


def test_trainable_import_fine_tunes(tmp_path):
    """trainable=True: the float initializers are parameters, returned with their values; the
    model computes what the constant import does, and gradient steps on those parameters lower a
    squared error (the gradients are ingot's, through the imported graph)."""
    model, _ = _mlp_model()
    path = tmp_path / "mlp.onnx"
    path.write_bytes(model.SerializeToString())
    m, params = ml.onnx.load(path, trainable=True)
    assert set(params) == {"w1", "b1", "w2"}
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 3)).astype(np.float32)
    target = np.eye(5, dtype=np.float32)[rng.integers(0, 5, 16)]
    pm = ml.compile(m, ml.ReferenceBackend())
    frozen = ml.compile(ml.onnx.load(path), ml.ReferenceBackend())
    np.testing.assert_allclose(pm.evaluate(params, {"x": x})["probs"], frozen.evaluate({}, {"x": x})["probs"], rtol=1e-6)

    def loss(p):
        return float(np.sum((pm.evaluate(p, {"x": x})["probs"] - target) ** 2))

    # One gradient element against a central difference, then plain gradient descent.
    probs = pm.evaluate(params, {"x": x})["probs"]
    _, grads = pm.evaluate(params, {"x": x}, {"probs": 2 * (probs - target)})
    h = 1e-2
    up, down = dict(params), dict(params)
    up["w1"], down["w1"] = params["w1"].copy(), params["w1"].copy()
    up["w1"][1, 2] += h
    down["w1"][1, 2] -= h
    np.testing.assert_allclose(grads["w1"][1, 2], (loss(up) - loss(down)) / (2 * h), rtol=2e-2, atol=1e-3)
    before = loss(params)
    for _ in range(60):
        probs = pm.evaluate(params, {"x": x})["probs"]
        _, grads = pm.evaluate(params, {"x": x}, {"probs": 2 * (probs - target)})
        params = {k: v - 0.5 * grads[k] for k, v in params.items()}
    assert loss(params) < 0.8 * before
