"""Gradients: outputs, grads = pm.evaluate(params, inputs, output_gradients={...}). ingot's
backward graph (reference and cpu backends) against central finite differences in float64 and
PyTorch autograd where installed; the JAX / PyTorch emitters through the framework's autodiff."""
from __future__ import annotations

import numpy as np
import pytest

import ingot as ml
from conftest import cpu, needs_jax, needs_torch

F64 = {"input": "float64", "target": "float64", "linear_0.weight": "float64", "linear_0.bias": "float64",
       "linear_1.weight": "float64", "linear_1.bias": "float64"}


def regression_model():
    m = ml.Model()
    m += ml.Linear(dimension=5)
    m += ml.Tanh()
    m += ml.Linear(dimension=2)(output="pred")
    m |= ml.MSELoss()(input="pred", target="target", output=ml.IOKey("loss", expose=True))
    return m


def compile_regression(backend, dtype="float64"):
    types = {k: dtype for k in F64}
    return ml.compile(regression_model(), backend, shapes={"input": [4, 3], "target": [4, 2]}, types=types,
                      data_keys=["target"])


def data(rng, dtype=np.float64):
    return {"input": rng.normal(size=(4, 3)).astype(dtype), "target": rng.normal(size=(4, 2)).astype(dtype)}


@pytest.mark.parametrize("backend_name", ["reference", "cpu"])
def test_gradients_match_finite_differences(backend_name, rng):
    pm = compile_regression(ml.ReferenceBackend() if backend_name == "reference" else cpu())
    params = pm.randomize_params(0)
    inputs = data(rng)
    outputs, grads = pm.evaluate(params, inputs, output_gradients={"loss": np.array(1.0)})
    assert set(grads) == set(pm.gradient_names()) == set(params)
    assert outputs["loss"] == pytest.approx(float(pm.evaluate(params, inputs)["loss"]))
    eps = 1e-6
    for name, p in params.items():
        for idx in [(0,) * p.ndim, tuple(s - 1 for s in p.shape)]:
            plus, minus = {k: v.copy() for k, v in params.items()}, {k: v.copy() for k, v in params.items()}
            plus[name][idx] += eps
            minus[name][idx] -= eps
            fd = (float(pm.evaluate(plus, inputs)["loss"]) - float(pm.evaluate(minus, inputs)["loss"])) / (2 * eps)
            assert grads[name][idx] == pytest.approx(fd, rel=1e-6, abs=1e-9), (name, idx)


def test_gradient_errors(rng):
    pm = compile_regression(ml.ReferenceBackend())
    p = pm.randomize_params()
    with pytest.raises(ml.IngotError):
        pm.evaluate(p, data(rng), output_gradients={"nope": np.array(1.0)})
    with pytest.raises(ml.IngotError, match="Type mismatch|dtype"):
        pm.evaluate(p, data(rng), output_gradients={"loss": np.array(1.0, np.float32)})


@needs_jax
def test_jax_backend_gradients_match_ingot(rng):
    ref = compile_regression(ml.ReferenceBackend())
    jx = compile_regression(ml.JaxBackend())
    p, inputs = ref.randomize_params(1), data(rng)
    seed = {"loss": np.array(1.0)}
    _, want = ref.evaluate(p, inputs, output_gradients=seed)
    out, got = jx.evaluate(p, inputs, output_gradients=seed)
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-9, atol=1e-12)


@needs_torch
def test_gradients_match_torch_autograd(rng):
    import torch

    pm = compile_regression(cpu())
    p, inputs = pm.randomize_params(2), data(rng)
    _, grads = pm.evaluate(p, inputs, output_gradients={"loss": np.array(1.0)})
    t = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    h = torch.tanh(torch.tensor(inputs["input"]) @ t["linear_0.weight"] + t["linear_0.bias"])
    loss = ((h @ t["linear_1.weight"] + t["linear_1.bias"] - torch.tensor(inputs["target"])) ** 2).mean()
    loss.backward()
    for k in p:
        np.testing.assert_allclose(grads[k], t[k].grad.numpy(), rtol=1e-9, atol=1e-12)
    tb = compile_regression(ml.TorchBackend())
    _, tgrads = tb.evaluate(p, inputs, output_gradients={"loss": np.array(1.0)})
    for k in p:
        np.testing.assert_allclose(tgrads[k], grads[k], rtol=1e-9, atol=1e-12)
