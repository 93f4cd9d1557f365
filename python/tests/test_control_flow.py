"""ml.cond, ml.while_loop and ml.scan against NumPy (and jax.lax where JAX is installed): trees of
operands and carries, captured arrays, ml.compile with one trace for every predicate value,
gradients against finite differences (through while_loop with max_iterations too) and against the
unrolled loop, and the errors (a gradient through while_loop without max_iterations among them)."""
import numpy as np
import pytest

import ingot as ml

RTOL = 1e-5  # float32 results against NumPy's float32 (or float64 for gradients, below)


def rng(seed):
    return np.random.default_rng(seed)


def test_cond_takes_either_branch_with_tree_operands():
    x = rng(0).standard_normal((2, 3)).astype(np.float32)
    w = ml.array(rng(1).standard_normal(3).astype(np.float32))  # captured by the true branch
    for p in (True, False):
        out = ml.cond(p, lambda d: {"y": d["x"] * w + 1.0, "s": ml.sum(d["x"])},
                      lambda d: {"y": ml.tanh(d["x"]), "s": ml.sum(d["x"] * 0)}, {"x": x})
        want = x * np.asarray(w) + 1 if p else np.tanh(x)
        np.testing.assert_allclose(np.asarray(out["y"]), want, rtol=RTOL, atol=1e-6)
        np.testing.assert_allclose(float(out["s"]), x.sum() if p else 0.0, rtol=RTOL, atol=1e-5)


def test_while_loop_with_a_dict_state_and_max_iterations():
    x = rng(2).standard_normal(4).astype(np.float32)
    state = ml.while_loop(lambda s: s["i"] < 5, lambda s: {"i": s["i"] + 1, "acc": s["acc"] * 0.5 + x},
                          {"i": np.int32(0), "acc": np.zeros(4, np.float32)})
    acc = np.zeros(4, np.float32)
    for _ in range(5):
        acc = acc * np.float32(0.5) + x
    assert int(state["i"]) == 5
    np.testing.assert_allclose(np.asarray(state["acc"]), acc, rtol=RTOL)
    capped = ml.while_loop(lambda s: s < 100, lambda s: s + 1, np.int32(0), max_iterations=7)
    assert int(capped) == 7


def rnn(h0, xs, w, reverse=False):
    return ml.scan(lambda h, x: (ml.tanh(h * w + x), {"y": ml.tanh(h * w + x) * 2.0}), h0, xs, reverse=reverse)


def rnn_numpy(h0, xs, w, reverse=False):
    h, ys = h0, [None] * len(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for t in order:
        h = np.tanh(h * w + xs[t])
        ys[t] = h * 2
    return h, np.stack(ys)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_numpy(reverse):
    r = rng(3)
    h0, xs, w = (r.standard_normal(s).astype(np.float32) for s in [(3,), (6, 3), (3,)])
    h, ys = rnn(h0, xs, ml.array(w), reverse)
    h_want, ys_want = rnn_numpy(h0, xs, w, reverse)
    np.testing.assert_allclose(np.asarray(h), h_want, rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ys["y"]), ys_want, rtol=RTOL, atol=1e-6)


def test_scan_matches_jax_lax_scan():
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    r = rng(4)
    h0, xs, w = (r.standard_normal(s).astype(np.float32) for s in [(3,), (5, 3), (3,)])

    def step(h, x):
        h = jax.numpy.tanh(h * w + x)
        return h, h * 2

    h_jax, ys_jax = jax.lax.scan(step, h0, xs)
    h, ys = rnn(h0, xs, ml.array(w))
    np.testing.assert_allclose(np.asarray(h), np.asarray(h_jax), rtol=RTOL, atol=1e-6)
    np.testing.assert_allclose(np.asarray(ys["y"]), np.asarray(ys_jax), rtol=RTOL, atol=1e-6)


def test_compiled_function_traces_once_for_both_branches():
    f = ml.compile(lambda p, x: ml.cond(p, lambda a: a * 3.0, lambda a: a - 1.0, x))
    x = rng(5).standard_normal(5).astype(np.float32)
    before = ml.compile_count()
    np.testing.assert_allclose(np.asarray(f(ml.array(True), x)), x * 3, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(f(ml.array(False), x)), x - 1, rtol=RTOL)
    assert ml.compile_count() == before + 1


