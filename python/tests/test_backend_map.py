"""compile(model, backend, backend_map={key: backend}): blocks marked set_attribute("backend", key)
run on the mapped backend, the rest on the default, in one model. Checked against the same model
compiled on one backend and against NumPy; gradients through the boundaries against the
single-backend model and finite differences; arrays crossing a boundary are not copied where
README "backend_map" says so; every misuse is a clear error."""
from __future__ import annotations

import numpy as np
import pytest

import ingot as ml
from conftest import HAVE_JAX, HAVE_TORCH, cpu, needs_jax, needs_torch

SHAPES = {"input": [3, 6]}
TYPES = {"input": "float64"}


def block(width: int, key=None, act=ml.Tanh):
    """Linear(width) then an activation, marked for backend `key` when given."""
    sub = ml.Model()
    sub += ml.Linear(width)
    sub += act()
    if key is not None:
        assert sub.set_attribute("backend", key) is sub  # chains like set_name
    return sub


def three_part_model(key="np"):
    """Linear(4) -> [Linear(5) + tanh, marked `key`] -> Linear(3): default, marked, default."""
    m = ml.Model()
    m += ml.Linear(4)
    m += block(5, key)
    m += ml.Linear(3)
    return m


def compile_pair(model, default, backend_map, **options):
    """(the backend_map model, the same model on the default backend alone)."""
    # Every parameter in float64 too, so that finite differences are precise.
    names = ml.compile(model, ml.ReferenceBackend(), shapes=SHAPES, jit=False).parameter_names()
    options = {"shapes": SHAPES, "types": {**TYPES, **{n: "float64" for n in names}}, **options}
    return (ml.compile(model, default, backend_map=backend_map, **options), ml.compile(model, default, **options))


def inputs_and_params(model, seed=0):
    """({"input": x}, parameters); with trainable_keys=["input"] the input is a parameter, so x goes there."""
    x = np.random.default_rng(seed).standard_normal((3, 6))
    params = model.randomize_params(seed)
    if "input" in params:
        params["input"] = x
        return {}, params
    return {"input": x}, params


def numpy_forward(params, x):
    """three_part_model in NumPy; the parameters by the names ingot gives them."""
    def lin(prefix, h):
        return h @ params[prefix + ".weight"] + params[prefix + ".bias"]
    return lin("linear_1", np.tanh(lin("model_0.linear_0", lin("linear_0", x))))


def assert_same_gradients(mixed, single, inputs, params, seeds):
    out_m, grads_m = mixed.evaluate(params, inputs, output_gradients=seeds)
    out_s, grads_s = single.evaluate(params, inputs, output_gradients=seeds)
    assert sorted(out_m) == sorted(out_s)
    for name in out_s:
        np.testing.assert_allclose(out_m[name], out_s[name], rtol=1e-10, atol=1e-12)
    assert sorted(grads_m) == sorted(grads_s) == sorted(single.gradient_names())
    for name in grads_s:
        np.testing.assert_allclose(grads_m[name], grads_s[name], rtol=1e-9, atol=1e-12, err_msg=name)
    return grads_m


def finite_difference(model, params, inputs, output, cot, name, index, eps=1e-6):
    """d(sum(output * cot))/d(name[index]) by central differences."""
    def value(delta):
        p, x = {k: np.array(v) for k, v in params.items()}, {k: np.array(v) for k, v in inputs.items()}
        target = p if name in p else x
        target[name][index] += delta
        return float(np.sum(np.asarray(model.evaluate(p, x)[output]) * cot))
    return (value(eps) - value(-eps)) / (2 * eps)


# ---------------------------------------------------------------- the attribute


