"""Every op family of src/ops/families.h against NumPy on random inputs, on every backend
(reference, cpu, the NumPy emitter, and the JAX / PyTorch emitters where installed). Each family
is one model with an output per op, so the CPU backend compiles once per family. Tolerances:
conftest.tolerance."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ingot as ml
from conftest import BACKEND_NAMES, assert_close, available_backend_names, backend, run

_erf = np.vectorize(math.erf, otypes=[np.float64])


def family_model(specs):
    """specs: (op, [input wires], output name, attrs). One primitive per spec, outputs exposed."""
    m = ml.Model()
    for op, ins, out, attrs in specs:
        terminals = [f"in{i}" for i in range(len(ins))]
        links = {t: w for t, w in zip(terminals, ins)}
        links["output"] = ml.IOKey(out, expose=True)
        m |= ml.Model.primitive(op, terminals, ["output"], **attrs)(**links)
    return m


def check_family(name, specs, inputs, expected, dtype=np.float32):
    out = run(family_model(specs), backend(name), inputs)
    # MLX (0.32, CPU) holds float64 arrays at float32 precision: compared at float32's tolerance.
    tolerance = np.float32 if name == "mlx" else dtype
    for key, want in expected.items():
        got = out[key]
        assert str(got.dtype) == str(np.asarray(want).dtype) or np.asarray(want).dtype.kind == got.dtype.kind, key
        assert_close(got, want, tolerance)


@pytest.mark.parametrize("name", BACKEND_NAMES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary(name, dtype, rng):
    x = rng.uniform(-3, 3, size=(3, 17)).astype(dtype)
    pos = rng.uniform(0.1, 4, size=(3, 17)).astype(dtype)
    unit = rng.uniform(-0.95, 0.95, size=(3, 17)).astype(dtype)
    x64, u64 = x.astype(np.float64), unit.astype(np.float64)
    table = {
        "neg": -x64, "abs": np.abs(x64), "exp": np.exp(x64), "sin": np.sin(x64), "cos": np.cos(x64),
        "tanh": np.tanh(x64), "sigmoid": 1 / (1 + np.exp(-x64)), "relu": np.maximum(x64, 0), "erf": _erf(x64),
        "sign": np.sign(x64), "floor": np.floor(x64), "ceil": np.ceil(x64),
    }
    specs = [(op, ["x"], op, {}) for op in table]
    specs += [("log", ["p"], "log", {}), ("sqrt", ["p"], "sqrt", {}), ("rsqrt", ["p"], "rsqrt", {}),
              ("gelu", ["x"], "gelu", {}), ("gelu", ["x"], "gelu_tanh", {"approximate": "tanh"}),
              ("cast", ["x"], "cast", {"dtype": "int32"}), ("asin", ["u"], "asin", {}), ("acos", ["u"], "acos", {}),
              ("atan", ["x"], "atan", {})]
    p64 = pos.astype(np.float64)
    expected = {k: v.astype(dtype) for k, v in table.items()}
    expected.update(log=np.log(p64).astype(dtype), sqrt=np.sqrt(p64).astype(dtype), rsqrt=(1 / np.sqrt(p64)).astype(dtype),
                    gelu=(0.5 * x64 * (1 + _erf(x64 / np.sqrt(2)))).astype(dtype),
                    gelu_tanh=(0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3)))).astype(dtype),
                    cast=x.astype(np.int32), asin=np.arcsin(u64).astype(dtype), acos=np.arccos(u64).astype(dtype),
                    atan=np.arctan(x64).astype(dtype))
    check_family(name, specs, {"x": x, "p": pos, "u": unit}, expected, dtype)


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_binary_broadcast_and_where(name, rng):
    a = rng.normal(size=(4, 1, 5)).astype(np.float32)
    b = rng.uniform(0.5, 2, size=(3, 1)).astype(np.float32)
    c = rng.integers(0, 2, size=(3, 5)).astype(np.bool_)
    ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
           "minimum": np.minimum, "mod": np.mod, "fmod": np.fmod, "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
           "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal}
    specs = [(op, ["a", "b"], op, {}) for op in ops] + [("pow", ["b", "b"], "pow", {}), ("where", ["c", "a", "b"], "where", {})]
    expected = {op: f(a, b) for op, f in ops.items()}
    expected["pow"] = np.power(b, b)
    expected["where"] = np.where(c, a, b)
    check_family(name, specs, {"a": a, "b": b, "c": c}, expected)


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_integer_arithmetic_promotes_like_numpy(name, rng):
    i = rng.integers(-50, 50, size=(2, 6)).astype(np.int32)
    j = rng.integers(1, 9, size=(6,)).astype(np.int64)
    specs = [("add", ["i", "j"], "add", {}), ("mul", ["i", "j"], "mul", {}), ("div", ["i", "j"], "div", {})]
    out = run(family_model(specs), backend(name), {"i": i, "j": j})
    np.testing.assert_array_equal(out["add"], i + j)
    assert out["add"].dtype == np.int64
    np.testing.assert_array_equal(out["mul"], i * j)
    assert out["div"].dtype == np.float32
    assert_close(out["div"], (i / j).astype(np.float32))


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_reductions(name, rng):
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    specs = [("sum", ["x"], "sum_all", {}), ("sum", ["x"], "sum_1", {"axes": [1]}),
             ("mean", ["x"], "mean_12k", {"axes": [1, 2], "keepdims": 1}), ("max", ["x"], "max_0", {"axes": [0]}),
             ("min", ["x"], "min_m1", {"axes": [-1]}), ("argmax", ["x"], "argmax", {"axis": 1})]
    expected = {"sum_all": x.sum(dtype=np.float64).astype(np.float32), "sum_1": x.sum(1), "mean_12k": x.mean((1, 2), keepdims=True),
                "max_0": x.max(0), "min_m1": x.min(-1), "argmax": x.argmax(1)}
    check_family(name, specs, {"x": x}, expected)


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_top_k_two_outputs(name, rng):
    """The k largest (smallest) along an axis: NaN counts as the largest, ties in index order,
    on every backend (the NumPy/JAX emitters through a lexsort, PyTorch through stable sorts)."""
    x = np.round(rng.normal(size=(3, 7)) * 2).astype(np.float32)  # rounded: ties
    x[1, 4] = np.nan
    for largest in (1, 0):
        m = ml.Model()
        m |= ml.Model.primitive("top_k", ["input"], ["values", "indices"], k=4, axis=1, largest=largest)(
            input="x", values=ml.IOKey("values", expose=True), indices=ml.IOKey("indices", expose=True))
        out = run(m, backend(name), {"x": x})
        key = np.where(np.isnan(x), -np.inf if largest else np.inf, -x if largest else x)
        order = np.argsort(key, axis=1, kind="stable")[:, :4]
        np.testing.assert_array_equal(out["indices"], order)
        np.testing.assert_array_equal(out["values"], np.take_along_axis(x, order, axis=1))


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_moments_two_outputs(name, rng):
    x = rng.normal(size=(3, 8)).astype(np.float32)
    m = ml.Model()
    m |= ml.Model.primitive("moments", ["input"], ["mean", "var"], axes=[1])(
        input="x", mean=ml.IOKey("mean", expose=True), var=ml.IOKey("var", expose=True))
    out = run(m, backend(name), {"x": x})
    assert_close(out["mean"], x.mean(1))
    assert_close(out["var"], x.var(1))


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_row_kernels(name, rng):
    x = rng.normal(size=(2, 3, 5)).astype(np.float32)
    w = rng.normal(size=(5,)).astype(np.float32)
    b = rng.normal(size=(5,)).astype(np.float32)
    img = rng.normal(size=(2, 3, 4, 4)).astype(np.float32)
    cw, cb, cm = (rng.normal(size=3).astype(np.float32) for _ in range(3))
    cv = rng.uniform(0.5, 2, size=3).astype(np.float32)
    specs = [("softmax", ["x"], "softmax", {"axis": 1}), ("log_softmax", ["x"], "log_softmax", {}),
             ("layer_norm", ["x", "w", "b"], "layer_norm", {"eps": 1e-5}),
             ("rms_norm", ["x", "w"], "rms_norm", {"eps": 1e-5}),
             ("rms_norm", ["x"], "rms_norm_2d", {"axis": -2, "eps": 0.5}),
             ("batch_norm", ["img", "cw", "cb", "cm", "cv"], "batch_norm", {"eps": 1e-3})]
    e = np.exp(x - x.max(1, keepdims=True))
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    r = lambda v: v.reshape(1, 3, 1, 1)  # noqa: E731
    expected = {"softmax": e / e.sum(1, keepdims=True),
                "log_softmax": x - x.max(-1, keepdims=True) - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
                "layer_norm": (x - mu) / np.sqrt(var + 1e-5) * w + b,
                "rms_norm": x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w,
                "rms_norm_2d": x / np.sqrt((x * x).mean((1, 2), keepdims=True) + 0.5),
                "batch_norm": (img - r(cm)) / np.sqrt(r(cv) + 1e-3) * r(cw) + r(cb)}
    check_family(name, specs, {"x": x, "w": w, "b": b, "img": img, "cw": cw, "cb": cb, "cm": cm, "cv": cv}, expected)


def conv2d_ref(x, w, b, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + dil * (kh - 1) + 1:dil,
                           j * stride:j * stride + dil * (kw - 1) + 1:dil]
                out[:, oc, i, j] = (patch * w[oc]).sum((1, 2, 3)) + b[oc]
    return out


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_linalg_conv_and_pooling(name, rng):
    a = rng.normal(size=(2, 1, 3, 4)).astype(np.float32)
    bm = rng.normal(size=(5, 4, 6)).astype(np.float32)
    x = rng.normal(size=(2, 4, 7, 6)).astype(np.float32)
    w = rng.normal(size=(6, 2, 3, 3)).astype(np.float32)
    bias = rng.normal(size=6).astype(np.float32)
    specs = [("matmul", ["a", "bm"], "matmul", {}),
             ("conv2d", ["x", "w", "bias"], "conv", {"stride": [2, 2], "padding": [1, 1], "dilation": [1, 1], "groups": 2}),
             ("conv2d", ["x", "w2"], "conv_dil", {"dilation": [2, 2]}),
             ("max_pool2d", ["x"], "max_pool", {"kernel": [2, 2]}),
             ("avg_pool2d", ["x"], "avg_pool", {"kernel": [3, 3], "stride": [2, 2], "padding": [1, 1], "count_include_pad": 0}),
             ("global_avg_pool2d", ["x"], "gap", {})]
    w2 = rng.normal(size=(3, 4, 2, 2)).astype(np.float32)
    mp = np.max(np.stack([x[:, :, i:6:2, j:6:2] for i in range(2) for j in range(2)]), axis=0)
    xpad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
    sums = sum(xpad[:, :, i:i + 7:2, j:j + 6:2] for i in range(3) for j in range(3))
    counts = sum(ones[:, :, i:i + 7:2, j:j + 6:2] for i in range(3) for j in range(3))
    expected = {"matmul": np.matmul(a, bm), "conv": conv2d_ref(x, w, bias, 2, 1, 1, 2).astype(np.float32),
                "conv_dil": conv2d_ref(x, w2, np.zeros(3), 1, 0, 2, 1).astype(np.float32), "max_pool": mp,
                "avg_pool": (sums / counts).astype(np.float32), "gap": x.mean((2, 3))}
    check_family(name, specs, {"a": a, "bm": bm, "x": x, "w": w, "bias": bias, "w2": w2}, expected)


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_movement(name, rng):
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    y = rng.normal(size=(2, 1, 4)).astype(np.float32)
    idx = np.array([[2, 0], [1, 1]], dtype=np.int64)
    along = rng.integers(0, 4, size=(2, 3, 2)).astype(np.int64)
    specs = [("identity", ["x"], "identity", {}), ("reshape", ["x"], "reshape", {"shape": [0, -1]}),
             ("transpose", ["x"], "transpose", {"perm": [2, 0, 1]}), ("transpose", ["x"], "reverse", {}),
             ("broadcast_to", ["y"], "broadcast", {"shape": [3, 2, 5, 4]}),
             ("slice", ["x"], "slice", {"starts": [1, -1], "ends": [100, -5], "axes": [2, 1], "steps": [2, -1]}),
             ("concat", ["x", "y"], "concat", {"axis": 1}), ("gather", ["x", "idx"], "gather", {"axis": 2}),
             ("take_along_axis", ["x", "ids"], "along", {"axis": 2})]
    expected = {"identity": x, "reshape": x.reshape(2, 12), "transpose": x.transpose(2, 0, 1), "reverse": x.T,
                "broadcast": np.broadcast_to(y, (3, 2, 5, 4)), "slice": x[:, ::-1, 1::2],
                "concat": np.concatenate([x, y], 1), "gather": np.take(x, idx, axis=2),
                "along": np.take_along_axis(x, along, axis=2)}
    check_family(name, specs, {"x": x, "y": y, "idx": idx, "ids": along}, expected)


def test_random_ops_agree_across_backends():
    """Seeded counter-based streams: the same numbers on every backend, with the right moments."""
    specs = [("random_uniform", [], "u", {"shape": [4000], "seed": 3, "low": -1.0, "high": 3.0}),
             ("random_normal", [], "n", {"shape": [4000], "seed": 4}),
             ("dropout", ["x"], "d", {"p": 0.25, "seed": 5, "training": 1})]
    x = np.ones((40, 100), np.float32)
    results = {name: run(family_model(specs), backend(name), {"x": x}) for name in available_backend_names()}
    ref = results["reference"]
    assert -1 <= ref["u"].min() and ref["u"].max() < 3 and abs(ref["u"].mean() - 1) < 0.1
    assert abs(ref["n"].mean()) < 0.1 and abs(ref["n"].std() - 1) < 0.1
    assert set(np.unique(ref["d"])) <= {0.0, np.float32(1 / 0.75)} and abs((ref["d"] == 0).mean() - 0.25) < 0.03
    for name, out in results.items():
        for key in ("u", "n", "d"):
            assert_close(out[key], ref[key])