def finite_differences(f, args, i, eps=1e-6):
    """d f / d args[i] by central differences, f returning one element."""
    out = np.zeros_like(args[i])
    for idx in np.ndindex(*args[i].shape):
        plus = [a.copy() for a in args]
        minus = [a.copy() for a in args]
        plus[i][idx] += eps
        minus[i][idx] -= eps
        out[idx] = (float(f(*plus)) - float(f(*minus))) / (2 * eps)
    return out


def test_gradients_through_scan_and_cond_match_finite_differences():
    r = rng(6)
    h0, xs, w = (r.standard_normal(s) for s in [(3,), (4, 3), (3,)])  # float64

    def loss(h0, xs, w):
        h, ys = rnn(h0, xs, w)
        return ml.sum(h * h) + ml.sum(ys["y"] * ys["y"])

    grads = ml.grad(loss, argnums=(0, 1, 2))(h0, xs, w)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(grads[i]), finite_differences(loss, [h0, xs, w], i), rtol=1e-6,
                                   atol=1e-8)
    for p in (True, False):
        g = ml.grad(lambda x: ml.sum(ml.cond(p, lambda a: ml.sin(a) * a, lambda a: a * a, x)))(h0)
        np.testing.assert_allclose(np.asarray(g), np.cos(h0) * h0 + np.sin(h0) if p else 2 * h0, rtol=1e-12)


def test_gradients_through_while_loop_with_max_iterations_match_finite_differences():
    h0, w = (rng(7).standard_normal(3) for _ in range(2))  # float64

    def counted(limit):  # `limit` steps of h = tanh(h * w + 0.5), at most 8, counted by an int32
        def loss(h0, w):
            state = ml.while_loop(lambda s: s["i"] < limit, lambda s: {"i": s["i"] + 1, "h": ml.tanh(s["h"] * w + 0.5)},
                                  {"i": np.int32(0), "h": h0}, max_iterations=8)
            return ml.sum(state["h"] * state["h"])
        return loss

    def doubling(limit):  # sum(x) runs 2.1, 4.29, 8.76, 17.5, 35.0: 4 iterations below 20, none below 1
        return lambda x, w: ml.sum(ml.sin(ml.while_loop(lambda s: ml.sum(s) < limit, lambda s: s * 2.0 + ml.sin(s) * w,
                                                        x, max_iterations=10)))

    x, v = np.array([0.5, 0.7, 0.9]), np.array([0.3, -0.2, 0.1])
    # A fixed trip count, none, one max_iterations cuts off, and data-dependent ones.
    for loss, args in [(counted(5), [h0, w]), (counted(0), [h0, w]), (counted(100), [h0, w]),
                       (doubling(20.0), [x, v]), (doubling(1.0), [x, v])]:
        grads = ml.grad(loss, argnums=(0, 1))(*args)
        for i in range(2):
            np.testing.assert_allclose(np.asarray(grads[i]), finite_differences(loss, args, i), rtol=1e-6, atol=1e-8)


def test_errors_name_what_is_wrong():
    x = np.ones(2, np.float32)
    with pytest.raises(ml.IngotError, match="the predicate must hold one element"):
        ml.cond(np.array([True, False]), lambda a: a, lambda a: a, x)
    with pytest.raises(ml.IngotError, match=r"result 0 is \[2\] in the then graph but \[\] in the else graph"):
        ml.cond(True, lambda a: a, lambda a: ml.sum(a), x)
    with pytest.raises(ml.IngotError, match="true_fun returns .* but false_fun returns"):
        ml.cond(True, lambda a: (a, a), lambda a: [a, a], x)
    with pytest.raises(ml.IngotError, match=r"enters the loop as \[2\] but the body returns \[4\]"):
        ml.while_loop(lambda s: ml.sum(s) < 10, lambda s: ml.concatenate([s, s]), x)
    with pytest.raises(ml.IngotError, match="body_fun returns"):
        ml.while_loop(lambda s: s[0] < 10, lambda s: (s[0] + 1,), (np.int32(0), x))
    with pytest.raises(TypeError, match=r"scan: f must return a \(carry, y\) pair"):
        ml.scan(lambda c, x: c, x, np.ones((3, 2), np.float32))
    with pytest.raises(ml.IngotError, match=r"Cannot differentiate through while: its trip count is only known at run "
                       r"time.*set max_iterations: .* ml\.while_loop\(cond_fun, body_fun, init_val, "
                       r"max_iterations=\.\.\.\) in Python"):
        ml.grad(lambda v: ml.sum(ml.while_loop(lambda s: ml.sum(s) < 10, lambda s: s * 2, v)))(x)
