"""ml.compile(fn): compiled equals uncompiled, the cache rules (ml.compile_count proves when a
trace is built), shapeless, result structures, captured state (a whole training step), random
state, nesting, disabling, and every Python-side error.

Builds use the reference backend (fast: these tests check the compile machinery, not the
kernels) except where a test says CPU; float32 results compare with the tolerances of
conftest.tolerance (rtol 1e-5, atol 1e-6)."""
from __future__ import annotations

import gc
import math

import numpy as np
import pytest

import ingot as ml
from conftest import assert_close, cpu


@pytest.fixture(autouse=True)
def reference_builds():
    ml.set_compile_config(backend=ml.ReferenceBackend())
    yield
    ml.reset_compile_config()


def rand(rng, *shape, dtype=np.float32):
    return ml.array(rng.uniform(-2, 2, shape).astype(dtype))


def many_ops(x, w):
    """Elementwise math, matmul, reductions, softmax, where, slicing and concat in one graph."""
    h = ml.gelu(x @ w) * 0.5
    s = ml.softmax(h, axis=-1)
    r = ml.sum(ml.where(s > 0.1, s, 0.0), axis=1, keepdims=True)
    return ml.concatenate([s[:, ::-1], r], axis=1), ml.mean(ml.tanh(x[1:]) ** 2)


def test_cpu_compiled_equals_uncompiled_on_random_inputs(rng):
    ml.set_compile_config(backend=cpu())
    f = ml.compile(many_ops)
    for _ in range(3):
        x, w = rand(rng, 4, 6), rand(rng, 6, 5)
        got, want = f(x, w), many_ops(x, w)
        assert isinstance(got, tuple) and len(got) == 2
        for g, e in zip(got, want):
            assert_close(g, e)


def test_the_mlx_gelu_example_compiles_to_the_same_values(rng):
    def gelu(x):
        return x * (1 + ml.erf(x / math.sqrt(2))) / 2

    x = rand(rng, 3, 7)
    assert_close(ml.compile(gelu)(x), gelu(x))


def test_cache_keys_on_shape_dtype_and_arity():
    def exp_of_sum(*xs):
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return ml.exp(total)

    f = ml.compile(exp_of_sum)
    c0 = ml.compile_count()
    a, b = ml.zeros((2, 3)), ml.ones((2, 3))
    f(a, b)
    assert ml.compile_count() == c0 + 1
    assert_close(f(b, a), np.full((2, 3), math.e, np.float32))  # same signature: cached
    assert ml.compile_count() == c0 + 1
    f(ml.zeros((4, 3)), ml.zeros((4, 3)))  # new shape
    f(ml.zeros((2, 3), "float64"), ml.zeros((2, 3), "float64"))  # new dtype
    f(a, b, a)  # new arity
    assert ml.compile_count() == c0 + 4
    f(a, b)  # every signature stays cached
    f(ml.zeros((4, 3)), ml.zeros((4, 3)))
    assert ml.compile_count() == c0 + 4


def scaled_tanh(x):
    return ml.tanh(x) * 3.0


def test_the_same_function_shares_its_cache_and_a_new_lambda_does_not():
    x = ml.ones(3)
    c0 = ml.compile_count()
    ml.compile(scaled_tanh)(x)
    ml.compile(scaled_tanh)(x)  # the same function object: one cache
    assert ml.compile_count() == c0 + 1
    for k in range(3):  # the documented pitfall: a lambda made anew each time compiles each time
        assert ml.compile(lambda v: v * float(k))(x).tolist() == [k, k, k]
    assert ml.compile_count() == c0 + 4
    ml.compile(scaled_tanh, shapeless=True)(x)  # other options: a cache of their own
    assert ml.compile_count() == c0 + 5


def test_decorator_forms():
    @ml.compile
    def double(x):
        return x * 2.0

    @ml.compile(shapeless=True)
    def halve(x):
        return x / 2.0

    assert isinstance(double, ml.CompiledFunction) and double.__name__ == "double"
    assert double(ml.ones(2)).tolist() == [2, 2]
    assert halve(ml.ones(3)).tolist() == [0.5, 0.5, 0.5]

    class Scale:  # a callable object works too
        def __call__(self, x):
            return x * 3.0

    assert ml.compile(Scale())(ml.ones(2)).tolist() == [3, 3]
    assert repr(ml.compile(Scale())) == "<ingot.CompiledFunction Scale>"


