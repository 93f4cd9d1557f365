"""Control flow in the framework emitters: if, while and scan nodes generated as Python control
flow (NumPy, PyTorch, MLX) or as jax.lax.cond / while_loop / scan (JAX), each subgraph a nested
function. Every case runs against the reference backend with the same parameters: the seeds' If
and While examples, a scan RNN both ways, an if nested in a scan body, and gradients through
scan, if and a bounded while, from ingot's backward graph (gradients="ingot", whose subgraphs
nest an if in a scan) and from the framework's autodiff."""
from __future__ import annotations

import ast
import re

import numpy as np
import pytest

import ingot as ml
from conftest import _FRAMEWORK_BACKENDS, needs_jax, needs_mlx, needs_torch
from control_flow_models import rnn_scan, seed_if_model, seed_while_model

FRAMEWORKS = ["numpy", "jax", "torch", "mlx"]
BACKENDS = {"numpy": ml.NumpyBackend, "jax": ml.JaxBackend, "torch": ml.TorchBackend, "mlx": ml.MlxBackend}
# (framework, gradients): ingot's backward graph run in the framework, or the framework's autodiff.
GRADIENT_MODES = [("numpy", "ingot"), ("jax", "framework"), ("jax", "ingot"), ("torch", "framework"),
                  ("torch", "ingot"), ("mlx", "framework"), ("mlx", "ingot")]
EVIL = 'x"); __import__("os").system("echo pwned")  #\n\u00e9'


def compile_for(framework, model, gradients=None, **options):
    """`model` compiled for an emitter backend; skips where its framework is not installed.
    PyTorch runs under torch.compile with its 'eager' backend here (dynamo traces the generated
    function and breaks the graph at each branch, without inductor's code generation for every
    piece); test_torch_compile_with_its_default_backend covers inductor."""
    installed, reason = _FRAMEWORK_BACKENDS.get(framework, (True, ""))
    if not installed:
        pytest.skip(reason)
    if framework == "torch" and "jit" not in options:
        options["torch_options"] = {"backend": "eager"}
    return ml.compile(model, BACKENDS[framework](gradients=gradients), **options)


def tolerances(framework):
    # MLX computes float64 at float32's precision on the CPU: it runs in float32, to looser bounds.
    return dict(rtol=1e-4, atol=1e-5) if framework == "mlx" else dict(rtol=1e-5, atol=1e-6)


def assert_same(got, want, framework, what=""):
    assert set(got) == set(want), what
    for k in want:
        np.testing.assert_allclose(np.asarray(got[k]), np.asarray(want[k]), err_msg=f"{what} {k}", **tolerances(framework))


# -- the models (control_flow_models.py), and the RNN's last state through an If into a loss ---

def scan_then_if_model(sequence="xs", nested_if=False):
    """The RNN's last state through an if on `flip` (negated or not), summed into `loss`."""
    model = rnn_scan(sequence=sequence, nested_if=nested_if)
    model |= ml.If("flip", ml.Model.primitive("neg", ["input"])(input="last", output="z"),
                   ml.Identity()(input="last", output="z"))
    model |= ml.Model.primitive("sum", ["input"])(input="z", output=ml.IOKey("loss", expose=True))
    return model


SCAN_SHAPES = {"xs": [6, 2, 3], "h0": [2, 5]}


def scan_inputs(dtype=np.float32, steps=6):
    rng = np.random.default_rng(4)
    return {"xs": rng.standard_normal((steps, 2, 3)).astype(dtype), "h0": rng.standard_normal((2, 5)).astype(dtype)}


# -- forward values against the reference backend ----------------------------------------------

@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_seeds_if_example_takes_both_branches(framework):
    options = dict(shapes={"input": [8, 32]}, types={"is_training": ml.bool}, dynamic_control_flow=True)
    ref = ml.compile(seed_if_model(), ml.ReferenceBackend(), **options)
    pm = compile_for(framework, seed_if_model(), **options)
    params = ref.randomize_params(seed=1)
    x = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
    for training in (False, True):  # dropout draws ingot's counter-based stream in every framework
        data = {"input": x, "is_training": np.array(training)}
        assert_same(pm.evaluate(params, data), ref.evaluate(params, data), framework, f"is_training={training}")
    assert re.search(r"^    if ops\.predicate\(v\d+\):$" if framework != "jax" else r"ops\.lax\.cond\(ops\.predicate\(",
                     pm.source, re.M), pm.source


