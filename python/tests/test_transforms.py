"""ml.grad, ml.value_and_grad and ml.vjp: against central finite differences in float64 (rtol 1e-6,
atol 1e-8: the differences' own error at eps 1e-6 is about 1e-9), against PyTorch autograd when it
is installed, trees of parameters, auxiliary outputs, composition with ml.compile, and errors."""
from __future__ import annotations

import numpy as np
import pytest

import ingot as ml
from conftest import assert_close, needs_torch


@pytest.fixture(autouse=True)
def reference_builds():
    ml.set_compile_config(backend=ml.ReferenceBackend())
    yield
    ml.reset_compile_config()


def finite_differences(f, x, eps=1e-6):
    """d f(x) / dx for a float64 NumPy x, by central differences."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


FUNCTIONS = {
    "tanh_times_x": lambda x: ml.sum(ml.tanh(x) * x),
    "softmax_cross_entropy": lambda x: -ml.mean(ml.log_softmax(x @ x.T * 0.3, axis=1)[:, 0]),
    "sqrt_log_sigmoid": lambda x: ml.sum(ml.sqrt(x * x + 1.0) * ml.log(ml.sigmoid(x) + 0.5)),
    "max_and_slices": lambda x: ml.sum(ml.max(x[:, ::-1], axis=0) * ml.exp(x[0])) / 3.0,
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_grad_matches_finite_differences(rng, name):
    f = FUNCTIONS[name]
    x = rng.uniform(-1.5, 1.5, (3, 4))
    want = finite_differences(lambda v: f(ml.array(v)).item(), x)
    np.testing.assert_allclose(np.asarray(ml.grad(f)(ml.array(x))), want, rtol=1e-6, atol=1e-8)


def test_value_and_grad_with_trees_argnums_and_auxiliary_outputs(rng):
    params = {"w": ml.array(rng.normal(size=(4, 2))), "b": ml.array(rng.normal(size=2))}
    x = ml.array(rng.normal(size=(3, 4)))

    def loss(p, x):
        out = ml.tanh(x @ p["w"] + p["b"])
        return ml.sum(out * out), out  # the loss, then an auxiliary value

    (value, aux), (g_params, g_x) = ml.value_and_grad(loss, argnums=(0, 1))(params, x)
    assert set(g_params) == {"w", "b"} and g_x.shape == (3, 4)
    assert_close(aux, np.tanh(np.asarray(x) @ np.asarray(params["w"]) + np.asarray(params["b"])))
    assert_close(value, (np.asarray(aux) ** 2).sum())
    w0 = np.asarray(params["w"])
    want_w = finite_differences(lambda w: loss({"w": ml.array(w), "b": params["b"]}, x)[0].item(), w0)
    np.testing.assert_allclose(np.asarray(g_params["w"]), want_w, rtol=1e-6, atol=1e-8)
    only_b = ml.grad(lambda p, x: loss(p, x)[0])(params, x)  # an int argnums: the gradient alone
    assert set(only_b) == {"w", "b"}
    assert_close(only_b["b"], g_params["b"])


def test_vjp_pulls_back_the_given_cotangents(rng):
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    outputs, vjps = ml.vjp(lambda x, y: (x * y, ml.sin(x)), [a, b], [np.ones((2, 3)), np.full((2, 3), 2.0)])
    assert_close(outputs[0], a * b)
    assert_close(vjps[0], b + 2.0 * np.cos(a))
    assert_close(vjps[1], a)


def test_grad_of_compiled_equals_grad_of_uncompiled(rng):
    f = FUNCTIONS["softmax_cross_entropy"]
    x = ml.array(rng.normal(size=(3, 4)))
    compiled = ml.compile(f)
    c0 = ml.compile_count()
    assert_close(ml.grad(compiled)(x), ml.grad(f)(x))
    assert ml.compile_count() == c0  # the compiled function inlined into grad's trace


def test_compile_of_grad_builds_once(rng):
    f = FUNCTIONS["tanh_times_x"]
    df = ml.compile(ml.grad(f))
    c0 = ml.compile_count()
    for _ in range(3):
        x = ml.array(rng.normal(size=(2, 5)))
        assert_close(df(x), ml.grad(f)(x))
    assert ml.compile_count() == c0 + 1


@needs_torch
def test_grad_matches_torch_autograd(rng):
    import torch
    x, w = rng.normal(size=(4, 5)), rng.normal(size=(5, 3))

    def ours(x, w):
        return ml.mean(ml.log_softmax(ml.gelu(x @ w), axis=1))

    gx, gw = ml.grad(ours, argnums=(0, 1))(ml.array(x), ml.array(w))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.log_softmax(torch.nn.functional.gelu(tx @ tw), dim=1).mean().backward()
    np.testing.assert_allclose(np.asarray(gx), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gw), tw.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_transform_errors():
    with pytest.raises(ml.IngotError, match="first output must hold one element"):
        ml.grad(lambda x: x * 2.0)(ml.ones(3))
    with pytest.raises(ml.IngotError, match="floating-point arguments only"):
        ml.grad(lambda x: ml.sum(ml.astype(x, "float32")))(ml.array([1, 2]))
    with pytest.raises(ml.IngotError, match="argnums: 2 is out of range for a call with 1 arguments"):
        ml.grad(lambda x: ml.sum(x), argnums=2)(ml.ones(2))
    with pytest.raises(ml.IngotError, match="names an argument twice"):
        ml.grad(lambda x: ml.sum(x), argnums=(0, -1))(ml.ones(2))
    with pytest.raises(TypeError, match="argnums must be an int or a non-empty sequence of ints"):
        ml.grad(lambda x: ml.sum(x), argnums="0")(ml.ones(2))
    with pytest.raises(TypeError, match="must return the loss array, or a tuple whose first item is the loss; got dict"):
        ml.grad(lambda x: {"loss": ml.sum(x)})(ml.ones(2))
    with pytest.raises(ml.IngotError, match="cotangent 0 must have the output's shape"):
        ml.vjp(lambda x: x * 2.0, [ml.ones(2)], [ml.ones(3)])