def test_shapeless_compiles_once_per_rank(rng):
    f = ml.compile(lambda x: ml.sum(ml.relu(x) * 2.0, axis=1), shapeless=True)
    c0 = ml.compile_count()
    for n in (2, 5, 9):
        x = rand(rng, n, 3)
        assert_close(f(x), ml.sum(ml.relu(x) * 2.0, axis=1))
    assert ml.compile_count() == c0 + 1
    f(ml.zeros((2, 3, 4)))  # a new rank is a new signature
    assert ml.compile_count() == c0 + 2


def test_shapeless_keeps_size_one_dimensions_so_they_broadcast(rng):
    add = ml.compile(lambda x, y: x + y, shapeless=True)
    c0 = ml.compile_count()
    for n in (3, 5):
        x, y = rand(rng, n, 1), rand(rng, n, 4)
        assert_close(add(x, y), np.asarray(x) + np.asarray(y))
    assert ml.compile_count() == c0 + 1
    x, y = rand(rng, 3, 4), rand(rng, 3, 4)
    assert_close(add(x, y), np.asarray(x) + np.asarray(y))  # no size-1 dim: a signature of its own
    assert ml.compile_count() == c0 + 2


def test_shapeless_errors_where_the_graph_fixes_a_dimension():
    with pytest.raises(ml.IngotError, match=r"compile\(shapeless=true\).*does not allow other input shapes"):
        ml.compile(lambda x: ml.reshape(x, (6,)), shapeless=True)(ml.zeros((2, 3)))
    assert ml.compile(lambda x: ml.reshape(x, (-1,)), shapeless=True)(ml.zeros((2, 3))).shape == (6,)


def test_results_keep_their_structure_per_signature():
    f = ml.compile(lambda x: {"double": x * 2.0, "pair": (x, [x + 1.0])})
    for _ in range(2):  # traced, then cached
        out = f(ml.ones(2))
        assert set(out) == {"double", "pair"} and isinstance(out["pair"], tuple) and isinstance(out["pair"][1], list)
        assert out["pair"][1][0].tolist() == [2, 2]
    g = ml.compile(lambda x: x if x.ndim == 1 else (x, x))  # the structure may depend on the signature
    assert isinstance(g(ml.ones(2)), ml.array)
    assert isinstance(g(ml.ones((2, 2))), tuple)
    assert isinstance(g(ml.ones(3)), ml.array)
    assert ml.compile(lambda x: None)(ml.ones(1)) is None


def test_captured_state_updates_across_calls():
    state = {"count": ml.array(0.0), "total": ml.zeros(3)}

    def accumulate(x):
        state["count"] = state["count"] + 1.0
        state["total"] = state["total"] + x
        return state["total"] * 2.0

    f = ml.compile(accumulate, inputs=[state], outputs=[state])
    c0 = ml.compile_count()
    for i in range(3):
        y = f(ml.ones(3) * float(i))
    assert ml.compile_count() == c0 + 1
    assert state["count"].item() == 3.0 and state["total"].tolist() == [3, 3, 3] and y.tolist() == [6, 6, 6]
    state["extra"] = ml.zeros(1)  # a new entry changes the signature: traced again
    f(ml.ones(3))
    assert ml.compile_count() == c0 + 2


def test_a_captured_array_read_directly_is_an_input_too():
    w = ml.array([1.0, 2.0])
    params = [w]
    f = ml.compile(lambda x: x * w, inputs=params)  # reads w itself, not params[0]
    assert f(ml.ones(2)).tolist() == [1, 2]
    params[0] = ml.array([3.0, 4.0])
    assert f(ml.ones(2)).tolist() == [3, 4]  # the input, not a constant baked in at trace time
    assert w.tolist() == [1, 2]  # and the array object is itself again after the trace


