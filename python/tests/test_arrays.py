"""Arrays in and out without copies where the layout allows (same data pointer, writes visible),
DLPack both ways, every dtype including float16 and bfloat16 (ml_dtypes)."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import ingot as ml
from ingot import _ingot
from conftest import cpu, needs_jax, needs_ml_dtypes, needs_torch


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"])
def test_c_contiguous_input_is_not_copied(dtype):
    a = np.ones((3, 4), dtype=dtype)
    name, ptr = _ingot._tensor_info(a)
    assert name == dtype and ptr == address(a)


def test_roundtrip_shares_memory_and_writes_are_visible():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = _ingot._roundtrip(a)
    assert address(b) == address(a) and np.shares_memory(a, b) and not b.flags.owndata
    a[1, 2] = 100.0
    assert b[1, 2] == 100.0
    b[0, 0] = -5.0
    assert a[0, 0] == -5.0


def test_non_contiguous_input_is_made_contiguous():
    a = np.arange(12, dtype=np.float32).reshape(3, 4).T
    name, ptr = _ingot._tensor_info(a)
    assert ptr != address(a)
    np.testing.assert_array_equal(_ingot._roundtrip(a), a)


def test_python_lists_and_scalars_are_converted():
    np.testing.assert_array_equal(_ingot._roundtrip([[1.5, 2.5]]), np.array([[1.5, 2.5]]))
    assert _ingot._roundtrip(3).shape == ()


def test_evaluate_passes_inputs_through_without_copies():
    """The reference backend returns an input exposed as an output as the same buffer: no copy on
    the way in or out."""
    m = ml.Model()
    m |= ml.Identity()(input=ml.IOKey("x", shape=[2, 3]), output=ml.IOKey("y", expose=True))
    pm = ml.compile(m, ml.ReferenceBackend())  # simplify removes the identity: y is x
    a = np.zeros((2, 3), np.float32)
    y = pm.evaluate({}, {"x": a})["y"]
    assert address(y) == address(a)
    a[0, 0] = 7
    assert y[0, 0] == 7


def test_outputs_view_ingot_memory_and_keep_it_alive(rng):
    m = ml.Model()
    m += ml.Relu()
    pm = ml.compile(m, cpu(), shapes={"input": [1000]})
    out = pm.evaluate({}, {"input": rng.normal(size=1000).astype(np.float32)})["output"]
    assert not out.flags.owndata and out.base is not None and out.flags.writeable
    del pm, m
    gc.collect()
    assert (out >= 0).all() and out.sum() > 0  # memory still valid after the model is gone


def test_outputs_export_dlpack():
    a = np.arange(6, dtype=np.float32)
    out = _ingot._roundtrip(a)
    back = np.from_dlpack(out)
    assert address(back) == address(a)


@needs_ml_dtypes
def test_bfloat16_in_and_out():
    import ml_dtypes

    a = np.array([1.0, -2.5, 3.0], dtype=ml_dtypes.bfloat16)
    name, ptr = _ingot._tensor_info(a)
    assert name == "bfloat16" and ptr == address(a)
    b = _ingot._roundtrip(a)
    assert b.dtype == ml_dtypes.bfloat16 and address(b) == address(a)
    m = ml.Model()
    x = m.input("x", shape=[3], dtype="bfloat16")
    m.expose(x * 2.0, "y")
    for backend in (ml.ReferenceBackend(), cpu()):
        y = ml.compile(m, backend).evaluate({}, {"x": a})["y"]
        assert y.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(y.astype(np.float32), [2.0, -5.0, 6.0])


def test_float16_model(rng):
    m = ml.Model()
    m += ml.Linear(dimension=4)
    pm = ml.compile(m, cpu(), shapes={"input": [2, 8]},
                    types={"input": "float16", "linear_0.weight": "float16", "linear_0.bias": "float16"})
    p = pm.randomize_params()
    assert p["linear_0.weight"].dtype == np.float16
    x = rng.normal(size=(2, 8)).astype(np.float16)
    out = pm.evaluate(p, {"input": x})["output"]
    assert out.dtype == np.float16
    want = x.astype(np.float32) @ p["linear_0.weight"].astype(np.float32) + p["linear_0.bias"].astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=2e-2, atol=2e-2)


@needs_jax
def test_jax_arrays_pass_through_dlpack():
    import jax.numpy as jnp

    a = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    name, ptr = _ingot._tensor_info(a)
    assert name == "float32" and ptr == a.unsafe_buffer_pointer()
    m = ml.Model()
    m += ml.Relu()
    pm = ml.compile(m, ml.ReferenceBackend(), shapes={"input": [2, 3]})
    np.testing.assert_array_equal(pm.evaluate({}, {"input": a - 2})["output"], np.maximum(np.asarray(a) - 2, 0))


@needs_torch
def test_torch_tensors_pass_through_dlpack():
    import torch

    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    name, ptr = _ingot._tensor_info(t)
    assert name == "float32" and ptr == t.data_ptr()
    out = _ingot._roundtrip(t)
    back = torch.from_dlpack(out)
    assert back.data_ptr() == t.data_ptr()
    b = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    assert _ingot._tensor_info(b)[0] == "bfloat16"
