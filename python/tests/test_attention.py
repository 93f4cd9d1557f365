"""scaled_dot_product_attention from Python: the op on every backend (reference, cpu, the NumPy
emitter, JAX / PyTorch where installed) against attention written in NumPy, through lazy arrays
and compile(fn), its gradients against central finite differences (and the compiled, fused
backward against them), and against PyTorch's
F.scaled_dot_product_attention where torch is installed. Tolerances: conftest.tolerance."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ingot as ml
from conftest import BACKEND_NAMES, assert_close, backend, needs_torch, run
from test_ops import family_model


def attention_np(q, k, v, mask=None, scale=0.0, causal=0, causal_offset=0):
    """Attention in float64 NumPy: grouped-query heads repeated, hidden keys at -inf."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    if q.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        g = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, g, axis=-3), np.repeat(v, g, axis=-3)
    s = q @ np.swapaxes(k, -1, -2) * (scale or 1 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == np.bool_ else s + mask
    if causal:
        i, j = np.arange(q.shape[-2])[:, None], np.arange(k.shape[-2])[None, :]
        s = np.where(j <= i + causal_offset, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_every_backend_matches_numpy(name, rng):
    q = rng.normal(size=(2, 4, 6, 8)).astype(np.float32)
    k = rng.normal(size=(2, 4, 9, 8)).astype(np.float32)
    v = rng.normal(size=(2, 4, 9, 5)).astype(np.float32)
    kg, vg = k[:, :2], v[:, :2]  # two key/value heads for four query heads
    bmask = rng.uniform(size=(6, 9)) > 0.3
    bmask[:, 0] = True
    fmask = rng.normal(size=(2, 1, 6, 9)).astype(np.float32)
    specs = [("scaled_dot_product_attention", ["q", "k", "v"], "plain", {}),
             ("scaled_dot_product_attention", ["q", "k", "v", "bmask"], "bool_mask", {"scale": 0.5}),
             ("scaled_dot_product_attention", ["q", "k", "v", "fmask"], "causal_float_mask", {"causal": 1, "causal_offset": 3}),
             ("scaled_dot_product_attention", ["q", "kg", "vg"], "grouped", {"causal": 1})]
    expected = {"plain": attention_np(q, k, v), "bool_mask": attention_np(q, k, v, bmask, scale=0.5),
                "causal_float_mask": attention_np(q, k, v, fmask, causal=1, causal_offset=3),
                "grouped": attention_np(q, kg, vg, causal=1)}
    out = run(family_model(specs), backend(name),
              {"q": q, "k": k, "v": v, "kg": kg, "vg": vg, "bmask": bmask, "fmask": fmask})
    for key, want in expected.items():
        assert out[key].dtype == np.float32, key
        assert_close(out[key], want.astype(np.float32))


def test_lazy_arrays_and_compile_fn(rng):
    q, k, v = (rng.normal(size=(3, 7, 16)).astype(np.float32) for _ in range(3))
    mask = rng.uniform(size=(7, 7)) > 0.2
    mask[:, 0] = True
    want = attention_np(q, k, v, mask, causal=1)
    eager = ml.scaled_dot_product_attention(ml.array(q), ml.array(k), ml.array(v), ml.array(mask), is_causal=True)
    assert_close(np.asarray(eager), want.astype(np.float32))
    f = ml.compile(lambda a, b, c, m: ml.scaled_dot_product_attention(a, b, c, m, is_causal=True))
    assert_close(np.asarray(f(ml.array(q), ml.array(k), ml.array(v), ml.array(mask))), want.astype(np.float32))


def test_gradients_match_finite_differences(rng):
    q = rng.normal(size=(1, 2, 4, 3))
    k = rng.normal(size=(1, 1, 5, 3))
    v = rng.normal(size=(1, 1, 5, 2))
    bias = rng.normal(size=(4, 5))
    w = rng.normal(size=(1, 2, 4, 2))

    def loss(a, b, c, m):
        y = ml.scaled_dot_product_attention(a, b, c, m, is_causal=True, causal_offset=1)
        return ml.sum(y * ml.array(w))

    grads = ml.grad(loss, argnums=(0, 1, 2, 3))(*(ml.array(t) for t in (q, k, v, bias)))

    def f(a, b, c, m):
        return float((attention_np(a, b, c, m, causal=1, causal_offset=1) * w).sum())

    h = 1e-6
    for i, (x, g) in enumerate(zip((q, k, v, bias), grads)):
        fd = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            args = [q, k, v, bias]
            plus, minus = x.copy(), x.copy()
            plus[idx] += h
            minus[idx] -= h
            args[i] = plus
            fp = f(*args)
            args[i] = minus
            fd[idx] = (fp - f(*args)) / (2 * h)
        np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-5, atol=1e-7, err_msg=f"argument {i}")


def test_compiled_gradients_run_the_fused_backward(rng):
    """ml.compile(ml.grad(...)) on the CPU backend runs the fused backward kernel; its gradients
    (grouped heads, a causal offset, a float mask, past the kernel's 128-row blocks) match the
    eager ones, which the reference kernels compute in double (rtol 1e-4, atol 1e-5)."""
    q = rng.normal(size=(1, 4, 150, 16)).astype(np.float32)
    k = rng.normal(size=(1, 2, 300, 16)).astype(np.float32)
    v = rng.normal(size=(1, 2, 300, 8)).astype(np.float32)
    bias = rng.normal(size=(150, 300)).astype(np.float32)
    w = rng.normal(size=(1, 4, 150, 8)).astype(np.float32)

    def loss(a, b, c, m):
        return ml.sum(ml.scaled_dot_product_attention(a, b, c, m, is_causal=True, causal_offset=150) * ml.array(w))

    args = [ml.array(t) for t in (q, k, v, bias)]
    eager = ml.grad(loss, argnums=(0, 1, 2, 3))(*args)
    compiled = ml.compile(ml.grad(loss, argnums=(0, 1, 2, 3)))(*args)
    for i, (got, want) in enumerate(zip(compiled, eager)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5, err_msg=f"argument {i}")


@needs_torch
def test_matches_pytorch_sdpa(rng):
    import torch
    import torch.nn.functional as F

    q, k, v = (rng.normal(size=(2, 4, 33, 64)).astype(np.float32) for _ in range(3))
    mask = rng.uniform(size=(2, 1, 33, 33)) > 0.25
    mask[..., 0] = True
    for kwargs, ours in [({"is_causal": True}, {"is_causal": True}), ({"attn_mask": torch.from_numpy(mask)}, {"mask": mask})]:
        want = F.scaled_dot_product_attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), **kwargs).numpy()
        if "mask" in ours:
            got = ml.scaled_dot_product_attention(q, k, v, ml.array(ours["mask"]))
        else:
            got = ml.scaled_dot_product_attention(q, k, v, **ours)
        assert_close(np.asarray(got), want)