def test_set_attribute_marks_a_block_and_checks_its_arguments():
    sub = block(5)
    assert sub.get_attribute("backend") is None
    sub.set_attribute("backend", "torch")
    assert sub.get_attribute("backend") == "torch"
    with pytest.raises(ml.IngotError, match=r"Unknown model attribute 'device' \(valid attributes: backend\)"):
        sub.set_attribute("device", "cpu")
    with pytest.raises(ml.IngotError, match="Unknown model attribute 'device'"):
        sub.get_attribute("device")
    with pytest.raises(TypeError, match=r"the value must be a str .*got int"):
        sub.set_attribute("backend", 3)
    with pytest.raises(ml.IngotError, match="non-empty key"):
        sub.set_attribute("backend", "")
    # The mark survives the model's JSON form.
    m = three_part_model("torch")
    assert '"backend"' in m.to_json()
    assert ml.Model.from_json(m.to_json()).to_json() == m.to_json()


def test_backend_map_is_a_compile_option():
    assert "backend_map" in ml.compile_option_names()


# ---------------------------------------------------------------- forward and gradients


def test_cpu_default_with_a_numpy_block_matches_one_backend_and_numpy():
    mixed, single = compile_pair(three_part_model("np"), cpu(), {"np": ml.NumpyBackend()})
    assert [(s.key, s.backend.name) for s in mixed.segments] == [("", "cpu"), ("np", "numpy"), ("", "cpu")]
    # The same terminals, shapes, dtypes and parameters as the single-backend model.
    assert mixed.names() == single.names()
    terminals = [n for names in single.names().values() for n in names]
    shapes, types = single.get_shapes(), single.get_types()
    assert {n: mixed.get_shapes()[n] for n in terminals} == {n: shapes[n] for n in terminals}
    assert {n: mixed.get_types()[n] for n in terminals} == {n: types[n] for n in terminals}
    assert mixed.gradient_names() == single.gradient_names()
    inputs, params = inputs_and_params(mixed)
    for name, value in single.randomize_params(0).items():
        np.testing.assert_array_equal(params[name], value)
    out = mixed.evaluate(params, inputs)
    np.testing.assert_allclose(out["output"], single.evaluate(params, inputs)["output"], rtol=1e-12)
    np.testing.assert_allclose(out["output"], numpy_forward(params, inputs["input"]), rtol=1e-12)
    assert out["output"].dtype == np.float64 and out["output"].shape == (3, 3)


def test_gradients_cross_the_boundaries_chain_rule_and_finite_differences():
    mixed, single = compile_pair(three_part_model("np"), ml.ReferenceBackend(), {"np": ml.NumpyBackend()},
                                 trainable_keys=["input"])
    inputs, params = inputs_and_params(mixed, seed=1)
    cot = np.random.default_rng(2).standard_normal((3, 3))
    grads = assert_same_gradients(mixed, single, inputs, params, {"output": cot})
    assert "input" in grads  # trainable_keys: the input's gradient crosses every boundary back
    for name in ("linear_0.weight", "model_0.linear_0.bias", "input"):
        fd = finite_difference(mixed, params, inputs, "output", cot, name, (0,) * np.ndim(grads[name]))
        np.testing.assert_allclose(grads[name].flat[0], fd, rtol=1e-5, atol=1e-8, err_msg=name)


def test_nested_marks_the_innermost_wins():
    inner = block(4, "np", act=ml.Relu)
    outer = ml.Model()
    outer += ml.Linear(5)
    outer += inner
    outer += ml.Sigmoid()
    outer.set_attribute("backend", "ref")
    m = ml.Model()
    m += ml.Linear(4)
    m += outer
    m += ml.Linear(2)
    mixed, single = compile_pair(m, ml.NumpyBackend(), {"np": ml.NumpyBackend(), "ref": ml.ReferenceBackend()})
    assert [s.key for s in mixed.segments] == ["", "ref", "np", "ref", ""]
    inputs, params = inputs_and_params(mixed, seed=3)
    assert_same_gradients(mixed, single, inputs, params, {"output": np.ones((3, 2))})


