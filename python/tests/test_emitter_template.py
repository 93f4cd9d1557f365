"""compile(..., template_path=...): a Jinja2 template of the module the Python emitters generate
(NumpyBackend, TorchBackend, JaxBackend, MlxBackend). The default template renders exactly the
module the emitters write without one; a custom template's output is what runs, what file_path
writes and what code_transformers receive; bad templates and misuse are clear errors."""
from __future__ import annotations

import os

import numpy as np
import pytest

import ingot as ml
from ingot import emitters

jinja2 = pytest.importorskip("jinja2", reason="template_path needs Jinja2 (pip install jinja2)")


def mlp():
    m = ml.Model()
    m |= ml.Linear(dimension=3)(input="x", output="h")
    m |= ml.Model.primitive("tanh", ["in0"], ["output"])(in0="h", output=ml.IOKey("y", expose=True))
    return m


PARAMS = {"linear_0.weight": np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3),
          "linear_0.bias": np.array([0.1, -0.2, 0.3], np.float32)}
X = {"x": np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)}
WANT = np.tanh(X["x"] @ PARAMS["linear_0.weight"] + PARAMS["linear_0.bias"])


def test_the_default_template_renders_the_usual_module(tmp_path):
    plain, templated = tmp_path / "plain.py", tmp_path / "templated.py"
    a = ml.compile(mlp(), ml.NumpyBackend(file_path=str(plain)), shapes={"x": [2, 4]})
    b = ml.compile(mlp(), ml.NumpyBackend(file_path=str(templated)), shapes={"x": [2, 4]},
                   template_path=emitters.DEFAULT_TEMPLATE)
    assert plain.read_text() == templated.read_text()
    np.testing.assert_allclose(b.evaluate(PARAMS, X)["y"], a.evaluate(PARAMS, X)["y"], rtol=0, atol=0)
    assert os.path.isfile(emitters.DEFAULT_TEMPLATE)  # shipped with the package


def test_a_custom_template_is_what_runs_is_written_and_is_transformed(tmp_path):
    template = tmp_path / "module.py.jinja"
    # A header of the user's, a counter the module keeps, and forward wrapped to count its calls.
    template.write_text(
        "# my company's header ({{ display }})\n"
        "{{ imports }}\n\n"
        "CALLS = [0]\n\n\n"
        "{{ signature | replace('def forward', 'def _forward') }}\n"
        "{{ body }}\n\n\n"
        "def forward(inputs, constants):\n"
        "    CALLS[0] += 1\n"
        "    return _forward(inputs, constants)\n")
    seen = []
    path = tmp_path / "m.py"
    pm = ml.compile(mlp(), ml.NumpyBackend(file_path=str(path)), shapes={"x": [2, 4]}, template_path=template,
                    code_transformers=[lambda s: seen.append(s) or s.replace("ops.tanh(", "ops.sin(")])
    got = pm.evaluate(PARAMS, X)["y"]
    np.testing.assert_allclose(got, np.sin(X["x"] @ PARAMS["linear_0.weight"] + PARAMS["linear_0.bias"]), rtol=1e-6)
    assert seen and seen[0].startswith("# my company's header (NumPy)")  # transformers see the rendered module
    text = path.read_text()
    assert text.startswith("# my company's header") and "CALLS[0] += 1" in text and "ops.sin(" in text


def test_every_emitter_takes_a_template(tmp_path):
    template = tmp_path / "t.jinja"
    template.write_text("# {{ framework }} via {{ ops_module }}\n{{ imports }}\n\n\n{{ signature }}\n{{ body }}\n")
    backends = [ml.NumpyBackend]
    for module, backend in (("torch", "TorchBackend"), ("jax", "JaxBackend"), ("mlx", "MlxBackend")):
        try:
            __import__(module)
            backends.append(getattr(ml, backend))
        except ImportError:
            pass
    for backend in backends:
        path = tmp_path / f"{backend.__name__}.py"
        pm = ml.compile(mlp(), backend(file_path=str(path)), shapes={"x": [2, 4]}, template_path=str(template))
        np.testing.assert_allclose(pm.evaluate(PARAMS, X)["y"], WANT, rtol=1e-5, atol=1e-6)
        assert path.read_text().splitlines()[0].endswith("_ops")


def test_bad_templates_and_misuse_are_clear_errors(tmp_path):
    def compile_with(path, backend=None):
        return ml.compile(mlp(), backend or ml.NumpyBackend(), shapes={"x": [2, 4]}, template_path=path)

    with pytest.raises(ml.IngotError, match="template_path: cannot read"):
        compile_with(tmp_path / "missing.jinja")
    broken = tmp_path / "broken.jinja"
    broken.write_text("{{ imports }}\n{% if %}\n")
    with pytest.raises(ml.IngotError, match=r"broken.jinja' line 2"):
        compile_with(broken)
    misspelt = tmp_path / "misspelt.jinja"
    misspelt.write_text("{{ imports }}\n{{ signature }}\n{{ bdy }}\n")
    with pytest.raises(ml.IngotError, match="bdy"):
        compile_with(misspelt).evaluate(PARAMS, X)
    no_forward = tmp_path / "no_forward.jinja"
    no_forward.write_text("{{ imports }}\n")
    with pytest.raises(ml.IngotError, match=r"defines no forward"):
        compile_with(no_forward).evaluate(PARAMS, X)
    not_python = tmp_path / "not_python.jinja"
    not_python.write_text("{{ imports }}\n{{ signature }}\n  {{ body }}\n")
    with pytest.raises(ml.IngotError, match="not valid Python"):
        compile_with(not_python).evaluate(PARAMS, X)
    with pytest.raises(TypeError, match="template_path is for the Python emitters"):
        compile_with(emitters.DEFAULT_TEMPLATE, ml.CpuBackend())
    with pytest.raises(TypeError, match="template_path must be a path"):
        compile_with(3)
