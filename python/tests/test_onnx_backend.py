"""ingot.onnx_backend: ingot as an onnx.backend.base.Backend, run by ONNX's own test runner
(onnx.backend.test.BackendTest) over a representative set of node tests and the real models
(the whole suite runs in scripts/onnx_conformance.sh), on the reference interpreter and the CPU
backend. Skipped without `onnx`."""
from __future__ import annotations

import importlib.util
import unittest

import numpy as np
import pytest

HAVE_ONNX = importlib.util.find_spec("onnx") is not None
pytestmark = pytest.mark.skipif(not HAVE_ONNX, reason="onnx is not installed (pip install onnx==1.22.0)")

# One or two tests of each kind of conversion: elementwise, shapes fed as inputs (deferred
# import), windows, losses, Resize's float scales (fixed at the first run), ConvTranspose.
INCLUDE = [r"test_relu_cpu$", r"test_add_bcast_cpu$", r"test_reshape_negative_dim_cpu$", r"test_slice_cpu$",
           r"test_conv_with_strides_padding_cpu$", r"test_maxpool_2d_ceil_cpu$", r"test_layer_normalization_2d_axis0_cpu$",
           r"test_rms_normalization_3d_axis_negative_2_epsilon_cpu$",
           r"test_sce_mean_weight_cpu$", r"test_resize_upsample_scales_linear_cpu$", r"test_convtranspose_pads_cpu$",
           r"test_softmax_axis_1_cpu$", r"test_gather_0_cpu$"]


def _suite(backend):
    import onnx.backend.test

    bt = onnx.backend.test.BackendTest(backend, __name__)
    for pattern in INCLUDE:
        bt.include(pattern)
    return bt.test_cases


def _run(backend):
    suite = unittest.TestSuite()
    for case in _suite(backend).values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TestResult()
    suite.run(result)
    return suite.countTestCases(), result


@pytest.mark.parametrize("kind", ["reference", "cpu"])
def test_onnx_backend_test_runner(kind):
    from ingot.onnx_backend import IngotBackend, IngotCpuBackend

    n, result = _run(IngotBackend if kind == "reference" else IngotCpuBackend)
    problems = [f"{t}: {e.splitlines()[-1]}" for t, e in result.failures + result.errors]
    assert not problems, "\n".join(problems)
    assert n - len(result.skipped) >= len(INCLUDE), (n, result.skipped)


def test_rep_runs_and_recompiles_for_new_shape_inputs():
    from onnx import TensorProto, helper

    from ingot.onnx_backend import IngotBackend

    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    rep = IngotBackend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(rep.run([x, np.array([3, 4])])[0], x.reshape(3, 4))
    np.testing.assert_array_equal(rep.run({"x": x, "shape": np.array([4, 3])}).y, x.reshape(4, 3))
    assert IngotBackend.supports_device("CPU") and not IngotBackend.supports_device("CUDA")