@pytest.mark.parametrize("max_iterations", [None, 3])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_seeds_while_example(framework, max_iterations):
    options = dict(shapes={"initial_state": [4, 16], "max_steps": []}, dynamic_control_flow=True)
    ref = ml.compile(seed_while_model(max_iterations), ml.ReferenceBackend(), **options)
    pm = compile_for(framework, seed_while_model(max_iterations), **options)
    params = ref.randomize_params(seed=2)
    s0 = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    for steps in (0, 1, 5):  # with max_iterations = 3, five steps stop at three
        data = {"initial_state": s0, "max_steps": np.float32(steps)}
        assert_same(pm.evaluate(params, data), ref.evaluate(params, data), framework, f"max_steps={steps}")
    if framework == "jax":
        assert "ops.lax.while_loop(" in pm.source
        assert ("(i < 3)" in pm.source) == (max_iterations == 3)
    else:
        assert re.search(r"^    while .*ops\.predicate\(fn_\d+\(", pm.source, re.M), pm.source
        assert ("< 3 and ops.predicate(" in pm.source) == (max_iterations == 3)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_scan_rnn(framework, reverse):
    ref = ml.compile(rnn_scan(reverse), ml.ReferenceBackend(), shapes=SCAN_SHAPES)
    pm = compile_for(framework, rnn_scan(reverse), shapes=SCAN_SHAPES)
    params = ref.randomize_params(seed=3)
    assert_same(pm.evaluate(params, scan_inputs()), ref.evaluate(params, scan_inputs()), framework)
    if framework == "jax":
        assert "ops.lax.scan(" in pm.source and ("reverse=True" in pm.source) == reverse
    else:
        assert re.search(r"^    for t_\d+ in %s\(v\d+\.shape\[0\]\)" % ("reversed\\(range" if reverse else "range"),
                         pm.source, re.M), pm.source
        assert "ops.stack_steps(" in pm.source


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_scan_over_zero_steps(framework):
    shapes = {"xs": [0, 2, 3], "h0": [2, 5]}
    ref = ml.compile(rnn_scan(), ml.ReferenceBackend(), shapes=shapes, outputs=["hs", "last"])
    pm = compile_for(framework, rnn_scan(), shapes=shapes, outputs=["hs", "last"])
    params = ref.randomize_params(seed=3)
    got, want = pm.evaluate(params, scan_inputs(steps=0)), ref.evaluate(params, scan_inputs(steps=0))
    assert np.asarray(got["hs"]).shape == (0, 2, 5)
    assert_same(got, want, framework)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_if_nested_in_a_scan_body(framework):
    options = dict(shapes=SCAN_SHAPES, types={"flip": ml.bool}, dynamic_control_flow=True)
    ref = ml.compile(scan_then_if_model(nested_if=True), ml.ReferenceBackend(), **options)
    pm = compile_for(framework, scan_then_if_model(nested_if=True), **options)
    assert "        then graph(" in ref.graph_text()  # the if sits in the scan's body
    params = ref.randomize_params(seed=5)
    for flip in (False, True):
        data = dict(scan_inputs(), flip=np.array(flip))
        assert_same(pm.evaluate(params, data), ref.evaluate(params, data), framework, f"flip={flip}")
    # The body's function defines the branches' functions inside itself, one level deeper.
    nested = r"^        def fn_\d+\(v0\):  # the then graph of if node \d+$"
    assert re.search(nested, pm.source, re.M), pm.source
    if framework == "jax":
        assert re.search(r"^        \[v\d+\] = ops\.lax\.cond\(", pm.source, re.M), pm.source


# -- gradients against the reference backend's -------------------------------------------------

def float_types(dtype, *names):
    return {n: dtype for n in names}


def gradient_options(dtype, **extra):
    types = float_types(dtype, "xs", "h0", "scan_0.body.linear_0.weight", "scan_0.body.linear_1.weight",
                        "scan_0.body.linear_1.bias")
    return dict(shapes={"xs": [3, 2, 3], "h0": [2, 5]}, types=dict(types, flip=ml.bool), dynamic_control_flow=True,
                **extra)


def gradient_case(framework, gradients, dtype, nested_if=False):
    """The reference and the emitter backend's compiles of scan_then_if_model, and parameters."""
    ref = ml.compile(scan_then_if_model(nested_if=nested_if), ml.ReferenceBackend(), **gradient_options(dtype))
    pm = compile_for(framework, scan_then_if_model(nested_if=nested_if), gradients=gradients,
                     **gradient_options(dtype))
    return ref, pm, {k: np.asarray(v) for k, v in ref.randomize_params(seed=6).items()}


