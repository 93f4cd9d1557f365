"""Every zoo block (include/ingot/models.h) against a NumPy implementation on random inputs, on
every backend; PyTorch's modules too where installed. Tolerances: conftest.tolerance."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ingot as ml
from conftest import BACKEND_NAMES, assert_close, available_backend_names, backend, needs_torch, run
from test_ops import conv2d_ref

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _pool(x, k, s, fn):
    n, c, h, w = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    return fn(np.stack([x[:, :, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s] for i in range(k) for j in range(k)]), axis=0)


def _linear(x, p, name):
    return x @ p[name + ".weight"] + p[name + ".bias"]


def _rms_norm(x, w, eps=1e-5):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _attention(x, p, heads, kv_heads, causal, prefix=""):
    """Self-attention of x [B, S, E] in NumPy: projections, grouped-query heads, causal mask."""
    b, s, e = x.shape
    d = e // heads
    q = _linear(x, p, prefix + "q_proj").reshape(b, s, heads, d).transpose(0, 2, 1, 3)
    k = _linear(x, p, prefix + "k_proj").reshape(b, s, kv_heads, d).transpose(0, 2, 1, 3)
    v = _linear(x, p, prefix + "v_proj").reshape(b, s, kv_heads, d).transpose(0, 2, 1, 3)
    k, v = np.repeat(k, heads // kv_heads, axis=1), np.repeat(v, heads // kv_heads, axis=1)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    if causal:
        scores = np.where(np.tril(np.ones((s, s), dtype=bool)), scores, -np.inf)
    o = _softmax(scores) @ v
    return _linear(o.transpose(0, 2, 1, 3).reshape(b, s, e), p, prefix + "out_proj")


def _llama_layer(x, p):
    """TransformerEncoderLayer(8, 2, 16, num_kv_heads=1, causal, norm_first, rms_norm, relu)."""
    h = x + _attention(_rms_norm(x, p["norm1.weight"]), p, 2, 1, True, "self_attn.")
    f = np.maximum(_linear(_rms_norm(h, p["norm2.weight"]), p, "linear1"), 0)
    return h + _linear(f, p, "linear2")


# name -> (block factory, input shapes {terminal: shape} (integers: int64 indices), NumPy of (inputs, params))
CASES = {
    "Linear": (lambda: ml.Linear(dimension=5), {"input": (3, 4)},
               lambda i, p: i["input"] @ p["weight"] + p["bias"]),
    "Linear_no_bias": (lambda: ml.Linear(dimension=5, use_bias=False), {"input": (2, 3, 4)},
                       lambda i, p: i["input"] @ p["weight"]),
    "Conv2d": (lambda: ml.Conv2d(3, 4, kernel_size=3, stride=2, padding=1), {"input": (2, 3, 7, 7)},
               lambda i, p: conv2d_ref(i["input"], p["weight"], p["bias"], 2, 1, 1, 1)),
    "Conv2d_rect_groups": (lambda: ml.Conv2d(out_channels=4, kernel_size=(1, 3), groups=2, use_bias=False),
                           {"input": (1, 2, 5, 5)},
                           lambda i, p: conv2d_ref(i["input"], p["weight"], np.zeros(4), 1, 0, 1, 2)),
    "BatchNorm2d": (lambda: ml.BatchNorm2d(eps=1e-3), {"input": (4, 3, 2, 2)},
                    lambda i, p: (i["input"] - i["input"].mean((0, 2, 3), keepdims=True))
                    / np.sqrt(i["input"].var((0, 2, 3), keepdims=True) + 1e-3) * p["weight"].reshape(1, 3, 1, 1)
                    + p["bias"].reshape(1, 3, 1, 1)),
    "LayerNorm": (lambda: ml.LayerNorm(normalized_dims=2), {"input": (2, 3, 4)},
                  lambda i, p: (i["input"] - i["input"].mean((1, 2), keepdims=True))
                  / np.sqrt(i["input"].var((1, 2), keepdims=True) + 1e-5) * p["weight"] + p["bias"]),
    "RMSNorm": (lambda: ml.RMSNorm(normalized_dims=2), {"input": (2, 3, 4)},
                lambda i, p: i["input"] / np.sqrt((i["input"] ** 2).mean((1, 2), keepdims=True) + 1e-5) * p["weight"]),
    "MultiHeadAttention": (lambda: ml.MultiHeadAttention(8, 4, num_kv_heads=2, causal=True), {"input": (2, 5, 8)},
                           lambda i, p: _attention(i["input"], p, 4, 2, True)),
    "TransformerEncoderLayer": (lambda: ml.TransformerEncoderLayer(8, 2, 16, num_kv_heads=1, causal=True, norm_first=True,
                                                                   rms_norm=True, activation="relu"),
                                {"input": (2, 5, 8)}, lambda i, p: _llama_layer(i["input"], p)),
    "Relu": (ml.Relu, {"input": (3, 5)}, lambda i, p: np.maximum(i["input"], 0)),
    "Gelu": (ml.Gelu, {"input": (3, 5)}, lambda i, p: 0.5 * i["input"] * (1 + _erf(i["input"] / math.sqrt(2)))),
    "Gelu_tanh": (lambda: ml.Gelu(tanh_approximation=True), {"input": (3, 5)},
                  lambda i, p: 0.5 * i["input"] * (1 + np.tanh(math.sqrt(2 / math.pi) * (i["input"] + 0.044715 * i["input"] ** 3)))),
    "Sigmoid": (ml.Sigmoid, {"input": (3, 5)}, lambda i, p: 1 / (1 + np.exp(-i["input"]))),
    "Tanh": (ml.Tanh, {"input": (3, 5)}, lambda i, p: np.tanh(i["input"])),
    "Softmax": (lambda: ml.Softmax(axis=0), {"input": (3, 5)}, lambda i, p: _softmax(i["input"], 0)),
    "LogSoftmax": (ml.LogSoftmax, {"input": (3, 5)}, lambda i, p: np.log(_softmax(i["input"]))),
    "MaxPool2d": (lambda: ml.MaxPool2d(kernel_size=2), {"input": (2, 3, 6, 6)},
                  lambda i, p: _pool(i["input"], 2, 2, np.max)),
    # ceil_mode: 7 x 7 -> 4 x 4 (floor: 3 x 3), the last windows over one row or column
    "MaxPool2d_ceil": (lambda: ml.MaxPool2d(kernel_size=2, ceil_mode=True), {"input": (2, 3, 7, 7)},
                       lambda i, p: _pool(np.pad(i["input"], ((0, 0), (0, 0), (0, 1), (0, 1)), constant_values=-np.inf),
                                          2, 2, np.max)),
    "AvgPool2d": (lambda: ml.AvgPool2d(kernel_size=3, stride=1), {"input": (2, 3, 5, 5)},
                  lambda i, p: _pool(i["input"], 3, 1, np.mean)),
    "GlobalAvgPool2d": (ml.GlobalAvgPool2d, {"input": (2, 3, 4, 5)}, lambda i, p: i["input"].mean((2, 3))),
    "Flatten": (ml.Flatten, {"input": (2, 3, 4)}, lambda i, p: i["input"].reshape(2, 12)),
    "Embedding": (lambda: ml.Embedding(num_embeddings=7, dim=3), {"input": (2, 4)},
                  lambda i, p: p["weight"][i["input"]]),
    "Identity": (ml.Identity, {"input": (2, 3)}, lambda i, p: i["input"]),
    "Dropout_training": (lambda: ml.Dropout(p=0.0, seed=1), {"input": (2, 3)}, lambda i, p: i["input"]),
    "MLP": (lambda: ml.MLP([6, 4], activation="tanh"), {"input": (3, 5)},
            lambda i, p: np.tanh(i["input"] @ p["linear_0.weight"] + p["linear_0.bias"]) @ p["linear_1.weight"] + p["linear_1.bias"]),
    "MSELoss": (ml.MSELoss, {"input": (3, 4), "target": (3, 4)}, lambda i, p: ((i["input"] - i["target"]) ** 2).mean()),
    "MSELoss_sum": (lambda: ml.MSELoss(reduction="sum"), {"input": (3, 4), "target": (3, 4)},
                    lambda i, p: ((i["input"] - i["target"]) ** 2).sum()),
    "CrossEntropyLoss": (ml.CrossEntropyLoss, {"input": (4, 5), "target": (4,)},
                         lambda i, p: -np.log(_softmax(i["input"]))[np.arange(4), i["target"]].mean()),
    "CrossEntropyLoss_one_hot": (lambda: ml.CrossEntropyLoss(reduction="none", one_hot_target=True),
                                 {"input": (4, 5), "target": (4, 5)},
                                 lambda i, p: -(np.log(_softmax(i["input"])) * i["target"]).sum(-1)),
}
TWO_INPUT = {"Add": (ml.Add, np.add), "Multiply": (ml.Multiply, np.multiply)}
INTEGER_INPUTS = {("Embedding", "input"): 7, ("CrossEntropyLoss", "target"): 5}


def make_inputs(case, shapes, rng):
    out = {}
    for name, shape in shapes.items():
        high = INTEGER_INPUTS.get((case, name))
        out[name] = rng.integers(0, high, size=shape).astype(np.int64) if high else rng.normal(size=shape).astype(np.float32)
    return out


def block_params(pm, params):
    """Parameters keyed without the block prefix ('linear_0.weight' -> 'weight') for one-block models."""
    short = {}
    for k, v in params.items():
        parts = k.split(".")
        short[".".join(parts[1:]) if len(parts) > 1 else k] = v.astype(np.float64)
    return short


@pytest.mark.parametrize("name", BACKEND_NAMES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_zoo_block(case, name, rng):
    factory, shapes, numpy_fn = CASES[case]
    m = ml.Model()
    if len(shapes) > 1:  # e.g. a loss's target: every input a top-level wire of its name
        m |= factory()(output=ml.IOKey("output", expose=True), **{k: k for k in shapes})
    else:
        m += factory()
    inputs = make_inputs(case, shapes, rng)
    pm = ml.compile(m, backend(name), shapes={k: list(v) for k, v in shapes.items()},
                    types={k: str(v.dtype) for k, v in inputs.items()}, data_keys=[k for k in inputs if k != "input"] or None)
    params = pm.randomize_params(seed=1)
    out = pm.evaluate(params, inputs)["output"]
    as64 = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    want = numpy_fn(as64, block_params(pm, params))
    assert_close(out, np.asarray(want, dtype=np.float64).astype(np.float32), np.float32)


@pytest.mark.parametrize("name", BACKEND_NAMES)
@pytest.mark.parametrize("case", sorted(TWO_INPUT))
def test_two_input_blocks(case, name, rng):
    factory, fn = TWO_INPUT[case]
    m = ml.Model()
    m |= factory()(left="a", right="b", output=ml.IOKey("y", expose=True))
    a, b = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)
    assert_close(run(m, backend(name), {"a": a, "b": b})["y"], fn(a, b))


@pytest.mark.parametrize("name", ["reference", "cpu"])
def test_example_networks(name, rng):
    cnn = ml.compile(ml.ExampleCNN(num_classes=4), backend(name), shapes={"input": [2, 3, 8, 8]})
    x = rng.normal(size=(2, 3, 8, 8)).astype(np.float32)
    assert cnn.evaluate(cnn.randomize_params(0), {"input": x})["output"].shape == (2, 4)
    mlp = ml.compile(ml.ExampleMLP(), backend(name), shapes={"input": ["N", 784]})
    assert mlp.get_shapes()["output"] == ["N", 10]
    out = mlp.evaluate(mlp.randomize_params(0), {"input": rng.normal(size=(3, 784)).astype(np.float32)})
    assert out["output"].shape == (3, 10)


def test_backends_agree_on_the_cnn(rng):
    x = rng.normal(size=(2, 3, 10, 10)).astype(np.float32)
    outs = {}
    for name in available_backend_names():
        pm = ml.compile(ml.ExampleCNN(), backend(name), shapes={"input": [None, 3, 10, 10]})
        outs[name] = pm.evaluate(pm.randomize_params(7), {"input": x})["output"]
    for name, out in outs.items():
        assert_close(out, outs["reference"], np.float32)


@needs_torch
def test_zoo_against_pytorch_modules(rng):
    import torch

    x = rng.normal(size=(2, 3, 9, 9)).astype(np.float32)
    m = ml.Model()
    m += ml.Conv2d(3, 5, kernel_size=3, stride=2, padding=1)
    m += ml.Relu()
    m += ml.MaxPool2d(kernel_size=2)
    m += ml.Flatten()
    m += ml.Linear(dimension=4)
    m += ml.LogSoftmax()
    pm = ml.compile(m, backend("cpu"), shapes={"input": [2, 3, 9, 9]})
    p = pm.randomize_params(0)
    conv = torch.nn.Conv2d(3, 5, 3, stride=2, padding=1)
    lin = torch.nn.Linear(20, 4)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(p["conv2d_0.weight"]))
        conv.bias.copy_(torch.from_numpy(p["conv2d_0.bias"]))
        lin.weight.copy_(torch.from_numpy(p["linear_0.weight"]).T)
        lin.bias.copy_(torch.from_numpy(p["linear_0.bias"]))
        y = torch.log_softmax(lin(torch.flatten(torch.max_pool2d(torch.relu(conv(torch.from_numpy(x))), 2), 1)), -1)
    assert_close(pm.evaluate(p, {"input": x})["output"], y.numpy())


@pytest.mark.parametrize("fused", [True, False])
def test_transformer_layer_with_constant_weights_matches_numpy(fused, rng):
    # Weights given as constants: the layer's products (10 rows, at most 512) run as oneDNN 1x1
    # convolutions with bias + GELU inside (CpuBackend(dnnl_matmul=True), the default); False
    # keeps the library GEMM and a pass. Either way the layer is the NumPy one's within float32
    # rounding, and a NaN in the input reaches the same outputs.
    assert ml.CpuBackend().dnnl_matmul and not ml.CpuBackend(dnnl_matmul=False).dnnl_matmul
    block = ml.TransformerEncoderLayer(8, 2, 16, num_kv_heads=1, causal=True, norm_first=True, rms_norm=True,
                                       activation="gelu")
    m = ml.Model()
    m += block
    opts = dict(shapes={"input": [2, 5, 8]}, inference=True)
    params = ml.compile(m, ml.ReferenceBackend(), **opts).randomize_params(seed=4)
    pm = ml.compile(m, ml.CpuBackend(dnnl_matmul=fused), constant_keys=params, **opts)
    x = rng.normal(size=(2, 5, 8)).astype(np.float32)
    p = block_params(pm, params)

    def numpy_layer(x):
        h = x + _attention(_rms_norm(x, p["norm1.weight"]), p, 2, 1, True, "self_attn.")
        f = _linear(_rms_norm(h, p["norm2.weight"]), p, "linear1")
        f = 0.5 * f * (1 + _erf(f / math.sqrt(2)))
        return h + _linear(f, p, "linear2")

    assert_close(pm.evaluate({}, {"input": x})["output"], numpy_layer(x.astype(np.float64)).astype(np.float32), np.float32)
    x[1, 2, 3] = np.nan
    got = pm.evaluate({}, {"input": x})["output"]
    want = ml.compile(m, ml.ReferenceBackend(), **opts).evaluate(params, {"input": x})["output"]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
