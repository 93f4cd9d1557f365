"""ONNX's If, Loop and Scan through ml.onnx. Export: ingot's If, While and Scan blocks written as
ONNX (ml.onnx.save), checked by onnx.checker with full shape inference, run by ONNX Runtime against
ingot (where onnxruntime is installed), and read back by ml.onnx.load on both backends. Import:
models written with onnx.helper (a run-time If, a Loop whose condition is data, a Scan with axes
and directions) run through ingot's ONNX backend (which compiles them with dynamic_control_flow)
against NumPy and ONNX Runtime. Skipped without `onnx`."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import ingot as ml

from conftest import cpu

HAVE_ONNX = importlib.util.find_spec("onnx") is not None
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
pytestmark = pytest.mark.skipif(not HAVE_ONNX, reason="onnx is not installed (pip install onnx==1.22.0)")
NO_ORT = "onnxruntime is not installed: ONNX Runtime not compared"


# ----------------------------------------------------------------------------------- export

def if_case():
    model = ml.Model()
    model |= ml.If("p", ml.Linear(dimension=3)(input="x", output="y"),
                   ml.Model.primitive("neg", ["input"])(input="x", output="y"))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    feeds = [{"x": x, "p": np.array(True)}, {"x": x, "p": np.array(False)}]
    return model, {"x": [2, 3], "p": []}, {"p": ml.bool}, feeds, "If"


def while_case():
    body = ml.Model()
    body |= ml.Linear(dimension=4)(input="state", output="pre")
    body |= ml.Tanh()(input="pre", output="new_state")
    model = ml.Model()
    model |= ml.While(condition="step < max_steps", body=body, initial_state={"state": "initial_state", "step": 0},
                      loop_vars={"state": "new_state", "step": "step + 1"},
                      output_vars={"final_state": "state", "steps": "step"})
    s0 = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    feeds = [{"initial_state": s0, "max_steps": np.array(n, np.float32)} for n in (0, 1, 4)]
    return model, {"initial_state": [2, 4], "max_steps": []}, {}, feeds, "Loop"


def scan_case(reverse):
    body = ml.Model()
    body |= ml.Linear(dimension=4, use_bias=False)(input="x_t", output="xw")
    body |= ml.Linear(dimension=4)(input="h", output="hw")
    body |= ml.Add()(left="xw", right="hw", output="pre")
    body |= ml.If("flip", ml.Tanh()(input="pre", output="h_next"),
                  ml.Model.primitive("neg", ["input"])(input="pre", output="h_next"))
    model = ml.Model()
    model |= ml.Scan(body, xs={"x_t": "xs"}, initial_state={"h": "h0"}, loop_vars={"h": "h_next"},
                     ys={"hs": "h_next"}, output_vars={"last": "h"}, reverse=reverse)
    rng = np.random.default_rng(3)
    xs, h0 = rng.standard_normal((5, 2, 3)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)
    feeds = [{"xs": xs, "h0": h0, "flip": np.array(f)} for f in (True, False)]
    return model, {"xs": [5, 2, 3], "h0": [2, 4], "flip": []}, {"flip": ml.bool}, feeds, "Scan"


CASES = {"if": if_case, "while": while_case, "scan": lambda: scan_case(False), "scan_reverse": lambda: scan_case(True)}


def _export(case):
    import onnx

    model, shapes, types, feeds, op = CASES[case]()
    pm = ml.compile(model, ml.ReferenceBackend(), shapes=shapes, types=types, dynamic_control_flow=True)
    params = pm.randomize_params(7)
    wants = [{k: np.asarray(v) for k, v in pm.evaluate(params, feed).items()} for feed in feeds]
    data = ml.onnx.save(model, params=params, shapes=shapes, types=types)
    proto = onnx.load_from_string(data)
    onnx.checker.check_model(proto, full_check=True)  # structure, types, and ONNX's shape inference
    assert op in [n.op_type for n in proto.graph.node]
    return data, feeds, wants


@pytest.mark.parametrize("case", CASES)
def test_exported_control_flow_passes_the_checker_and_reads_back(case):
    data, feeds, wants = _export(case)
    back = ml.onnx.load(data)
    for backend in (ml.ReferenceBackend(), cpu()):
        pm = ml.compile(back, backend, dynamic_control_flow=True)
        for feed, want in zip(feeds, wants):
            got = pm.evaluate({}, feed)
            for name, w in want.items():
                np.testing.assert_allclose(np.asarray(got[name]), w, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.skipif(not HAVE_ORT, reason=NO_ORT)
@pytest.mark.parametrize("case", CASES)
def test_onnx_runtime_runs_exported_control_flow_as_ingot_does(case):
    import onnxruntime as ort

    data, feeds, wants = _export(case)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for feed, want in zip(feeds, wants):
        got = dict(zip(names, sess.run(None, feed)))
        for name, w in want.items():
            np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-6, err_msg=name)


# ----------------------------------------------------------------------------------- import

def _model(nodes, inputs, outputs, initializers=(), opset=16):
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def if_onnx():
    """y = If(cond) { 2 (x + w) } else { x - w } + x, the branches reading x and w by name."""
    from onnx import TensorProto, helper, numpy_helper

    then_branch = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Mul", ["s", "two"], ["then_out"])], "then",
        [], [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.array(2, np.float32), "two")])
    else_branch = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["else_out"])], "else", [],
                                    [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("If", ["cond"], ["b"], then_branch=then_branch, else_branch=else_branch),
             helper.make_node("Add", ["b", "x"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                   [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")])
    x = np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32)
    w = np.array([1, 2, 3], np.float32)
    feeds = [{"cond": np.array(c), "x": x} for c in (True, False)]
    wants = [[2 * (x + w) + x], [x - w + x]]
    return model, feeds, wants


def loop_onnx():
    """for (i = 0; i < M && cond; ++i) { y = 2 y + x + i; cond = sum(y) < 40 }: a while loop."""
    from onnx import TensorProto, helper, numpy_helper

    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "two"], ["d"]), helper.make_node("Add", ["d", "x"], ["dx"]),
         helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT), helper.make_node("Add", ["dx", "fi"], ["y_out"]),
         helper.make_node("ReduceSum", ["y_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(2, np.float32), "two")])
    model = _model([helper.make_node("Loop", ["M", "cond", "y0"], ["y"], body=body)],
                   [helper.make_tensor_value_info("M", TensorProto.INT64, []),
                    helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                    helper.make_tensor_value_info("y0", TensorProto.FLOAT, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                   [numpy_helper.from_array(np.array(40, np.float32), "limit")])
    x, y0 = np.array([1.5, -0.5], np.float32), np.array([0.25, 2], np.float32)
    feeds, wants = [], []
    for trip, cond in ((10, True), (2, True), (10, False)):
        y, c = y0.astype(np.float64), cond
        i = 0
        while i < trip and c:
            y = 2 * y + x + i
            c = y.sum() < 40
            i += 1
        feeds.append({"M": np.array(trip, np.int64), "cond": np.array(cond), "x": x, "y0": y0})
        wants.append([y])
    return model, feeds, wants


def scan_onnx():
    """s += a[:, t] * b[2 - t, :]: a scanned along axis 1, b in reverse, ys written along axis 1
    last step first."""
    from onnx import TensorProto, helper

    body = helper.make_graph(
        [helper.make_node("Mul", ["a_t", "b_t"], ["ab"]), helper.make_node("Add", ["s_in", "ab"], ["s_out"]),
         helper.make_node("Identity", ["s_out"], ["y"])], "body",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("s_in", "a_t", "b_t")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("s_out", "y")])
    node = helper.make_node("Scan", ["s0", "a", "b"], ["s", "ys"], body=body, num_scan_inputs=2,
                            scan_input_axes=[1, 0], scan_input_directions=[0, 1], scan_output_directions=[1],
                            scan_output_axes=[1])
    model = _model([node], [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]),
                            helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
                            helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 2])],
                   [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
                    helper.make_tensor_value_info("ys", TensorProto.FLOAT, [2, 3])])
    rng = np.random.default_rng(5)
    s0, a, b = (rng.standard_normal(shape).astype(np.float32) for shape in ((2,), (2, 3), (3, 2)))
    s, ys = s0.astype(np.float64), np.zeros((2, 3))
    for t in range(3):
        s = s + a[:, t] * b[2 - t]
        ys[:, 2 - t] = s
    return model, [{"s0": s0, "a": a, "b": b}], [[s, ys]]


IMPORTS = {"if": if_onnx, "loop": loop_onnx, "scan": scan_onnx}


@pytest.mark.parametrize("case", IMPORTS)
@pytest.mark.parametrize("backend_name", ["reference", "cpu"])
def test_imported_control_flow_runs_through_the_onnx_backend(case, backend_name):
    import onnx
    from ingot.onnx_backend import IngotBackend, IngotCpuBackend

    model, feeds, wants = IMPORTS[case]()
    onnx.checker.check_model(model, full_check=True)
    backend = IngotBackend if backend_name == "reference" else IngotCpuBackend
    rep = backend.prepare(model)
    for feed, want in zip(feeds, wants):
        got = rep.run(feed)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not HAVE_ORT, reason=NO_ORT)
@pytest.mark.parametrize("case", IMPORTS)
def test_imported_control_flow_agrees_with_onnx_runtime(case):
    import onnxruntime as ort
    from ingot.onnx_backend import IngotBackend

    model, feeds, _ = IMPORTS[case]()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = IngotBackend.prepare(model)
    for feed in feeds:
        for g, w in zip(rep.run(feed), sess.run(None, feed)):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)