@pytest.mark.parametrize("framework, gradients", GRADIENT_MODES, ids=[f"{f}-{g}" for f, g in GRADIENT_MODES])
def test_gradients_through_scan_and_if(framework, gradients):
    dtype = ml.float32 if framework == "mlx" else ml.float64
    ref, pm, params = gradient_case(framework, gradients, dtype)
    seed = {"loss": np.asarray(1.5, dtype)}
    for flip in (False, True):
        data = dict(scan_inputs(dtype, steps=3), flip=np.array(flip))
        want_out, want = ref.evaluate(params, data, output_gradients=seed)
        got_out, got = pm.evaluate(params, data, output_gradients=seed)
        assert_same(got_out, want_out, framework, f"flip={flip}")
        assert_same(got, want, framework, f"flip={flip}")
        if framework != "mlx":  # float64: tighter than float32's rounding
            for k in want:
                np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-12, err_msg=k)
    if gradients == "ingot":  # ingot's backward graph of a scan is a scan the other way round
        assert re.search(r"for t_\d+ in reversed\(range\(" if framework != "jax" else r"ops\.lax\.scan\(.*reverse=True",
                         pm.gradient_source), pm.gradient_source


def finite_differences(ref, params, data, scale, eps=1e-6):
    """scale * d(loss)/d(every parameter entry) by central differences of the reference's forward."""
    grads = {}
    for name, p in params.items():
        g = np.zeros(p.shape)
        for i in np.ndindex(p.shape):
            plus, minus = dict(params), dict(params)
            plus[name], minus[name] = p.copy(), p.copy()
            plus[name][i] += eps
            minus[name][i] -= eps
            g[i] = (float(ref.evaluate(plus, data)["loss"]) - float(ref.evaluate(minus, data)["loss"])) / (2 * eps)
        grads[name] = scale * g
    return grads


@pytest.mark.parametrize("framework, gradients", GRADIENT_MODES, ids=[f"{f}-{g}" for f, g in GRADIENT_MODES])
def test_gradients_through_an_if_nested_in_a_scan(framework, gradients):
    """Gradients of the nested graph against central finite differences of the reference
    backend's forward (float64; MLX runs in float32 against them)."""
    dtype = ml.float32 if framework == "mlx" else ml.float64
    _, pm, params = gradient_case(framework, gradients, dtype, nested_if=True)
    ref = ml.compile(scan_then_if_model(nested_if=True), ml.ReferenceBackend(), **gradient_options(ml.float64))
    for flip in (False, True):
        data = dict(scan_inputs(np.float64, steps=3), flip=np.array(flip))
        want = finite_differences(ref, {k: v.astype(np.float64) for k, v in params.items()}, data, 1.5)
        cast = {k: v.astype(dtype) if k != "flip" else v for k, v in data.items()}
        _, got = pm.evaluate(params, cast, output_gradients={"loss": np.asarray(1.5, dtype)})
        for k in want:
            np.testing.assert_allclose(got[k], want[k], err_msg=f"flip={flip} {k}",
                                       **(dict(rtol=1e-3, atol=1e-4) if framework == "mlx" else dict(rtol=1e-6, atol=1e-8)))


@pytest.mark.parametrize("framework, gradients", GRADIENT_MODES, ids=[f"{f}-{g}" for f, g in GRADIENT_MODES])
def test_gradients_through_a_bounded_while(framework, gradients):
    """ingot differentiates a while with max_iterations as a scan of that many steps whose body
    branches on whether the loop still runs (an if in a scan); torch.autograd and mx.vjp follow
    the Python loop; jax.vjp cannot reverse lax.while_loop and the error says what to use."""
    options = dict(shapes={"initial_state": [4, 16], "max_steps": []}, dynamic_control_flow=True)
    ref = ml.compile(seed_while_model(4, loss=True), ml.ReferenceBackend(), **options)
    pm = compile_for(framework, seed_while_model(4, loss=True), gradients=gradients, **options)
    params = ref.randomize_params(seed=7)
    s0 = np.random.default_rng(8).standard_normal((4, 16)).astype(np.float32)
    seed = {"loss": np.float32(1.0)}
    for steps in (0, 2, 6):  # none, fewer than the bound, cut off by it
        data = {"initial_state": s0, "max_steps": np.float32(steps)}
        want_out, want = ref.evaluate(params, data, output_gradients=seed)
        if (framework, gradients) == ("jax", "framework"):
            with pytest.raises(ml.IngotError, match=r"lax\.while_loop.*gradients='ingot'"):
                pm.evaluate(params, data, output_gradients=seed)
            continue
        got_out, got = pm.evaluate(params, data, output_gradients=seed)
        assert_same(got_out, want_out, framework, f"max_steps={steps}")
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=f"max_steps={steps} {k}")
    if gradients == "ingot":
        nested_if = r"^        v\d+, v\d+ = ops\.lax\.cond\(" if framework == "jax" else r"^        if ops\.predicate\("
        assert re.search(nested_if, pm.gradient_source, re.M), pm.gradient_source


# -- the generated source and the frameworks' compilers ----------------------------------------

