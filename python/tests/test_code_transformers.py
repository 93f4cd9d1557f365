"""compile(..., code_transformers=[fn]): functions from source text to source text applied to the
code a backend generates (the CPU backend's C++, the emitters' Python module) before it is built
or run; file_path writes the result. Each test observes the effect on the numbers, not only on
the text, and the bad values are rejected with clear errors."""
from __future__ import annotations

import numpy as np
import pytest

import ingot as ml


def exp_model():
    m = ml.Model()
    m |= ml.Model.primitive("exp", ["in0"], ["output"])(in0="x", output=ml.IOKey("y", expose=True))
    return m


X = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}


def test_cpu_backend_builds_the_transformed_source(tmp_path):
    seen = []

    def exp_becomes_tanh(source):
        seen.append(source)
        assert "ig_vexp(" in source  # float32 exp calls the prelude's vector math
        return source.replace("ig_vexp(static_cast<float>", "ig_vtanh(static_cast<float>") + "\n// transformed\n"

    path = tmp_path / "m.cpp"
    pm = ml.compile(exp_model(), ml.CpuBackend(), shapes={"x": [3, 4]}, file_path=str(path),
                    code_transformers=[exp_becomes_tanh])
    np.testing.assert_allclose(pm.evaluate({}, X)["y"], np.tanh(X["x"]), rtol=1e-6)
    assert len(seen) == 1
    assert path.read_text().endswith("// transformed\n")  # file_path writes what was built
    # Untransformed, the same model is exp again (the cache keys the transformed source).
    plain = ml.compile(exp_model(), ml.CpuBackend(), shapes={"x": [3, 4]})
    np.testing.assert_allclose(plain.evaluate({}, X)["y"], np.exp(X["x"]), rtol=1e-6)


def test_transformers_run_in_order():
    order = []

    def tag(name):
        def fn(source):
            order.append(name)
            return source + f"\n// {name}\n"
        return fn

    pm = ml.compile(exp_model(), ml.CpuBackend(), shapes={"x": [3, 4]}, code_transformers=[tag("a"), tag("b")])
    assert order == ["a", "b"]
    np.testing.assert_allclose(pm.evaluate({}, X)["y"], np.exp(X["x"]), rtol=1e-6)


def test_numpy_backend_runs_the_transformed_module(tmp_path):
    path = tmp_path / "m.py"
    pm = ml.compile(exp_model(), ml.NumpyBackend(file_path=str(path)), shapes={"x": [3, 4]},
                    code_transformers=[lambda s: s.replace("ops.exp(", "ops.sin(")])
    np.testing.assert_allclose(pm.evaluate({}, X)["y"], np.sin(X["x"]), rtol=1e-6)
    assert "ops.sin(" in path.read_text() and "ops.exp(" not in path.read_text()


def test_bad_code_transformers_are_clear_errors():
    with pytest.raises(TypeError, match="list of functions"):
        ml.compile(exp_model(), ml.NumpyBackend(), shapes={"x": [3, 4]}, code_transformers=lambda s: s)
    with pytest.raises(TypeError, match=r"code_transformers\[0\] is int"):
        ml.compile(exp_model(), ml.NumpyBackend(), shapes={"x": [3, 4]}, code_transformers=[3])
    with pytest.raises(TypeError, match=r"code_transformers\[0\] returned int"):
        ml.compile(exp_model(), ml.NumpyBackend(), shapes={"x": [3, 4]}, code_transformers=[lambda s: 3])
    with pytest.raises(ml.IngotError, match="list of functions"):
        ml.compile(exp_model(), ml.CpuBackend(), shapes={"x": [3, 4]}, code_transformers="x")
    with pytest.raises(ml.IngotError, match="entries are functions"):
        ml.compile(exp_model(), ml.CpuBackend(), shapes={"x": [3, 4]}, code_transformers=[3])
    with pytest.raises(ml.IngotError, match="returned int, not the source"):
        ml.compile(exp_model(), ml.CpuBackend(), shapes={"x": [3, 4]}, code_transformers=[lambda s: 3])
    with pytest.raises(ml.IngotError, match="returned empty source"):
        ml.compile(exp_model(), ml.CpuBackend(), shapes={"x": [3, 4]}, code_transformers=[lambda s: ""])

    def broken(source):
        raise RuntimeError("no thanks")

    with pytest.raises(ml.IngotError, match="transformer 0 failed: .*no thanks"):
        ml.compile(exp_model(), ml.CpuBackend(), shapes={"x": [3, 4]}, code_transformers=[broken])
    with pytest.raises(ml.IngotError, match="reference backend generates no code"):
        ml.compile(exp_model(), ml.ReferenceBackend(), shapes={"x": [3, 4]}, code_transformers=[lambda s: s])


def test_a_transformer_that_breaks_the_build_gets_the_compilers_error():
    with pytest.raises(ml.IngotError, match="error"):
        ml.compile(exp_model(), ml.CpuBackend(), shapes={"x": [3, 4]},
                   code_transformers=[lambda s: s + "\nthis is not C++;\n"])


def test_code_transformers_is_a_listed_option():
    assert "code_transformers" in ml.compile_option_names()