def test_several_marked_blocks_and_a_parameter_shared_across_segments():
    # The same weight "w" is read on the default backend and in a marked block: its gradient is
    # the sum of both segments' parts.
    m = ml.Model()
    m |= ml.Linear(6)(input="input", weight="w", output="h0")
    first = block(6, "np")
    m |= first(input="h0", output="h1")
    m |= ml.Linear(6)(input="h1", weight="w", output="h2")
    m |= block(6, "np")(input="h2", output="h3")
    m |= block(2, "other")(input="h3", output=ml.IOKey("y", expose=True))
    m |= ml.Linear(1)(input="h1", output=ml.IOKey("side", expose=True))  # a second output, read mid-way
    mixed, single = compile_pair(m, ml.ReferenceBackend(), {"np": ml.NumpyBackend(), "other": ml.ReferenceBackend()})
    assert len(mixed.segments) >= 4 and {s.key for s in mixed.segments} == {"", "np", "other"}
    inputs, params = inputs_and_params(mixed, seed=4)
    assert "w" in params
    seeds = {"y": np.random.default_rng(5).standard_normal((3, 2)), "side": np.ones((3, 1))}
    grads = assert_same_gradients(mixed, single, inputs, params, seeds)
    fd = finite_difference(mixed, params, inputs, "y", seeds["y"], "w", (1, 2))
    fd += finite_difference(mixed, params, inputs, "side", seeds["side"], "w", (1, 2))
    np.testing.assert_allclose(grads["w"][1, 2], fd, rtol=1e-5, atol=1e-8)
    # Seeding one output only: what feeds only the other gets zeros, as from one backend.
    assert_same_gradients(mixed, single, inputs, params, {"side": np.ones((3, 1))})


def test_a_symbolic_batch_crosses_the_boundaries():
    m = three_part_model("np")
    mixed = ml.compile(m, ml.ReferenceBackend(), backend_map={"np": ml.NumpyBackend()}, shapes={"input": ["N", 6]})
    single = ml.compile(m, ml.ReferenceBackend(), shapes={"input": ["N", 6]})
    assert mixed.get_shapes()["output"] == ["N", 3]
    params = mixed.randomize_params(0)
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 6)).astype(np.float32)
        np.testing.assert_allclose(mixed.evaluate(params, {"input": x})["output"],
                                   single.evaluate(params, {"input": x})["output"], rtol=1e-5, atol=1e-7)


def test_a_marked_top_level_model_runs_on_the_mapped_backend():
    m = three_part_model(None)
    m.set_attribute("backend", "np")
    mixed, single = compile_pair(m, ml.ReferenceBackend(), {"np": ml.NumpyBackend()})
    assert [s.backend.name for s in mixed.segments] == ["numpy"]
    inputs, params = inputs_and_params(mixed)
    assert_same_gradients(mixed, single, inputs, params, {"output": np.ones((3, 3))})


def test_cpu_options_go_to_the_cpu_segments_only():
    # cpu_options tune CpuBackend's generated library; the NumPy segment must not get them (the
    # NumPy backend would refuse them).
    mixed, single = compile_pair(three_part_model("np"), cpu(), {"np": ml.NumpyBackend()},
                                 cpu_options={"num_threads": 1})
    inputs, params = inputs_and_params(mixed)
    np.testing.assert_allclose(mixed.evaluate(params, inputs)["output"], single.evaluate(params, inputs)["output"])
    # With no CpuBackend anywhere they tune nothing: an error, as without backend_map.
    with pytest.raises(ml.IngotError, match="Option 'cpu_options' tunes the CPU backend's generated code"):
        ml.compile(three_part_model("np"), ml.ReferenceBackend(), backend_map={"np": ml.NumpyBackend()}, shapes=SHAPES,
                   cpu_options={"num_threads": 1})


def test_a_model_without_marks_compiles_as_without_backend_map():
    m = ml.Model()
    m += ml.Linear(3)
    pm = ml.compile(m, ml.ReferenceBackend(), backend_map={"np": ml.NumpyBackend()}, shapes=SHAPES)
    assert not hasattr(pm, "segments") and pm.backend.name == "reference"


# ---------------------------------------------------------------- other frameworks, zero copies