def test_random_state_as_captured_state_draws_fresh_numbers():
    def noisy(x):
        return x + ml.random.normal(x.shape)

    f = ml.compile(noisy, inputs=[ml.random.state], outputs=[ml.random.state])
    ml.random.seed(11)
    a, b = f(ml.zeros(4)), f(ml.zeros(4))
    assert not np.array_equal(np.asarray(a), np.asarray(b))
    ml.random.seed(11)
    assert_close(a, noisy(ml.zeros(4)))  # the same draws as uncompiled
    assert_close(b, noisy(ml.zeros(4)))
    g = ml.compile(noisy)  # without the state, the trace's key is a constant: the same numbers each call
    np.testing.assert_array_equal(np.asarray(g(ml.zeros(4))), np.asarray(g(ml.zeros(4))))


def init_mlp(rng):
    def param(*shape, scale=0.3):
        return ml.array(rng.normal(0, scale, shape).astype(np.float32))
    return {"w1": param(6, 16), "b1": param(16), "w2": param(16, 3), "b2": param(3)}


def mlp_loss(p, x, y):
    logits = ml.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return -ml.mean(ml.sum(y * ml.log_softmax(logits), axis=1))


def sgd_step(params, lr):
    loss_and_grads = ml.value_and_grad(mlp_loss)

    def step(x, y):
        loss, grads = loss_and_grads(params, x, y)
        for k in params:
            params[k] = params[k] - lr * grads[k]
        return loss
    return step


def test_training_loop_compiled_matches_eager(rng):
    ml.set_compile_config(backend=cpu())
    eager_params = init_mlp(rng)
    compiled_params = dict(eager_params)
    eager_step = sgd_step(eager_params, 0.2)
    compiled_step = ml.compile(sgd_step(compiled_params, 0.2), inputs=[compiled_params], outputs=[compiled_params])
    x = rand(rng, 8, 6)
    y = ml.one_hot(ml.array(np.arange(8) % 3), 3)
    c0 = ml.compile_count()
    losses = []
    for _ in range(6):
        want, got = eager_step(x, y), compiled_step(x, y)
        ml.eval(eager_params)
        assert_close(got, want)
        losses.append(got.item())
    assert ml.compile_count() == c0 + 1  # the whole step, once
    assert losses[-1] < losses[0]
    for k in eager_params:
        assert_close(compiled_params[k], eager_params[k])


def test_nested_compiled_functions_inline():
    inner = ml.compile(lambda x: ml.exp(x))
    outer = ml.compile(lambda x: inner(x) + 1.0)
    c0 = ml.compile_count()
    assert_close(outer(ml.zeros(2)), np.full(2, 2.0, np.float32))
    assert ml.compile_count() == c0 + 1  # only the outer function was built


# A NumPy argument is read in place for the call (no copy), but what the call hands back is never
# the caller's memory: a result that is the argument or a view of it is copied, and an uncompiled
# run, whose lazy results would read the argument later, runs on a copy. Each case mutates the
# NumPy array after the call and checks the results kept the values they had.
PASS_THROUGH = {
    "identity": lambda x: x,
    "reshape": lambda x: ml.reshape(x, (-1,)),
    "slice": lambda x: x[1:],
    "computed": lambda x: x * 2.0,
    "tree": lambda x: {"same": x, "pair": (x, x + 1.0)},
}


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("name", list(PASS_THROUGH))
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "uncompiled"])
def test_numpy_arguments_are_read_in_place_but_never_kept(backend, name, compiled):
    if backend == "cpu":
        ml.set_compile_config(backend=cpu())
    fn = PASS_THROUGH[name]
    f = ml.compile(fn)
    original = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = [np.asarray(e) for e in _leaves(fn(ml.array(original)))]
    x = original.copy()
    if not compiled:
        ml.disable_compile()
    try:
        for _ in range(2):  # the first call traces, the second runs the cached executable
            got = _leaves(f(x))
            x[...] = -7.0  # the caller reuses its buffer
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                np.testing.assert_array_equal(np.asarray(g), e)
            x[...] = original
    finally:
        ml.enable_compile()


def _leaves(tree):
    if isinstance(tree, dict):
        return [a for k in sorted(tree) for a in _leaves(tree[k])]
    if isinstance(tree, (list, tuple)):
        return [a for v in tree for a in _leaves(v)]
    return [tree]


