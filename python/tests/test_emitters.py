"""Framework emitters: readable generated source (generated identifiers only), file_path, clear
errors for a missing framework or an op without an emitter. Their numbers are checked against
NumPy in test_ops.py / test_zoo.py (backend names numpy, jax, torch)."""
from __future__ import annotations

import ast
import json
import sys

import numpy as np
import pytest

import ingot as ml
from ingot.emitters import emit_source
from conftest import needs_jax, needs_mlx, needs_torch

EVIL = 'x"); __import__("os").system("echo pwned")  #\n\u00e9'


def evil_model():
    m = ml.Model()
    m |= ml.Linear(dimension=3)(input=ml.IOKey(EVIL, shape=[2, 4]), output=ml.IOKey("out\n" + EVIL, expose=True))
    return m


def test_numpy_source_is_readable_and_uses_generated_names(tmp_path):
    path = tmp_path / "model.py"
    pm = ml.compile(evil_model(), ml.NumpyBackend(file_path=path))
    source = path.read_text()
    assert source == pm.source
    assert "def forward(inputs, constants):" in source and "ops.matmul(" in source
    tree = ast.parse(source)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert all(n in {"inputs", "constants", "ops"} or (n[0] == "v" and n[1:].isdigit()) for n in names), names
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert not any("pwned" in s for s in strings)
    assert all(line.isascii() for line in source.splitlines())
    assert source.count("\n") == len(source.splitlines())  # names never break a line
    x = np.ones((2, 4), np.float32)
    p = pm.randomize_params()
    ref = ml.compile(evil_model(), ml.ReferenceBackend()).evaluate(p, {EVIL: x})
    out = pm.evaluate(p, {EVIL: x})
    np.testing.assert_allclose(out["out\n" + EVIL], ref["out\n" + EVIL], rtol=1e-6)


def test_compile_option_file_path_writes_the_source(tmp_path):
    m = ml.Model()
    m += ml.Gelu()
    ml.compile(m, ml.NumpyBackend(), shapes={"input": [3]}, file_path=tmp_path / "gelu.py")
    assert "ops.gelu(" in (tmp_path / "gelu.py").read_text()


@pytest.mark.parametrize("backend_cls,module", [(ml.TorchBackend, "torch"), (ml.JaxBackend, "jax"), (ml.NumpyBackend, "numpy")])
def test_missing_framework_is_a_clear_error(backend_cls, module, monkeypatch):
    m = ml.Model()
    m += ml.Relu()
    for name in [k for k in sys.modules if k == module or k.startswith(module + ".")]:
        if name != "numpy" and not name.startswith("numpy."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # `import <module>` now raises ImportError
    for k in ("ingot.emitters.torch_ops", "ingot.emitters.jax_ops"):
        monkeypatch.delitem(sys.modules, k, raising=False)
    with pytest.raises(ml.IngotError, match=f"needs '{module}', which is not installed"):
        ml.compile(m, backend_cls(), shapes={"input": [3]})


def test_op_without_emitter_is_named():
    graph = {"values": [{"id": 0, "name": "x", "kind": "input", "dtype": "float32", "shape": [2], "producer": -1},
                        {"id": 1, "name": "", "kind": "intermediate", "dtype": "float32", "shape": [2], "producer": 0}],
             "nodes": [{"id": 0, "op": "frobnicate", "inputs": [0], "outputs": [1], "attrs": {}, "scope": ""}],
             "outputs": [{"name": "y", "value": 1}]}
    with pytest.raises(NotImplementedError, match="no emitter for op 'frobnicate'"):
        emit_source(graph, "numpy")


def test_every_catalogue_op_is_emitted_or_named_in_an_error():
    from ingot.emitters import SUPPORTED_OPS, numpy_ops

    catalogue = set(ml._ingot.op_names())
    assert SUPPORTED_OPS <= catalogue
    for op in SUPPORTED_OPS:
        assert callable(getattr(numpy_ops, op)), op
    for op in catalogue - SUPPORTED_OPS:  # backward-graph ops (families.h marks them "(grad)")
        graph = {"values": [{"id": 0, "name": "x", "kind": "input", "dtype": "float32", "shape": [2], "producer": -1},
                            {"id": 1, "name": "", "kind": "intermediate", "dtype": "float32", "shape": [2], "producer": 0}],
                 "nodes": [{"id": 0, "op": op, "inputs": [0], "outputs": [1], "attrs": {}, "scope": ""}],
                 "outputs": [{"name": "y", "value": 1}]}
        with pytest.raises(NotImplementedError, match=f"no emitter for op '{op}'"):
            emit_source(graph, "numpy")


def test_numpy_backend_gradients_come_from_ingots_backward_graph(tmp_path):
    path = tmp_path / "mlp.py"
    pm = ml.compile(ml.ExampleMLP(), ml.NumpyBackend(file_path=str(path)), shapes={"input": [2, 784]})
    ref = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [2, 784]})
    p = pm.randomize_params()
    x = {"input": np.random.default_rng(0).normal(size=(2, 784)).astype(np.float32)}
    seed = {"output": np.ones((2, 10), np.float32)}
    assert pm.gradient_source is None
    _, got = pm.evaluate(p, x, output_gradients=seed)
    _, want = ref.evaluate(p, x, output_gradients=seed)
    assert set(got) == set(want) == set(p)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)
    assert "def forward" in path.read_text() and "grad" not in path.read_text()  # the model's source stays
    assert (tmp_path / "mlp_grad.py").read_text() == pm.gradient_source
    assert '# output "grad:linear_0.weight"' in pm.gradient_source


