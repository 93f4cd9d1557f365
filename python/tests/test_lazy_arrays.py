"""ml.array: construction and conversion (copies, zero-copy views, DLPack), laziness, weak scalar
literals, every op family against NumPy, indexing, random numbers, and the errors.

Tolerances: float32 results compare with rtol 1e-5 / atol 1e-6 (conftest.tolerance: ingot's
vectorized exp/tanh/erf are within a few ulp of NumPy's), float64 with rtol 1e-9; integer and
bool results exactly. Ops run eagerly here (the reference kernels); test_function_compile.py
compares compiled runs with these."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ingot as ml
from conftest import assert_close, needs_jax, needs_torch


def rand(rng, *shape, dtype=np.float32, low=-2.0, high=2.0):
    return rng.uniform(low, high, shape).astype(dtype)


# ---------------------------------------------------------------- construction and conversion

def test_array_copies_numpy_data_and_asarray_views_it(rng):
    src = rand(rng, 2, 3)
    copied, viewed = ml.array(src), ml.asarray(src)
    assert np.shares_memory(np.asarray(viewed), src)
    assert not np.shares_memory(np.asarray(copied), src)
    src[0, 0] = 100.0
    assert np.asarray(copied)[0, 0] != 100.0
    assert np.asarray(viewed)[0, 0] == 100.0


@pytest.mark.parametrize("value, dtype", [(1.5, "float32"), (3, "int64"), (True, "bool"), ([1.0, 2], "float32"),
                                          ([[1, 2], [3, 4]], "int64"), (np.float64(2.0), "float64"),
                                          (np.arange(3, dtype=np.int16), "int16")])
def test_default_dtypes(value, dtype):
    a = ml.array(value)
    assert a.dtype == dtype
    np.testing.assert_array_equal(np.asarray(a), np.asarray(value).astype(dtype))


def test_dtype_argument_casts():
    a = ml.array([1.7, -2.2], dtype="int32")
    assert a.dtype == "int32" and a.tolist() == [1, -2]
    assert ml.array(a, dtype=np.float64).dtype == "float64"
    assert ml.array(a) is not a and ml.array(a).tolist() == a.tolist()


def test_properties_and_python_conversions():
    a = ml.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert (a.shape, a.dtype, a.ndim, a.size, len(a)) == ((2, 3), "float32", 2, 6, 2)
    assert a.T.shape == (3, 2)
    assert [row.tolist() for row in a] == [[0, 1, 2], [3, 4, 5]]
    s = ml.sum(a)
    assert s.item() == 15.0 and float(s) == 15.0 and int(s) == 15 and bool(s)
    assert repr(a) == "array([[0., 1., 2.],\n       [3., 4., 5.]], dtype=float32)"


def test_numpy_view_is_read_only_and_shared():
    a = ml.array(np.ones((2, 2), np.float32)) * 3.0
    v1, v2 = np.asarray(a), np.asarray(a)
    assert np.shares_memory(v1, v2)
    assert not v1.flags.writeable
    with pytest.raises(ValueError):
        v1[0, 0] = 1.0
    assert np.asarray(a, dtype=np.float64).dtype == np.float64
    assert np.array(a, copy=True).flags.writeable


def test_dlpack_round_trip_shares_memory():
    a = ml.array(np.arange(4, dtype=np.float32)) + 1.0
    back = np.from_dlpack(a)
    assert np.shares_memory(back, np.asarray(a))
    np.testing.assert_array_equal(back, [1, 2, 3, 4])
    assert a.__dlpack_device__() == (1, 0)


@needs_torch
def test_torch_tensors_in_and_out_through_dlpack():
    import torch
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    a = ml.asarray(t)
    assert np.shares_memory(np.asarray(a), t.numpy())
    out = torch.from_dlpack(ml.exp(a))
    torch.testing.assert_close(out, torch.exp(t))


@needs_jax
def test_jax_arrays_in_and_out_through_dlpack():
    import jax.numpy as jnp
    j = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    a = ml.asarray(j)
    assert np.asarray(a).ctypes.data == j.unsafe_buffer_pointer()  # viewed, not copied
    y = ml.exp(a)
    out = jnp.from_dlpack(y)
    assert out.unsafe_buffer_pointer() == np.asarray(y).ctypes.data
    np.testing.assert_allclose(np.asarray(out), np.exp(np.asarray(j)), rtol=1e-6)


def test_evaluation_is_lazy_and_eval_computes_trees():
    a = ml.array(np.ones(3, np.float32))
    b, c = a * 2.0, a + 1.0
    assert b.shape == (3,) and b.dtype == "float32"  # known before anything runs
    stats = ml.auto_compile_stats()["evaluations"]
    ml.eval({"b": b, "pair": [c, (b,)]})
    assert ml.auto_compile_stats()["evaluations"] == stats + 1  # one graph for all of them
    assert b.eval() is b and b.tolist() == [2, 2, 2] and c.tolist() == [2, 2, 2]


# ---------------------------------------------------------------- weak scalar literals

def test_python_numbers_take_the_arrays_dtype():
    x64 = ml.array(np.ones(2))
    assert (x64 * 0.1).dtype == "float64"
    assert np.asarray(x64 * 0.1)[0] == 0.1  # the literal keeps its digits (not 0.1 rounded to float32)
    i = ml.array(np.array([1, 2], np.int32))
    assert (i + 1).dtype == "int32" and (i + 1).tolist() == [2, 3]
    assert (i + 0.5).dtype == "float32"  # a fractional literal does not truncate
    assert (2.0 ** ml.array([1.0, 3.0])).tolist() == [2.0, 8.0]
    assert (ml.array(np.ones(2, np.float16)) * 3).dtype == "float16"


def test_numpy_values_are_strongly_typed_and_numpy_on_the_left_defers():
    x = ml.array([1.0, 2.0])
    assert (x * np.float64(2.0)).dtype == "float64"  # NumPy scalars carry their dtype (NEP 50)
    left = np.ones(2, np.float32) + x
    assert isinstance(left, ml.array) and left.tolist() == [2.0, 3.0]


def test_literal_out_of_int32_range_is_an_error():
    with pytest.raises(ml.IngotError, match="too large for a literal"):
        ml.array([1, 2]) + 2 ** 40


# ---------------------------------------------------------------- op families against NumPy

def _erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos,
    "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "erf": _erf, "abs": np.abs,
    "relu": lambda x: np.maximum(x, 0), "sign": np.sign, "floor": np.floor, "ceil": np.ceil, "square": np.square,
    "negative": np.negative, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
}
POSITIVE_ONLY = {"log", "sqrt", "rsqrt"}
UNIT_ONLY = {"asin", "acos"}  # inside (-1, 1)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary(rng, name, dtype):
    x = rand(rng, 3, 5, dtype=dtype, low=0.1 if name in POSITIVE_ONLY else -0.9 if name in UNIT_ONLY else -2.0,
             high=0.9 if name in UNIT_ONLY else 2.0)
    assert_close(getattr(ml, name)(ml.array(x)), UNARY[name](x).astype(dtype))


def test_gelu_both_forms(rng):
    x = rand(rng, 4, 6)
    exact = x * 0.5 * (1 + _erf(x / np.sqrt(2)))
    approx = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    assert_close(ml.gelu(ml.array(x)), exact.astype(np.float32))
    assert_close(ml.gelu(ml.array(x), tanh_approximation=True), approx)


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
          "power": np.power, "mod": np.mod, "fmod": np.fmod, "maximum": np.maximum, "minimum": np.minimum, "equal": np.equal,
          "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
          "greater_equal": np.greater_equal}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_broadcasting(rng, name):
    a, b = rand(rng, 3, 1, 4, low=0.5), rand(rng, 5, 4, low=0.5)
    b[0, :] = a[0, 0, :]  # some equal elements for the comparisons
    assert_close(getattr(ml, name)(ml.array(a), ml.array(b)), BINARY[name](a, b))


OPERATORS = [("+", np.add), ("-", np.subtract), ("*", np.multiply), ("/", np.divide), ("**", np.power), ("%", np.mod),
             ("<", np.less), ("<=", np.less_equal), (">", np.greater), (">=", np.greater_equal),
             ("==", np.equal), ("!=", np.not_equal)]


@pytest.mark.parametrize("symbol, expected", OPERATORS)
def test_operators_with_arrays_and_numbers(rng, symbol, expected):
    a, b = rand(rng, 2, 3, low=0.5), rand(rng, 3, low=0.5)
    x, y = ml.array(a), ml.array(b)
    assert_close(eval(f"x {symbol} y"), expected(a, b))
    assert_close(eval(f"x {symbol} 1.5"), expected(a, np.float32(1.5)))
    assert_close(eval(f"1.5 {symbol} x"), expected(np.float32(1.5), a))


def test_unary_operators_and_matmul_operator(rng):
    a, b = rand(rng, 2, 3), rand(rng, 3, 4)
    x = ml.array(a)
    assert_close(-x, -a)
    assert_close(abs(x), np.abs(a))
    assert_close(+x, a)
    assert_close(x @ ml.array(b), a @ b)
    assert_close(a @ x.T, a @ a.T)  # NumPy on the left defers to __rmatmul__


def test_where(rng):
    a, b = rand(rng, 2, 3), rand(rng, 3)
    assert_close(ml.where(ml.array(a) > 0, ml.array(a), 0.0), np.where(a > 0, a, np.float32(0)))
    assert_close(ml.where(a > b, a, b), np.where(a > b, a, b))


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(rng, name, axis, keepdims):
    a = rand(rng, 2, 3, 4)
    want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    assert_close(getattr(ml, name)(ml.array(a), axis=axis, keepdims=keepdims), want)
    assert_close(getattr(ml.array(a), name)(axis=axis, keepdims=keepdims), want)


@pytest.mark.parametrize("axis", [None, 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax(rng, axis, keepdims):
    a = rand(rng, 3, 4)
    got = ml.argmax(ml.array(a), axis=axis, keepdims=keepdims)
    assert got.dtype == "int64"
    np.testing.assert_array_equal(np.asarray(got), np.argmax(a, axis=axis, keepdims=keepdims))


def test_moments_softmax_log_softmax_layer_norm(rng):
    a = rand(rng, 3, 5)
    mean, var = ml.moments(ml.array(a), axis=1)
    assert_close(mean, a.mean(axis=1))
    assert_close(var, a.var(axis=1))
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    assert_close(ml.softmax(ml.array(a)), e / e.sum(axis=-1, keepdims=True))
    assert_close(ml.log_softmax(ml.array(a), axis=0), a - np.log(np.exp(a).sum(axis=0, keepdims=True)))
    w, b = rand(rng, 5), rand(rng, 5)
    norm = (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)
    assert_close(ml.layer_norm(ml.array(a), w, b), norm * w + b)
    rms = a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-5)
    assert_close(ml.rms_norm(ml.array(a), w), rms * w)
    # axis=0: over dims 0..end, the whole array
    assert_close(ml.rms_norm(a, axis=0, eps=0.25), a / np.sqrt((a * a).mean() + 0.25))


def test_matmul_batched(rng):
    a, b = rand(rng, 2, 3, 4), rand(rng, 4, 5)
    assert_close(ml.matmul(a, b), a @ b)


def test_conv2d_and_max_pool2d(rng):
    x, w = rand(rng, 1, 2, 5, 5), rand(rng, 3, 2, 3, 3)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 3, 3, 3), np.float32)
    for i in range(3):
        for j in range(3):
            patch = padded[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
            want[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    assert_close(ml.conv2d(x, w, stride=2, padding=1), want)
    y = rand(rng, 1, 2, 4, 6)
    assert_close(ml.max_pool2d(y, (2, 2)), y.reshape(1, 2, 2, 2, 3, 2).max(axis=(3, 5)))
    # stride, padding (-inf) and ceil_mode: 4 x 6, window 3, stride 2, no padding -> 2 x 3 (floor: 1 x 2)
    z = rand(rng, 1, 2, 4, 6)
    zp = np.pad(z, ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=-np.inf)
    want = np.stack([np.stack([zp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max(axis=(2, 3)) for j in range(3)], -1)
                     for i in range(2)], -2)
    assert_close(ml.max_pool2d(z, 3, stride=2, ceil_mode=True), want)
    assert ml.max_pool2d(z, 3, stride=2).shape == (1, 2, 1, 2)
    zq = np.pad(z, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want = np.stack([np.stack([zq[:, :, i:i + 3, j:j + 3].max(axis=(2, 3)) for j in range(6)], -1) for i in range(4)], -2)
    assert_close(ml.max_pool2d(z, (3, 3), stride=1, padding=1), want)


def test_movement(rng):
    a = rand(rng, 2, 3, 4)
    assert_close(ml.reshape(a, (4, -1)), a.reshape(4, -1))
    assert_close(ml.array(a).reshape(6, 4), a.reshape(6, 4))
    assert_close(ml.transpose(a), a.transpose())
    assert_close(ml.transpose(a, (1, 0, 2)), a.transpose(1, 0, 2))
    assert_close(ml.array(a).transpose(2, 0, 1), a.transpose(2, 0, 1))
    assert_close(ml.broadcast_to(a[:, :1, :], (2, 3, 4)), np.broadcast_to(a[:, :1, :], (2, 3, 4)))
    assert_close(ml.concatenate([a, a[:, :1]], axis=1), np.concatenate([a, a[:, :1]], axis=1))
    idx = np.array([2, 0, 2])
    assert_close(ml.take(a, idx, axis=1), np.take(a, idx, axis=1))
    order = np.argsort(a, axis=2)
    assert_close(ml.take_along_axis(a, order, axis=2), np.take_along_axis(a, order, axis=2))
    assert_close(ml.one_hot(np.array([2, 0]), 3), np.eye(3, dtype=np.float32)[[2, 0]])
    # a label outside [0, classes) is a row of zeros (jax.nn.one_hot's rule); classes must be positive
    assert_close(ml.one_hot(np.array([1, 3, -1]), 3), np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0]], np.float32))
    with pytest.raises(ml.IngotError, match="classes must be positive, got 0"):
        ml.one_hot(np.array([1]), 0)
    assert_close(ml.astype(a, "float16"), a.astype(np.float16))


INDICES = [0, -1, slice(None), slice(1, None), slice(None, None, -1), slice(-1, 0, -2), (1, slice(0, 2)),
           (slice(None), 0, slice(None, None, 2)), (Ellipsis, 1), (None, 1), (0, None, Ellipsis, None),
           (slice(5, 9),), (-2, -3, -4)]


@pytest.mark.parametrize("index", INDICES, ids=repr)
def test_indexing_matches_numpy(rng, index):
    a = rand(rng, 2, 3, 4)
    assert_close(ml.array(a)[index], a[index])


def test_integer_array_index_takes_along_axis_0(rng):
    a = rand(rng, 4, 2)
    assert_close(ml.array(a)[[3, 0, 3]], a[[3, 0, 3]])
    assert_close(ml.array(a)[ml.array([1, 2])], a[[1, 2]])


def test_creation():
    assert_close(ml.zeros((2, 3)), np.zeros((2, 3), np.float32))
    assert_close(ml.ones(4, dtype="int32"), np.ones(4, np.int32))
    assert_close(ml.full((2,), 7.5, dtype="float64"), np.full(2, 7.5))
    assert_close(ml.arange(5), np.arange(5, dtype=np.float32))
    assert ml.zeros(()).shape == ()


def test_op_by_name(rng):
    a = rand(rng, 2, 3)
    approx = 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))
    assert_close(ml.op("gelu", a, approximate="tanh"), approx)
    mean, var = ml.op("moments", a, axes=[1], keepdims=1)  # several outputs: a tuple
    assert_close(mean, a.mean(axis=1, keepdims=True))
    assert_close(var, a.var(axis=1, keepdims=True))
    assert "gelu" in ml.op_names()


# ---------------------------------------------------------------- random numbers

def test_random_keys_are_reproducible_and_the_global_state_advances():
    a, b = ml.random.normal((1000,), key=3), ml.random.normal((1000,), key=ml.random.key(3))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert abs(np.asarray(a).mean()) < 0.15 and abs(np.asarray(a).std() - 1) < 0.1
    ml.random.seed(5)
    first = np.asarray(ml.random.uniform((4,), 2.0, 3.0))
    second = np.asarray(ml.random.uniform((4,), 2.0, 3.0))
    assert not np.array_equal(first, second)
    assert ((first >= 2) & (first < 3)).all()
    ml.random.seed(5)
    np.testing.assert_array_equal(np.asarray(ml.random.uniform((4,), 2.0, 3.0)), first)
    assert ml.random.normal((2, 2), dtype="float64").dtype == "float64"


def test_dropout_keeps_the_expected_share_and_scales(rng):
    x = ml.ones((10000,))
    y = np.asarray(ml.dropout(x, 0.25, key=1))
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.03


# ---------------------------------------------------------------- errors

def test_record_time_errors_carry_the_cpp_message():
    with pytest.raises(ml.IngotError, match="ingot::matmul: .*contracted dimensions differ"):
        ml.matmul(ml.zeros((2, 3)), ml.zeros((4, 5)))
    with pytest.raises(ml.IngotError, match="ingot::add"):
        ml.zeros((2, 3)) + ml.zeros((4,))
    with pytest.raises(ml.IngotError, match="Unknown op 'no_such_op'|no_such_op"):
        ml.op("no_such_op", ml.zeros(2))


def test_conversion_errors():
    with pytest.raises(ml.IngotError, match="Unsupported dtype complex64"):
        ml.array(np.ones(2, np.complex64))
    with pytest.raises(TypeError, match="unsupported operand"):
        ml.zeros(2) + "a"
    with pytest.raises(TypeError, match="x must be an ml.array, a number or array data"):
        ml.exp("a")
    with pytest.raises(ml.IngotError, match="item\\(\\) needs an array of one element, got float32\\[2, 3\\]"):
        ml.zeros((2, 3)).item()
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d array"):
        len(ml.array(1.0))
    with pytest.raises(TypeError, match="axis must be an int or a list/tuple of ints"):
        ml.sum(ml.zeros(2), axis="0")
    with pytest.raises(ml.IngotError, match="names no axis"):
        ml.sum(ml.zeros(2), axis=())
    with pytest.raises(TypeError):
        hash(ml.zeros(2))


@pytest.mark.parametrize("index, error, message", [
    (5, IndexError, "index 5 is out of bounds for axis 0 with size 2"),
    ((0, 0, 0, 0), IndexError, "too many indices for an array of rank 3: 4"),
    ((Ellipsis, Ellipsis), IndexError, "only one ellipsis"),
    ("a", TypeError, "An index must be an ml.array"),
    (1.5, ml.IngotError, "An array index must hold integers"),
    (slice(0, 2, 0), ValueError, "slice step cannot be zero"),
])
def test_index_errors(index, error, message):
    with pytest.raises(error, match=message):
        ml.zeros((2, 3, 4))[index]

