"""Framework emitters with gradients="ingot": ingot's backward graph generated as NumPy, JAX or
PyTorch source and run there (NumpyBackend's only gradients; an option of JaxBackend and
TorchBackend). Every (grad) op of src/ops/families.h is emitted by one case below and checked
against the reference backend's gradients in float64; sum_to_like, which the gradient rules emit
only when the run decides which dimensions broadcast, runs as a forward op."""
from __future__ import annotations

import numpy as np
import pytest

import ingot as ml
from conftest import _FRAMEWORK_BACKENDS, op_model


# (case, the (grad) op its backward graph must contain, op, {input: shape}, attrs)
CASES = [
    ("conv2d", "conv2d_input_grad", "conv2d", {"x": (2, 4, 7, 6), "w": (6, 2, 3, 2)},
     {"stride": [2, 1], "padding": [1, 1], "dilation": [1, 2], "groups": 2}),
    ("conv2d_weight", "conv2d_weight_grad", "conv2d", {"x": (2, 4, 7, 6), "w": (6, 2, 3, 2)},
     {"stride": [2, 1], "padding": [1, 1], "dilation": [1, 2], "groups": 2}),
    ("max_pool2d", "max_pool2d_grad", "max_pool2d", {"x": (2, 3, 6, 5)}, {"kernel": [3, 2], "stride": [2, 1], "padding": [1, 0]}),
    # ceil_mode: 6 x 5 -> 4 x 2 (floor: 3 x 2), the last row of windows past the padded end
    ("max_pool2d_ceil", "max_pool2d_grad", "max_pool2d", {"x": (2, 3, 6, 5)},
     {"kernel": [3, 3], "stride": [2, 2], "padding": [1, 0], "ceil_mode": 1}),
    ("avg_pool2d", "avg_pool2d_grad", "avg_pool2d", {"x": (2, 3, 6, 5)},
     {"kernel": [3, 3], "stride": [2, 2], "padding": [1, 1], "count_include_pad": 0}),
    ("mean", "broadcast_to_like", "mean", {"x": (3, 4, 5)}, {"axes": [1], "keepdims": 0}),
    ("max", "expand_dims", "max", {"x": (3, 4, 5)}, {"axes": [1], "keepdims": 0}),
    ("reshape", "reshape_like", "reshape", {"x": (3, 4, 5)}, {"shape": [-1, 10]}),
    ("slice", "slice_scatter", "slice", {"x": (7, 6)}, {"starts": [5, 1], "ends": [0, 6], "axes": [0, 1], "steps": [-2, 2]}),
    ("concat", "concat_part", "concat", {"a": (2, 3), "b": (2, 4)}, {"axis": -1}),
    ("gather", "index_add", "gather", {"x": (5, 3)}, {"axis": 0}),
    ("take_along_axis", "scatter_add", "take_along_axis", {"x": (4, 5)}, {"axis": 1}),
    ("sign", "zeros_like", "sign", {"x": (4, 5)}, {}),  # no gradient: zeros
]

# Integer operands of the indexing ops: repeated indices, so the scatters must add up.
INDICES = {"gather": np.array([[4, 0], [4, 2], [1, 4]], np.int64),
           "take_along_axis": np.array([[0, 0, 4], [1, 3, 3], [2, 2, 2], [4, 0, 4]], np.int64)}


def framework_backend(name: str):
    if not _FRAMEWORK_BACKENDS.get(name, (True, ""))[0]:
        pytest.skip(f"{name} is not installed (pip install {name}): its run of ingot's backward graph is not checked")
    return {"numpy": ml.NumpyBackend, "jax": ml.JaxBackend, "torch": ml.TorchBackend}[name](gradients="ingot")


# Shape templates where a case needs symbols: with static shapes the gradient rules pick plain
# reshapes, broadcasts and sums instead of the `like` ops.
SYMBOLIC = {"max": {"x": ["N", 4, 5]},
            "reshape": {"x": ["N", 4, 5]}, "sign": {"x": ["N", 5]}}


def compile_case(case, op, shapes, attrs, backend, index_input=None):
    inputs = list(shapes) + (["idx"] if index_input is not None else [])
    all_shapes = {k: list(v) for k, v in shapes.items()}
    all_shapes.update(SYMBOLIC.get(case, {}))
    types = {k: "float64" for k in shapes}
    if index_input is not None:
        all_shapes["idx"] = list(index_input.shape)
        types["idx"] = "int64"
    return ml.compile(op_model(op, inputs, **attrs), backend, shapes=all_shapes, types=types,
                      data_keys=["idx"] if index_input is not None else [], trainable_keys=list(shapes))


@pytest.mark.parametrize("framework", ["numpy", "jax", "torch"])
@pytest.mark.parametrize("case, grad_op, op, shapes, attrs", CASES, ids=[c[0] for c in CASES])
def test_backward_graph_runs_in_the_framework(framework, case, grad_op, op, shapes, attrs):
    backend = framework_backend(framework)
    rng = np.random.default_rng(len(case))
    idx = INDICES.get(op)
    params = {k: rng.normal(size=s) for k, s in shapes.items()}  # trainable: parameters
    inputs = {} if idx is None else {"idx": idx}
    ref = compile_case(case, op, shapes, attrs, ml.ReferenceBackend(), idx)
    pm = compile_case(case, op, shapes, attrs, backend, idx)
    out_shape = ref.evaluate(params, inputs)["output"].shape
    seed = {"output": rng.normal(size=out_shape)}
    want_out, want = ref.evaluate(params, inputs, output_gradients=seed)
    got_out, got = pm.evaluate(params, inputs, output_gradients=seed)
    assert f"ops.{grad_op}(" in pm.gradient_source
    np.testing.assert_allclose(got_out["output"], want_out["output"], rtol=1e-12, atol=1e-12)
    assert set(got) == set(want) == set(shapes)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-12, err_msg=k)


@pytest.mark.parametrize("framework", ["numpy", "jax", "torch"])
def test_sum_to_like_sums_the_broadcast_dimensions(framework):
    x = np.random.default_rng(1).normal(size=(3, 2, 4))
    pm = ml.compile(op_model("sum_to_like", ["x", "like"]), framework_backend(framework),
                    shapes={"x": [3, 2, 4], "like": [2, 1]}, types={"x": "float64", "like": "float64"},
                    data_keys=["x", "like"])
    out = pm.evaluate({}, {"x": x, "like": np.zeros((2, 1))})["output"]
    np.testing.assert_allclose(out, x.sum(axis=(0, 2))[:, None], rtol=1e-12)