def test_gradient_modes_are_checked():
    with pytest.raises(ml.IngotError, match=r"NumpyBackend\(gradients='framework'\): expected one of 'ingot'"):
        ml.NumpyBackend(gradients="framework")
    with pytest.raises(ml.IngotError, match=r"TorchBackend\(gradients='autograd'\): expected one of 'framework', 'ingot'"):
        ml.TorchBackend(gradients="autograd")
    assert repr(ml.JaxBackend()) == "JaxBackend(gradients='framework')"


def test_jit_false_lowers_on_first_evaluate():
    m = ml.Model()
    m += ml.Sigmoid()
    pm = ml.compile(m, ml.NumpyBackend(), shapes={"input": [2]}, jit=False)
    assert pm.source is None
    np.testing.assert_allclose(pm.evaluate({}, {"input": np.zeros(2, np.float32)})["output"], [0.5, 0.5])
    assert "ops.sigmoid(" in pm.source


@needs_jax
def test_jax_source_runs_under_jax():
    pm = ml.compile(ml.ExampleMLP(), ml.JaxBackend(), shapes={"input": [2, 784]})
    assert "from ingot.emitters import jax_ops as ops" in pm.source
    p = pm.randomize_params()
    x = np.random.default_rng(0).normal(size=(2, 784)).astype(np.float32)
    ref = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [2, 784]}).evaluate(p, {"input": x})
    np.testing.assert_allclose(pm.evaluate(p, {"input": x})["output"], ref["output"], rtol=1e-4, atol=1e-5)


@needs_jax
def test_jax_backend_runs_under_jax_jit_by_default():
    """jit=True (the default) wraps the generated function in jax.jit, with jax_options passed
    through; jit=False runs it eagerly; both give the reference's values."""
    x = np.random.default_rng(1).normal(size=(2, 784)).astype(np.float32)
    ref = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [2, 784]})
    p = ref.randomize_params()
    want = ref.evaluate(p, {"input": x})["output"]
    for options in ({}, {"jit": False}, {"jax_options": {"inline": True}}, {"jit_options": {"keep_unused": True}}):
        pm = ml.compile(ml.ExampleMLP(), ml.JaxBackend(), shapes={"input": [2, 784]}, **options)
        np.testing.assert_allclose(pm.evaluate(p, {"input": x})["output"], want, rtol=1e-4, atol=1e-5)
        assert pm._emitter.runner.jitted == options.get("jit", True), options
        assert hasattr(pm._emitter.runner._forward, "lower") == options.get("jit", True)  # what jax.jit returns


@needs_torch
def test_torch_backend_runs_under_torch_compile_by_default():
    """jit=True: torch.compile (torch_options passed through: here the 'eager' backend, which
    skips code generation); the random ops still give ingot's streams inside it."""
    m = ml.Model()
    m += ml.Linear(8, 4)(input="x")
    m += ml.Dropout(p=0.5, seed=3)(output=ml.IOKey("y", expose=True))
    x = np.random.default_rng(2).normal(size=(3, 8)).astype(np.float32)
    ref = ml.compile(m, ml.ReferenceBackend(), shapes={"x": [3, 8]})
    p = ref.randomize_params()
    want = ref.evaluate(p, {"x": x})["y"]
    for options in ({"torch_options": {"backend": "eager"}}, {"jit": False}):
        pm = ml.compile(m, ml.TorchBackend(), shapes={"x": [3, 8]}, **options)
        np.testing.assert_allclose(pm.evaluate(p, {"x": x})["y"], want, rtol=1e-5, atol=1e-6)
        compiled = hasattr(pm._emitter.runner._forward, "_torchdynamo_orig_callable")
        assert compiled == options.get("jit", True), options