def test_captured_state_set_to_a_numpy_argument_is_a_copy():
    state = {"last": ml.zeros((2,))}

    def remember(x):
        state["last"] = x
        return x + 1.0

    f = ml.compile(remember, inputs=[state], outputs=[state])
    x = np.array([1.0, 2.0], dtype=np.float32)
    for _ in range(2):
        f(x)
        x[...] = 9.0
        assert state["last"].tolist() == [1.0, 2.0]
        x[...] = [1.0, 2.0]


def test_numpy_arguments_are_borrowed_not_copied():
    from ingot import _tree
    x = np.arange(4, dtype=np.float32)
    borrowed = _tree.Arguments((x, ml.ones(2), 3.0), lambda i: f"argument {i}", borrow=True)
    assert borrowed.borrowed == [True, False, True]
    assert np.shares_memory(np.asarray(borrowed.leaves[0]), x)  # read in place: no copy
    copied = _tree.Arguments((x,), lambda i: f"argument {i}")
    assert copied.borrowed is None and not np.shares_memory(np.asarray(copied.leaves[0]), x)


def test_disable_compile_runs_uncompiled():
    f = ml.compile(lambda x: x * 2.0)
    c0 = ml.compile_count()
    ml.disable_compile()
    try:
        assert f(ml.ones(2)).tolist() == [2, 2]
        assert ml.compile_count() == c0
    finally:
        ml.enable_compile()
    f(ml.ones(2))
    assert ml.compile_count() == c0 + 1


@pytest.mark.parametrize("read", [lambda a: a.item(), lambda a: a.tolist(), np.asarray, float, bool,
                                  lambda a: a.eval()], ids=["item", "tolist", "asarray", "float", "bool", "eval"])
def test_reading_values_while_tracing_is_a_clear_error(read):
    def peeks(x):
        read(ml.sum(x))
        return x

    with pytest.raises(ml.IngotError, match="placeholders during tracing"):
        ml.compile(peeks)(ml.ones(2))
    with pytest.raises(ml.IngotError, match="placeholders during tracing"):
        ml.grad(lambda x: ml.sum(peeks(x)))(ml.ones(2))


def test_an_array_that_escaped_a_trace_is_a_clear_error():
    saved = []
    f = ml.compile(lambda x: saved.append(x * 2.0) or x)
    f(ml.ones(3))
    with pytest.raises(ml.IngotError, match="was read after that trace ended"):
        saved[0].tolist()
    with pytest.raises(ml.IngotError, match="was used by a compiled function after that trace ended"):
        ml.compile(lambda x: x + saved[0], shapeless=True)(ml.ones(3))  # this one crashed the process


def test_exceptions_from_the_function_propagate_as_themselves_and_leave_the_state_alone():
    state = [ml.array(1.0)]
    original = state[0]

    def broken(x):
        state[0] = state[0] + x
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        ml.compile(broken, inputs=[state], outputs=[state])(ml.array(2.0))
    assert state[0] is original and original.item() == 1.0
    with pytest.raises(KeyError, match="boom"):
        ml.grad(broken)(ml.array(2.0))


def test_compile_dispatches_on_its_first_argument():
    pm = ml.compile(ml.ExampleMLP(), backend=ml.ReferenceBackend(), shapes={"input": [1, 784]})  # the model path
    assert isinstance(pm, ml.PhysicalModel)
    assert isinstance(ml.compile(scaled_tanh), ml.CompiledFunction)