def _record_pointers(monkeypatch, module, name, pointer):
    """Wraps module.<name> (an emitter op module's from_numpy / to_numpy) to record `pointer`
    of every array it is given and of every array it returns."""
    seen = {"in": [], "out": []}
    original = getattr(module, name)

    def wrapped(a):
        seen["in"].append(pointer(a))
        result = original(a)
        seen["out"].append(pointer(result))
        return result

    monkeypatch.setattr(module, name, wrapped)
    return seen


def _np_pointer(a):
    return np.asarray(a).__array_interface__["data"][0]


@needs_torch
def test_torch_block_matches_one_backend_and_crosses_without_copies(monkeypatch):
    import torch
    from ingot.emitters import torch_ops

    mixed, single = compile_pair(three_part_model("torch"), cpu(), {"torch": ml.TorchBackend()}, jit=False)
    assert [s.backend.name for s in mixed.segments] == ["cpu", "torch", "cpu"]
    inputs, params = inputs_and_params(mixed, seed=6)
    np.testing.assert_allclose(mixed.evaluate(params, inputs)["output"], numpy_forward(params, inputs["input"]), rtol=1e-12)
    assert_same_gradients(mixed, single, inputs, params, {"output": np.ones((3, 3))})

    # CPU -> torch: the tensors torch computes from are the CPU segment's output buffers.
    first, torch_segment, _ = mixed.segments
    produced = {}
    original = first.model.evaluate
    monkeypatch.setattr(first.model, "evaluate", lambda *a, **k: produced.update(original(*a, **k)) or produced)
    into_torch = _record_pointers(monkeypatch, torch_ops, "from_numpy",
                                  lambda a: a.data_ptr() if isinstance(a, torch.Tensor) else _np_pointer(a))
    out_of_torch = _record_pointers(monkeypatch, torch_ops, "to_numpy",
                                    lambda a: a.data_ptr() if isinstance(a, torch.Tensor) else _np_pointer(a))
    torch_results = {}
    original_torch = torch_segment.model.evaluate
    monkeypatch.setattr(torch_segment.model, "evaluate",
                        lambda *a, **k: torch_results.update(original_torch(*a, **k)) or torch_results)
    mixed.evaluate(params, inputs)
    (boundary,) = torch_segment.boundary_inputs
    assert _np_pointer(produced[boundary]) in into_torch["out"]  # the torch tensor views it
    # torch -> CPU: the arrays the torch segment returns view torch's result tensors.
    for name in torch_segment.outputs:
        assert _np_pointer(torch_results[name]) in out_of_torch["in"]


@needs_jax
def test_jax_block_matches_one_backend_and_its_gradients():
    mixed, single = compile_pair(three_part_model("jax"), ml.ReferenceBackend(), {"jax": ml.JaxBackend()}, jit=False)
    assert [s.backend.name for s in mixed.segments] == ["reference", "jax", "reference"]
    inputs, params = inputs_and_params(mixed, seed=7)
    np.testing.assert_allclose(mixed.evaluate(params, inputs)["output"], numpy_forward(params, inputs["input"]), rtol=1e-12)
    assert_same_gradients(mixed, single, inputs, params, {"output": np.ones((3, 3))})


@needs_jax
def test_jax_results_cross_without_copies(monkeypatch):
    from ingot.emitters import jax_ops

    mixed, _ = compile_pair(three_part_model("jax"), ml.ReferenceBackend(), {"jax": ml.JaxBackend()}, jit=False)
    _, jax_segment, _ = mixed.segments
    inputs, params = inputs_and_params(mixed)
    out_of_jax = _record_pointers(monkeypatch, jax_ops, "to_numpy",
                                  lambda a: a.unsafe_buffer_pointer() if hasattr(a, "unsafe_buffer_pointer") else _np_pointer(a))
    results = {}
    original = jax_segment.model.evaluate
    monkeypatch.setattr(jax_segment.model, "evaluate", lambda *a, **k: results.update(original(*a, **k)) or results)
    mixed.evaluate(params, inputs)
    for name in jax_segment.outputs:  # the arrays the JAX segment returns view XLA's result buffers
        assert _np_pointer(results[name]) in out_of_jax["in"]


