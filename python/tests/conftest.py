"""Shared fixtures: one CpuBackend cache directory per test session, the backends to compare, and
helpers that compile one op or block and run it on every backend."""
from __future__ import annotations

import importlib.util
import os
import tempfile

import numpy as np
import pytest

import ingot as ml

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_JAX = importlib.util.find_spec("jax") is not None
HAVE_MLX = importlib.util.find_spec("mlx") is not None
HAVE_ML_DTYPES = importlib.util.find_spec("ml_dtypes") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="PyTorch is not installed (pip install torch)")
needs_jax = pytest.mark.skipif(not HAVE_JAX, reason="JAX is not installed (pip install jax)")
needs_mlx = pytest.mark.skipif(not HAVE_MLX, reason="MLX is not installed (pip install mlx[cpu])")
needs_ml_dtypes = pytest.mark.skipif(not HAVE_ML_DTYPES, reason="ml_dtypes is not installed")

_CACHE = tempfile.TemporaryDirectory(prefix="ingot-pytest-")


def cpu() -> ml.CpuBackend:
    """A CpuBackend whose libraries live in this session's cache directory."""
    return ml.CpuBackend(cache_dir=_CACHE.name)


_FRAMEWORK_BACKENDS = {"jax": (HAVE_JAX, "JAX is not installed (pip install jax): JaxBackend not compared"),
                       "torch": (HAVE_TORCH, "PyTorch is not installed (pip install torch): TorchBackend not compared"),
                       "mlx": (HAVE_MLX, "MLX is not installed (pip install mlx[cpu]): MlxBackend not compared")}

# Every backend: tests parametrized over these skip, with the reason, where a framework is missing.
BACKEND_NAMES = ["reference", "cpu", "numpy", "jax", "torch", "mlx"]


def available_backend_names():
    return [n for n in BACKEND_NAMES if _FRAMEWORK_BACKENDS.get(n, (True, ""))[0]]


def backend(name: str):
    """A fresh backend by name; skips the calling test when its framework is not installed."""
    installed, reason = _FRAMEWORK_BACKENDS.get(name, (True, ""))
    if not installed:
        pytest.skip(reason)
    return {"reference": ml.ReferenceBackend, "cpu": cpu, "numpy": ml.NumpyBackend, "jax": ml.JaxBackend,
            "torch": ml.TorchBackend, "mlx": ml.MlxBackend}[name]()


def op_model(op: str, inputs, outputs=("output",), **attrs) -> ml.Model:
    """A model holding one primitive whose input terminals are wires of the same names and whose
    outputs are exposed."""
    m = ml.Model()
    links = {k: k for k in inputs}
    links.update({o: ml.IOKey(o, expose=True) for o in outputs})
    m |= ml.Model.primitive(op, list(inputs), list(outputs), **attrs)(**links)
    return m


def run(model: ml.Model, backend_obj, inputs: dict, params=None, **options):
    """Compiles `model` with the inputs' shapes and dtypes as data and evaluates it once."""
    shapes = {k: list(np.shape(v)) for k, v in inputs.items()}
    types = {k: str(np.asarray(v).dtype) for k, v in inputs.items()}
    pm = ml.compile(model, backend_obj, shapes={**shapes, **options.pop("shapes", {})},
                    types={**types, **options.pop("types", {})}, data_keys=list(inputs), **options)
    return pm.evaluate(params if params is not None else pm.randomize_params(0), inputs)


def run_op(backend_obj, op: str, inputs: dict, outputs=("output",), **attrs):
    return run(op_model(op, inputs, outputs, **attrs), backend_obj, inputs)


def tolerance(dtype) -> dict:
    """Tolerances per dtype: float32 math differs by a few ulp between NumPy and ingot's kernels
    (vectorized exp/tanh/erf: <= 2.3 ulp); float64 is tighter; half types round once more."""
    name = np.dtype(dtype).name
    return {"float64": dict(rtol=1e-9, atol=1e-12), "float16": dict(rtol=2e-3, atol=2e-3),
            "bfloat16": dict(rtol=2e-2, atol=2e-2)}.get(name, dict(rtol=1e-5, atol=1e-6))


def assert_close(actual, expected, dtype=None):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   **tolerance(dtype or actual.dtype))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def fresh_hot_path():
    """The hot-path auto-compiler from a clean state, on the reference backend, and reset after."""
    ml.set_compile_config(backend=ml.ReferenceBackend())
    ml.reset_auto_compile()
    yield
    ml.reset_compile_config()
    ml.reset_auto_compile()


@pytest.fixture
def tmp_cache(tmp_path):
    return str(tmp_path / "cache")


os.environ.setdefault("INGOT_CACHE_DIR", _CACHE.name)


def onnx_runner_feed(proto):
    """The inputs ONNX's test runner feeds a real model (onnx/backend/test/data/light): each graph
    input that is no initializer, of its declared shape (unknown dims 1), holding arange(n) / n
    in float32."""
    init = {t.name for t in proto.graph.initializer}
    feed = {}
    for i in proto.graph.input:
        if i.name in init:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in i.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feed[i.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feed