def test_arguments_are_trees_and_their_structure_is_part_of_the_signature():
    """Nested dicts, lists, tuples (namedtuples too) of arrays, array data and numbers, as in JAX
    and MLX: the seed's ml.compile(f)(x, {"w": w}) form."""
    import collections

    def layer(x, p):
        return ml.tanh(x @ p["w"] + p["b"])

    f = ml.compile(layer)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3)).astype(np.float32)
    p = {"w": rng.normal(size=(3, 4)).astype(np.float32), "b": rng.normal(size=4).astype(np.float32)}
    c0 = ml.compile_count()
    assert_close(f(x, p), np.tanh(x @ p["w"] + p["b"]))
    assert_close(f(x, {"w": p["w"] * 2, "b": p["b"]}), np.tanh(x @ (p["w"] * 2) + p["b"]))  # new values: cached
    assert ml.compile_count() == c0 + 1
    f(x, {"b": p["b"], "w": p["w"]})  # another structure (key order): traced again
    assert ml.compile_count() == c0 + 2
    Pair = collections.namedtuple("Pair", "w b")
    g = ml.compile(lambda x, q: x @ q.w + q.b)
    assert_close(g(x, Pair(p["w"], p["b"])), x @ p["w"] + p["b"])
    scaled = ml.compile(lambda xs, s: [v * s for v in xs])
    out = scaled([x, (x,)[0]], 2.0)  # a number is a leaf like an array: 3.0 reuses the trace
    assert isinstance(out, list) and len(out) == 2
    c1 = ml.compile_count()
    assert_close(scaled([x, x], 3.0)[1], x * 3)
    assert ml.compile_count() == c1
    # grad inside compile, over a dict of parameters
    step = ml.compile(ml.grad(lambda q, x: ml.sum(layer(x, q))))
    grads = step(p, x)
    assert set(grads) == {"w", "b"} and grads["w"].shape == (3, 4)
    want_b = (1 - np.tanh(x @ p["w"] + p["b"]) ** 2).sum(0)
    np.testing.assert_allclose(grads["b"], want_b, rtol=1e-5, atol=1e-6)


def test_vjp_takes_trees_of_primals():
    a, b = np.ones(3, np.float32), np.arange(3, dtype=np.float32)
    outs, (pulled,) = ml.vjp(lambda q: [ml.sum(q["a"] * q["b"])], [{"a": a, "b": b}], [np.float32(2)])
    assert outs[0].tolist() == 3.0
    assert set(pulled) == {"a", "b"}
    assert pulled["a"].tolist() == [0, 2, 4] and pulled["b"].tolist() == [2, 2, 2]


def test_compile_usage_errors():
    with pytest.raises(TypeError, match="takes a logical model \\(ml.Model\\) or a function over ml.arrays, got int"):
        ml.compile(42)
    with pytest.raises(TypeError, match="compile\\(fn\\) takes no backend"):
        ml.compile(scaled_tanh, ml.CpuBackend())
    with pytest.raises(TypeError, match="unknown option 'shapless' \\(valid options for functions: shapeless, inputs, "
                                        "outputs\\)"):
        ml.compile(scaled_tanh, shapless=True)
    with pytest.raises(TypeError, match="shapeless must be True or False"):
        ml.compile(scaled_tanh, shapeless=1)
    with pytest.raises(TypeError, match="outputs is a tuple, which cannot be updated in place"):
        ml.compile(scaled_tanh, outputs=(ml.zeros(1),))
    with pytest.raises(TypeError, match="inputs\\[0\\]\\['lr'\\] is a float"):
        ml.compile(scaled_tanh, inputs=[{"lr": 0.1}])
    with pytest.raises(TypeError, match="takes positional ml.arrays only"):
        ml.compile(scaled_tanh)(ml.ones(1), scale=2)
    with pytest.raises(TypeError, match="the result of <lambda>\\(\\) is a float"):
        ml.compile(lambda x: 1.0)(ml.ones(1))
    # Not array data: the argument is named (nanobind's message listed only array()'s signature).
    with pytest.raises(ml.IngotError, match="compiled function scaled_tanh\\(\\): argument 1\\['w'\\]: Unsupported dtype "
                                           "object for ml.array"):
        ml.compile(scaled_tanh)(ml.ones(1), {"w": object()})
    with pytest.raises(ml.IngotError, match="vjp: cotangent\\[0\\]: Unsupported dtype object for ml.array"):
        ml.vjp(scaled_tanh, [ml.ones(1)], [object()])
    with pytest.raises(ml.IngotError, match=r"argument 0\['w'\]: Unsupported dtype complex128 for ml.array"):
        ml.grad(lambda p: ml.sum(p["w"]))({"w": np.ones(2, np.complex128)})


def test_calls_leave_no_reference_cycles_so_results_are_freed_when_dropped():
    f = ml.compile(lambda x: {"y": [x * 2.0]})
    x = ml.ones(3)
    f(x)
    gc.collect()
    gc.disable()
    try:
        f(x)
        ml.eval(f(x), [x])
        ml.value_and_grad(lambda p: ml.sum(p["w"] * x))({"w": x})
        assert gc.collect() == 0  # nothing was left for the collector: refcounting freed it all
    finally:
        gc.enable()