@pytest.mark.skipif(not (HAVE_TORCH and HAVE_JAX), reason="needs both PyTorch and JAX (pip install torch jax)")
def test_torch_and_jax_blocks_in_one_model():
    m = ml.Model()
    m += ml.Linear(4)
    m += block(5, "torch")
    m += block(3, "jax")
    mixed, single = compile_pair(m, ml.NumpyBackend(), {"torch": ml.TorchBackend(), "jax": ml.JaxBackend()}, jit=False)
    assert [s.backend.name for s in mixed.segments] == ["numpy", "torch", "jax"]
    inputs, params = inputs_and_params(mixed, seed=8)
    assert_same_gradients(mixed, single, inputs, params, {"output": np.ones((3, 3))})


# ---------------------------------------------------------------- errors


def test_a_key_without_a_backend_lists_the_keys():
    with pytest.raises(ml.IngotError, match=r"marks blocks with backend 'torch' but backend_map has no entry for it "
                                            r"\(backend_map keys: 'np'; keys the model uses: 'torch'\)"):
        ml.compile(three_part_model("torch"), ml.ReferenceBackend(), backend_map={"np": ml.NumpyBackend()}, shapes=SHAPES)


@pytest.mark.parametrize("backend_map, message", [
    ({"np": "numpy"}, r"backend_map\['np'\] is str, not a backend"),
    ({"np": ml.NumpyBackend}, r"backend_map\['np'\] is type, not a backend"),
    ([("np", ml.NumpyBackend())], "backend_map must be a dict {key: backend}, got list"),
    ({3: ml.NumpyBackend()}, "backend_map keys are the non-empty strings"),
])
def test_backend_map_values_must_be_backends(backend_map, message):
    with pytest.raises(TypeError, match=message):
        ml.compile(three_part_model("np"), ml.ReferenceBackend(), backend_map=backend_map, shapes=SHAPES)


def test_the_default_backend_must_be_a_backend():
    with pytest.raises(TypeError, match="needs a default backend besides backend_map"):
        ml.compile(three_part_model("np"), None, backend_map={"np": ml.NumpyBackend()}, shapes=SHAPES)


def test_backend_map_needs_a_logical_model():
    with pytest.raises(TypeError, match=r"compile\(fn\) takes no backend_map"):
        ml.compile(lambda x: x * 2, backend_map={"np": ml.NumpyBackend()})


def test_options_that_write_one_file_are_refused(tmp_path):
    with pytest.raises(TypeError, match="file_path cannot be combined with backend_map"):
        ml.compile(three_part_model("np"), ml.ReferenceBackend(), backend_map={"np": ml.NumpyBackend()}, shapes=SHAPES,
                   file_path=str(tmp_path / "model.py"))


def test_evaluate_names_unknown_terminals_and_outputs():
    mixed, _ = compile_pair(three_part_model("np"), ml.ReferenceBackend(), {"np": ml.NumpyBackend()})
    inputs, params = inputs_and_params(mixed)
    with pytest.raises(ml.IngotError, match="Unknown parameter 'nope'"):
        mixed.evaluate({**params, "nope": np.zeros(1)}, inputs)
    with pytest.raises(ml.IngotError, match="Unknown input 'nope'"):
        mixed.evaluate(params, {**inputs, "nope": np.zeros(1)})
    missing = sorted(params)[-1]
    with pytest.raises(ml.IngotError, match=f"Missing parameter '{missing}'"):
        mixed.evaluate({k: v for k, v in params.items() if k != missing}, inputs)
    with pytest.raises(ml.IngotError, match=r"output_gradients: 'y' is not an output of the model \(outputs: output\)"):
        mixed.evaluate(params, inputs, output_gradients={"y": np.ones((3, 3))})
    with pytest.raises(ml.IngotError, match="Shape mismatch"):
        mixed.evaluate(params, {"input": np.zeros((3, 7))})