GENERATED = re.compile(r"v\d+|fn_\d+|t_\d+|i_\d+|ys_\d+")
HELPERS = {"inputs", "constants", "ops", "range", "reversed", "carry", "xs_t", "results", "loop", "carried", "i", "_"}


@pytest.mark.parametrize("framework", ["numpy", "jax"])
def test_the_source_uses_generated_names_and_escapes_user_names(framework):
    model = scan_then_if_model(sequence=EVIL)
    shapes = {EVIL: [6, 2, 3], "h0": [2, 5]}
    pm = compile_for(framework, model, shapes=shapes, types={"flip": ml.bool}, dynamic_control_flow=True)
    source = pm.source
    tree = ast.parse(source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in n.args}
    names |= {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert all(n in HELPERS or n == "forward" or GENERATED.fullmatch(n) for n in names), names
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not any("pwned" in s for s in strings)
    assert all(line.isascii() for line in source.splitlines())
    ref = ml.compile(model, ml.ReferenceBackend(), shapes=shapes, types={"flip": ml.bool}, dynamic_control_flow=True)
    params = ref.randomize_params(seed=9)
    data = {EVIL: scan_inputs()["xs"], "h0": scan_inputs()["h0"], "flip": np.array(True)}
    assert_same(pm.evaluate(params, data), ref.evaluate(params, data), framework)


@needs_torch
def test_torch_compile_with_its_default_backend():
    """jit=True with torch.compile's default (inductor): the branches and the data-dependent
    while break dynamo's graph and run in Python between compiled pieces; the values hold."""
    options = dict(shapes={"initial_state": [4, 16], "max_steps": []}, dynamic_control_flow=True)
    ref = ml.compile(seed_while_model(), ml.ReferenceBackend(), **options)
    pm = ml.compile(seed_while_model(), ml.TorchBackend(), **options)
    params = ref.randomize_params(seed=2)
    data = {"initial_state": np.ones((4, 16), np.float32), "max_steps": np.float32(3)}
    assert_same(pm.evaluate(params, data), ref.evaluate(params, data), "torch")
    assert pm._emitter.runner.jitted


@needs_mlx
def test_mlx_runs_branching_graphs_eagerly_and_scans_under_mx_compile():
    """mx.compile traces without values, so a graph whose Python code branches on an array (if,
    while) runs eagerly; a scan's loop over a static length still compiles."""
    scan = ml.compile(rnn_scan(), ml.MlxBackend(), shapes=SCAN_SHAPES)
    branch = ml.compile(seed_if_model(), ml.MlxBackend(), shapes={"input": [8, 32]}, types={"is_training": ml.bool},
                        dynamic_control_flow=True)
    scan.evaluate(scan.randomize_params(), scan_inputs())
    branch.evaluate(branch.randomize_params(), {"input": np.ones((8, 32), np.float32), "is_training": np.array(False)})
    assert scan._emitter.runner.jitted and not branch._emitter.runner.jitted


@needs_jax
def test_jax_backend_runs_control_flow_under_jax_jit():
    pm = ml.compile(rnn_scan(), ml.JaxBackend(), shapes=SCAN_SHAPES)
    pm.evaluate(pm.randomize_params(), scan_inputs())
    assert pm._emitter.runner.jitted and hasattr(pm._emitter.runner._forward, "lower")  # what jax.jit returns


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_ops_are_functions_over_python_callables_too(framework):
    """ops.<op> exists for every op the emitters support: getattr(ops, "scan") runs a body
    function over the leading axis (Python loops, or jax.lax for JAX)."""
    installed, reason = _FRAMEWORK_BACKENDS.get(framework, (True, ""))
    if not installed:
        pytest.skip(reason)
    import importlib

    ops = importlib.import_module(f"ingot.emitters.{framework}_ops")
    with ops.scope():
        xs = ops.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2))
        h0 = ops.from_numpy(np.zeros(2, np.float32))
        two = ops.from_numpy(np.float32(2))
        last, ys = ops.scan(lambda h, x, k: [h + k * x, h], h0, xs, two, num_carry=1, num_xs=1, reverse=1)
        np.testing.assert_allclose(ops.to_numpy(last), [12, 18])
        np.testing.assert_allclose(ops.to_numpy(ys), [[12, 16], [8, 10], [0, 0]])  # in index order
        count = getattr(ops, "while")(lambda i, n: [i < n], lambda i, n: [i + 1], two * 0, two * 5, num_invariant=1,
                                      max_iterations=3)
        np.testing.assert_allclose(ops.to_numpy(count[0]), 3)
        (picked,) = getattr(ops, "if")(two * 0, lambda a: [a * 2], lambda a: [a - 1], two)
        np.testing.assert_allclose(ops.to_numpy(picked), 1)