@needs_mlx
def test_mlx_backend_runs_under_mx_compile_and_differentiates_with_mx_vjp():
    """MlxBackend: the generated MLX source under mx.compile (jit=True) or eagerly, the reference's
    values either way, and gradients from mx.vjp (the default) or ingot's backward graph."""
    x = np.random.default_rng(4).normal(size=(2, 784)).astype(np.float32)
    ref = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [2, 784]})
    p = ref.randomize_params()
    seed = {"output": np.ones((2, 10), np.float32)}
    want, want_grads = ref.evaluate(p, {"input": x}, output_gradients=seed)
    for backend, options in ((ml.MlxBackend(), {}), (ml.MlxBackend(), {"jit": False}),
                             (ml.MlxBackend(gradients="ingot"), {"mlx_options": {"shapeless": False}})):
        pm = ml.compile(ml.ExampleMLP(), backend, shapes={"input": [2, 784]}, **options)
        out, grads = pm.evaluate(p, {"input": x}, output_gradients=seed)
        assert "from ingot.emitters import mlx_ops as ops" in pm.source
        np.testing.assert_allclose(out["output"], want["output"], rtol=1e-4, atol=1e-5)
        for k in want_grads:
            np.testing.assert_allclose(grads[k], want_grads[k], rtol=1e-4, atol=1e-5, err_msg=k)
        assert pm._emitter.runner.jitted == options.get("jit", True), options


def test_jit_options_are_checked():
    m = ml.Model()
    m += ml.Sigmoid()
    with pytest.raises(TypeError, match="torch_options is for TorchBackend, not JaxBackend"):
        ml.compile(m, ml.JaxBackend(), torch_options={"mode": "max-autotune"})
    with pytest.raises(TypeError, match="jit_options is for the JAX, PyTorch and MLX backends .* not CpuBackend"):
        ml.compile(m, ml.CpuBackend(), jit_options={"mode": "x"})
    with pytest.raises(TypeError, match="torch_options has an unknown key 'donate_argnums' \\(valid for torch: backend, "
                                        "mode, fullgraph, dynamic, options, disable\\)"):
        ml.compile(m, ml.TorchBackend(), torch_options={"donate_argnums": (0,)})
    with pytest.raises(TypeError, match="jit_options has an unknown key 'mode' \\(valid for numpy: none"):
        ml.compile(m, ml.NumpyBackend(), jit_options={"mode": "x"})
    with pytest.raises(TypeError, match="jax_options must be a dict"):
        ml.compile(m, ml.JaxBackend(), jax_options=["inline"])


def test_graph_json_is_what_emitters_read():
    pm = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [1, 784]})
    graph = json.loads(pm.graph_json())
    assert graph["format"] == "ingot.graph" and "def forward" in emit_source(graph, "numpy")


def test_elementwise_ops_come_from_their_definitions():
    """An elementwise op is one definition (ElementwiseForms in src/ir/op_registry.h): the emitters
    build every op whose definition gives a Python form from that form, and ml.<op> is bound from
    the catalogue, so atan (defined only in src/ops/unary.cpp) needs no line in Python."""
    from ingot.emitters import SUPPORTED_OPS, numpy_ops
    from ingot.emitters._catalogue import forms, python_ops

    table = forms()
    assert table == ml._ingot.elementwise_forms()
    assert table["atan"] == {"kind": "unary_float", "arity": 1, "python": "atan(x)", "onnx": "Atan"}
    assert table["sub"]["python"] == "subtract(a, b)" and table["sub"]["kind"] == "binary"
    assert python_ops() <= SUPPORTED_OPS
    for op in python_ops():
        assert callable(getattr(numpy_ops, op)), op
    assert numpy_ops.atan.__doc__.endswith("(the op's Python form)")  # built, not written
    x = np.array([-2.0, 0.5, 3.0], np.float32)
    np.testing.assert_allclose(numpy_ops.atan(x), np.arctan(x), rtol=1e-6)
    assert numpy_ops.atan(np.array([1], np.int32)).dtype == np.float32  # integers compute in float32
    np.testing.assert_allclose(np.asarray(ml.atan(ml.array(x))), np.arctan(x), rtol=1e-6)
    assert "atan" in ml.__all__
    with pytest.raises(TypeError, match="takes 1 operand"):
        numpy_ops.atan(x, x)