def test_bad_operands_are_clear_errors(rng):
    q = ml.array(rng.normal(size=(2, 4, 3)).astype(np.float32))
    with pytest.raises(ml.IngotError, match="must divide the query heads"):
        ml.eval(ml.scaled_dot_product_attention(ml.array(np.zeros((1, 3, 4, 8), np.float32)),
                                                ml.array(np.zeros((1, 2, 4, 8), np.float32)),
                                                ml.array(np.zeros((1, 2, 4, 8), np.float32))))
    with pytest.raises(ml.IngotError, match="does not broadcast"):
        ml.eval(ml.scaled_dot_product_attention(q, q, q, ml.array(np.zeros((3, 3), np.bool_))))
    with pytest.raises(ml.IngotError, match="must be bool"):
        ml.eval(ml.scaled_dot_product_attention(q, q, q, ml.array(np.zeros((4, 4), np.int32))))


@pytest.mark.parametrize("blas", [True, False])
def test_cpu_backend_with_and_without_library_products(blas, rng):
    """ml.CpuBackend(blas=False): attention's block products and the matmuls in plain loops (as
    on a machine without a BLAS library), the same results as the library's, past the kernel's
    128 x 512 blocks."""
    q = rng.normal(size=(1, 2, 150, 16)).astype(np.float32)
    k = rng.normal(size=(1, 2, 600, 16)).astype(np.float32)
    v = rng.normal(size=(1, 2, 600, 8)).astype(np.float32)
    w = rng.normal(size=(8, 5)).astype(np.float32)
    be = ml.CpuBackend(blas=blas)
    assert be.blas is blas
    f = ml.compile(lambda a, b, c, d: ml.scaled_dot_product_attention(a, b, c, is_causal=True, causal_offset=450) @ d)
    ml.set_compile_config(backend=be)
    try:
        got = np.asarray(f(ml.array(q), ml.array(k), ml.array(v), ml.array(w)))
    finally:
        ml.reset_compile_config()
    assert_close(got, (attention_np(q, k, v, causal=1, causal_offset=450) @ w).astype(np.float32))
