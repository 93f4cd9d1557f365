"""The Python API as the issue shows it: composition, terminal links, IOKey, compile options as
keywords, PhysicalModel methods, persistence, and every Python-side error."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ingot as ml
from conftest import cpu


def issue_model():
    model = ml.Model()
    model |= ml.Conv2d(3, 8, kernel_size=3)
    model += ml.Relu()
    model += ml.GlobalAvgPool2d()(output="hidden")
    model |= ml.Linear(dimension=4)(input="hidden", output="out")
    return model


def test_issue_example_end_to_end(rng):
    pm = ml.compile(issue_model(), cpu(), shapes={"input": [None, 3, 8, 8]}, jit=True)
    params = pm.randomize_params()
    x = rng.normal(size=(2, 3, 8, 8)).astype(np.float32)
    outputs = pm.evaluate(params, {"input": x})
    assert set(outputs) == {"out"} and outputs["out"].shape == (2, 4)
    shapes = pm.get_shapes()
    assert shapes["input"][1:] == [3, 8, 8] and isinstance(shapes["input"][0], str)
    assert shapes["out"][1] == 4 and shapes["conv2d_0.weight"] == [8, 3, 3, 3]
    assert pm.get_types()["out"] == "float32"
    assert pm.input_names() == ["input"] and pm.output_names() == ["out"]
    assert set(pm.names()) == {"inputs", "parameters", "constants", "outputs"}
    assert pm.parameter_count() == 8 * 3 * 9 + 8 + 8 * 4 + 4
    assert "out" in pm.summary()


def test_symbols_reach_outputs():
    m = ml.Model()
    m += ml.Relu()
    pm = ml.compile(m, ml.ReferenceBackend(), shapes={"input": ["N", "D"]})
    assert pm.get_shapes()["output"] == ["N", "D"]


def test_symbolic_batch_runs_any_size(rng):
    m = ml.Model()
    m += ml.Linear(dimension=2)
    pm = ml.compile(m, cpu(), shapes={"input": ["N", 3]})
    p = pm.randomize_params()
    for n in (1, 5):
        assert pm.evaluate(p, {"input": rng.normal(size=(n, 3)).astype(np.float32)})["output"].shape == (n, 2)


def test_a_symbolic_dim_that_broadcasts_at_run_time(rng):
    """[N, M] + [4]: M is 4 or 1 until the run tells. The reference broadcasts either way; the CPU
    backend's kernel reads M whole, so a run with M = 1 is a clear error (before, wrong values)."""
    right = rng.normal(size=4).astype(np.float32)
    ref = ml.compile(ml.Add(), ml.ReferenceBackend(), shapes={"left": ["N", "M"], "right": [4]})
    fast = ml.compile(ml.Add(), cpu(), shapes={"left": ["N", "M"], "right": [4]})
    full = rng.normal(size=(3, 4)).astype(np.float32)
    np.testing.assert_allclose(fast.evaluate({}, {"left": full, "right": right})["output"], full + right, rtol=1e-6)
    column = rng.normal(size=(3, 1)).astype(np.float32)
    np.testing.assert_allclose(ref.evaluate({}, {"left": column, "right": right})["output"], column + right, rtol=1e-6)
    with pytest.raises(ml.IngotError, match="compiled as unknown is 1 at run time"):
        fast.evaluate({}, {"left": column, "right": right})


def test_iokey_shape_dtype_value_expose():
    m = ml.Model()
    m |= ml.Add()(left=ml.IOKey("x", shape=[2, 3], dtype="float64"), right=ml.IOKey("c", value=np.ones((3,))),
                  output=ml.IOKey("y", expose=True))
    pm = ml.compile(m, ml.ReferenceBackend())
    assert pm.get_shapes()["x"] == [2, 3] and pm.get_types()["y"] == "float64"
    assert pm.constant_names() == ["c"]
    np.testing.assert_array_equal(pm.evaluate({}, {"x": np.zeros((2, 3))})["y"], np.ones((2, 3)))


def test_variadic_shape_templates_in_mithrils_tuple_form(rng):
    """("Batch", ...) names a run of any number of dimensions, as "Batch..." does; a bare ... is an
    anonymous run, as "..." is. The run binds one size list across the terminals that share it."""
    for run in (("Batch", ...), "Batch..."):
        m = ml.Model()
        m |= ml.Add()(left=ml.IOKey("x", shape=[run, 3]), right=ml.IOKey("z", shape=[run, 1]),
                      output=ml.IOKey("y", expose=True))
        pm = ml.compile(m, ml.ReferenceBackend(), shapes={"x": [4, 2, 3]})
        assert pm.get_shapes()["z"] == [4, 2, 1], run  # the run [4, 2] bound by x, carried to z
        x, z = rng.normal(size=(4, 2, 3)), rng.normal(size=(4, 2, 1))
        np.testing.assert_allclose(pm.evaluate({}, {"x": x.astype(np.float32), "z": z.astype(np.float32)})["y"],
                                   x + z, rtol=1e-6)
    for anonymous in (..., "..."):
        m = ml.Model()
        m |= ml.Relu()(input=ml.IOKey("input", shape=[anonymous, 5]), output=ml.IOKey("y", expose=True))
        assert ml.compile(m, ml.ReferenceBackend(), shapes={"input": [2, 3, 5]}).get_shapes()["y"] == [2, 3, 5]
    with pytest.raises(ml.IngotError, match=r"a string, None, \.\.\. or \(\"Name\", \.\.\.\), got \('Batch', 3\)"):
        ml.IOKey("x", shape=[("Batch", 3)])
    with pytest.raises(ml.IngotError, match=r"A variadic run's name must not be empty"):
        ml.IOKey("x", shape=[("", ...)])


def test_connection_arithmetic_and_apply(rng):
    m = ml.Model()
    x, w = m.input("x", shape=[2, 3]), m.parameter("w", init="ones", shape=[3, 4])
    y = ml.apply("gelu", (x @ w) * 0.5 + 1.0, approximate="tanh")
    m.expose(y.sum([1]) - x.mean([1]), "y")
    m.expose((x ** 2.0).T, "sq")
    pm = ml.compile(m, ml.ReferenceBackend())
    xv = rng.normal(size=(2, 3)).astype(np.float32)
    out = pm.evaluate(pm.randomize_params(), {"x": xv})
    h = xv.sum(1, keepdims=True) * np.ones((1, 4)) * 0.5 + 1
    g = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    np.testing.assert_allclose(out["y"], g.sum(1) - xv.mean(1), rtol=1e-5)
    np.testing.assert_allclose(out["sq"], (xv ** 2).T, rtol=1e-6)


def test_add_returns_connections():
    m = ml.Model()
    conns = m.add(ml.Linear(dimension=2), name="lin", input="x")
    assert set(conns) >= {"input", "output", "weight", "bias"}
    m.expose(conns["output"], "y")
    assert "y" in m.output_keys() and "x" in m.input_keys()


def test_an_unexposed_dangling_wire_is_dead_code(capfd, rng):
    # The seed's example: a Linear writes to "unused", nothing reads it and nobody exposed it.
    m = ml.Model()
    m |= ml.Linear(dimension=3)(input="x", output="unused")
    m |= ml.Linear(dimension=4)(input="x", output="y")
    pm = ml.compile(m, ml.ReferenceBackend(), shapes={"x": [2, 5]}, verbose=True)
    assert "output 'unused' not exposed: eliminated (ask for it with outputs=[...])" in capfd.readouterr().err
    assert pm.output_names() == ["y"]
    assert pm.parameter_names() == ["linear_1.weight", "linear_1.bias"]
    params = pm.randomize_params()
    assert set(params) == {"linear_1.weight", "linear_1.bias"}
    x = rng.normal(size=(2, 5)).astype(np.float32)
    out = pm.evaluate(params, {"x": x})
    np.testing.assert_allclose(out["y"], x @ params["linear_1.weight"] + params["linear_1.bias"], rtol=1e-5)

    kept = ml.compile(m, ml.ReferenceBackend(), shapes={"x": [2, 5]}, outputs=["unused"])
    assert kept.output_names() == ["unused", "y"]
    assert set(kept.parameter_names()) == {"linear_0.weight", "linear_0.bias", "linear_1.weight", "linear_1.bias"}

    with pytest.raises(ml.IngotError, match=r"outputs: 'nope' is not a wire of the model \(wires: x, "):
        ml.compile(m, ml.ReferenceBackend(), shapes={"x": [2, 5]}, outputs=["nope"])
    with pytest.raises(ml.IngotError, match="expected a list of names"):
        ml.compile(m, ml.ReferenceBackend(), shapes={"x": [2, 5]}, outputs="unused")


def test_every_compile_option_is_a_keyword(tmp_path, rng):
    m = ml.Model()
    m += ml.Linear(dimension=3)
    m += ml.Dropout(p=0.5, seed=1)
    seen = []
    dump = tmp_path / "graph.json"
    options = dict(
        shapes={"input": [2, 4]}, types={"input": "float32"}, constant_keys={"linear_0.bias": np.zeros(3, np.float32)},
        data_keys=["input"], trainable_keys=["linear_0.weight"], discard_keys=[], outputs=["output"], static_shapes=True, inference=True,
        dynamic_control_flow=False,
        jit=False, file_path=tmp_path / "plan.txt", dump_graph=dump, dump_format="json", verbose=False,
        optimization_level="high", optimizations={"cse": False, "dce": True},
        custom_passes=[("record", "end", lambda g: seen.append(len(g["nodes"])))], dump_after_each_pass=False,
        layout_target="nhwc", memory_planning="greedy", max_memory_gb=1.0, mixed_precision="none",
        gradient_checkpointing=True,
        checkpoint_segments=2, data_parallel=False, gradient_bucket_bytes=1 << 20, gradient_overlap=True, visualize=True, viz_options={"format": "dot", "output_path": tmp_path / "graph.dot"},
        save_intermediates=False, intermediate_dir=tmp_path / "intermediates", intermediate_format="npy",
        jit_options=None, jax_options=None, torch_options=None, mlx_options=None,
        profile=True, profile_output=tmp_path / "profile.json", trace_shapes=False,
        code_transformers=None,  # the reference backend generates no code (test_code_transformers.py)
        template_path=None,  # nor a Python module (test_emitter_template.py)
        backend_map=None,  # one backend here (test_backend_map.py)
        hints={"input_batch_size_range": (2, 2), "inference_priority": "latency"}, target_hardware="cpu",
        cpu_options=None, optimize_for="memory")  # cpu_options: the CPU backend's (test_hints_targets.py)
    assert set(options) == set(ml.compile_option_names())
    pm = ml.compile(m, ml.ReferenceBackend(), **options)
    assert seen, "the custom pass ran"
    assert "traceEvents" in json.loads((tmp_path / "profile.json").read_text())
    assert json.loads(dump.read_text())["format"] == "ingot.graph"
    out = pm.evaluate({"linear_0.weight": np.ones((4, 3), np.float32)}, {"input": np.ones((2, 4), np.float32)})
    np.testing.assert_allclose(out["output"], np.full((2, 3), 4.0))  # inference: dropout is identity


def test_custom_pass_can_rewrite_the_graph():
    m = ml.Model()
    m += ml.Relu()

    def relu_to_neg(graph):
        for node in graph["nodes"]:
            if node["op"] == "relu":
                node["op"] = "neg"
        return graph

    pm = ml.compile(m, ml.ReferenceBackend(), shapes={"input": [3]}, custom_passes=[("neg", "start", relu_to_neg)])
    np.testing.assert_array_equal(pm.evaluate({}, {"input": np.array([1, -2, 3], np.float32)})["output"], [-1, 2, -3])


def test_unknown_keyword_lists_valid_options():
    with pytest.raises(TypeError, match=r"unknown option 'optimisation'.*optimization_level"):
        ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), optimisation="high")


def test_bad_option_value_is_ingot_error():
    with pytest.raises(ml.IngotError, match="dump format .xml."):
        ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), dump_format="xml")
    with pytest.raises(ml.IngotError, match="optimization"):
        ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), optimizations={"no_such_pass": True})


def test_ingot_error_is_value_error_with_message_intact():
    assert issubclass(ml.IngotError, ValueError)
    m = ml.Model()
    with pytest.raises(ml.IngotError, match=r"Linear has no terminal 'inptu' \(terminals: input, weight, bias, output\)"):
        m |= ml.Linear(dimension=3)(inptu="x")


def test_shape_contradiction_names_terminals():
    m = ml.Model()
    m += ml.Linear(dimension=3)(input=ml.IOKey("input", shape=[2, 5]))
    with pytest.raises(ml.IngotError, match="Cannot infer shape"):
        ml.compile(m, ml.ReferenceBackend(), shapes={"input": [2, 4]})


def test_evaluate_errors_name_the_terminal():
    pm = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": ["N", 784]})
    p = pm.randomize_params()
    with pytest.raises(ml.IngotError, match=r"Type mismatch at 'input': expected float32, got float64"):
        pm.evaluate(p, {"input": np.zeros((2, 784))})
    with pytest.raises(ml.IngotError, match=r"Shape mismatch at 'input'"):
        pm.evaluate(p, {"input": np.zeros((2, 783), np.float32)})
    with pytest.raises(ml.IngotError, match=r"Missing input 'input'"):
        pm.evaluate(p, {})
    with pytest.raises(ml.IngotError, match=r"Unknown input 'x'"):
        pm.evaluate(p, {"input": np.zeros((2, 784), np.float32), "x": np.zeros(1)})
    with pytest.raises(ml.IngotError, match=r"Unsupported dtype complex128 for input 'input'"):
        pm.evaluate(p, {"input": np.zeros((2, 784), np.complex128)})
    with pytest.raises(ml.IngotError, match=r"Unsupported dtype uint32"):
        pm.evaluate(p, {"input": np.zeros((2, 784), np.uint32)})
    with pytest.raises(ml.IngotError, match="Unsupported dtype object"):
        pm.evaluate(p, {"input": object()})


def test_bad_python_arguments():
    with pytest.raises(TypeError):
        ml.Linear(dimenson=3)  # wrong keyword
    with pytest.raises(ml.IngotError, match="out_channels is required"):
        ml.Conv2d(3)
    with pytest.raises(ml.IngotError, match="kernel_size"):
        ml.Conv2d(3, 4, kernel_size=(1, 2, 3))
    with pytest.raises(ml.IngotError, match="dtype"):
        ml.IOKey("x", dtype="float128")
    with pytest.raises(ml.IngotError, match="shape"):
        ml.IOKey("x", shape="N")
    with pytest.raises(TypeError, match="needs a backend"):
        ml.compile(ml.ExampleMLP(), "cpu")
    with pytest.raises(ml.IngotError, match="num_threads"):
        ml.CpuBackend(num_threads=-1)
    with pytest.raises(ml.IngotError, match="list of names"):
        ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), data_keys="input")


def test_cpu_backend_options(tmp_path):
    b = ml.CpuBackend(cache=False, cache_dir=str(tmp_path), extra_flags=["-DINGOT_TEST=1"], num_threads=1)
    assert (b.cache, b.cache_dir, b.extra_flags, b.num_threads, b.name) == (False, str(tmp_path), ["-DINGOT_TEST=1"], 1, "cpu")
    before = ml.CpuBackend.compile_count()
    m = ml.Model()
    m += ml.Relu()
    ml.compile(m, b, shapes={"input": [3]}, file_path=tmp_path / "gen.cpp")
    assert ml.CpuBackend.compile_count() == before + 1
    assert "ingot_entry" in (tmp_path / "gen.cpp").read_text()
    with pytest.raises(ml.IngotError, match="compiler"):
        ml.compile(m, ml.CpuBackend(compiler="/nonexistent/c++", cache=False), shapes={"input": [4]})


def test_params_and_models_persist(tmp_path, rng):
    model = issue_model()
    pm = ml.compile(model, ml.ReferenceBackend(), shapes={"input": [1, 3, 8, 8]})
    p = pm.randomize_params(3)
    pm.save_params(tmp_path / "p.safetensors", p)
    loaded = pm.load_params(tmp_path / "p.safetensors")
    assert set(loaded) == set(p) and all(np.array_equal(loaded[k], p[k]) for k in p)
    (tmp_path / "bad.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(ml.IngotError):
        pm.load_params(tmp_path / "bad.safetensors")
    model.save(str(tmp_path / "m.json"))
    again = ml.Model.load(str(tmp_path / "m.json"))
    assert again.to_json() == model.to_json() == ml.Model.from_json(model.to_json()).to_json()
    assert "Linear" in model.summary({"input": [1, 3, 8, 8]})


def test_randomize_params_is_deterministic():
    pm = ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [1, 784]})
    a, b, c = pm.randomize_params(1), pm.randomize_params(1), pm.randomize_params(2)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["linear_0.weight"], c["linear_0.weight"])


def test_dtype_objects():
    """ml.float32 and friends (MLX's mx.float32 style): equal to their names and to NumPy's dtypes,
    accepted wherever a dtype name is, and what .dtype and get_types() return."""
    names = ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64"]
    sizes = [1, 1, 2, 4, 8, 1, 2, 2, 4, 8]
    for name, size in zip(names, sizes):
        t = getattr(ml, name)
        assert isinstance(t, ml.DType) and t == name and t.name == name and t.itemsize == size
        assert repr(t) == f"ml.{name}" and hash(t) == hash(name)
        if name != "bfloat16":
            assert t == np.dtype(name) and np.dtype(name) == t and t != np.dtype("complex64")
    assert ml.float32 == np.float32 and ml.bool == bool and ml.int64 != ml.int32 and ml.float32 != "float64"
    assert ml.float16.is_floating and not ml.int8.is_floating
    a = ml.ones(3)
    assert a.dtype is ml.float32 and a.dtype == "float32"
    assert a.astype(ml.float16).dtype == ml.float16
    assert ml.array(np.ones(2), dtype=ml.int32).dtype == ml.int32
    assert ml.zeros((2,), ml.float64).dtype == ml.float64
    m = ml.Model()
    m |= ml.Add()(left=ml.IOKey("x", dtype=ml.float64), right="y", output=ml.IOKey("z", expose=True))
    pm = ml.compile(m, ml.ReferenceBackend(), shapes={"x": [2], "y": [2]}, types={"y": ml.float64})
    types = pm.get_types()
    assert types == {"x": "float64", "y": "float64", "z": "float64"} and all(isinstance(t, ml.DType) for t in types.values())
    assert json.loads(json.dumps(types)) == {"x": "float64", "y": "float64", "z": "float64"}
    import pickle
    assert pickle.loads(pickle.dumps(ml.bfloat16)) == ml.bfloat16
    with pytest.raises(TypeError, match="is not an ingot dtype"):
        ml.DType("complex64")


def test_constructor_forms_with_input_sizes(rng):
    """PyTorch's forms beside ingot's: Linear(128, 10), BatchNorm2d(64), LayerNorm(512),
    Conv2d(3, 64, kernel_size=3); a given input size is checked against the inferred one."""
    def compiled(block, shape):
        m = ml.Model()
        m += block(input="x", output=ml.IOKey("y", expose=True))
        return ml.compile(m, ml.ReferenceBackend(), shapes={"x": shape})

    for block in (ml.Linear(8, 10), ml.Linear(10), ml.Linear(dimension=10), ml.Linear(in_features=8, out_features=10)):
        shapes = compiled(block, [2, 8]).get_shapes()
        assert shapes["y"] == [2, 10] and shapes["linear_0.weight"] == [8, 10]
    with pytest.raises(ml.IngotError, match="a has K = 6 but b has K = 8"):
        compiled(ml.Linear(8, 10), [2, 6])
    with pytest.raises(TypeError, match="give the output size once"):
        ml.Linear(out_features=3, dimension=3)
    with pytest.raises(TypeError, match="the output size is missing"):
        ml.Linear()
    assert compiled(ml.BatchNorm2d(4), [2, 4, 3, 3]).get_shapes()["batch_norm2d_0.weight"] == [4]
    with pytest.raises(ml.IngotError, match="a dimension is 4 .* but must also be 3"):
        compiled(ml.BatchNorm2d(4), [2, 3, 3, 3])
    assert compiled(ml.BatchNorm2d(eps=1e-3), [2, 3, 3, 3]).get_shapes()["batch_norm2d_0.weight"] == [3]
    for block, weight in ((ml.LayerNorm(5), [5]), (ml.LayerNorm([4, 5]), [4, 5]), (ml.LayerNorm(normalized_dims=2), [4, 5]),
                          (ml.RMSNorm(5), [5]), (ml.RMSNorm([4, 5]), [4, 5])):
        shapes = compiled(block, [2, 4, 5]).get_shapes()
        assert [v for k, v in shapes.items() if k.endswith(".weight")] == [weight]
    with pytest.raises(ml.IngotError, match="a dimension is 6 .* but must also be 5"):
        compiled(ml.LayerNorm(6), [2, 4, 5])
    with pytest.raises(TypeError, match="normalized_shape or normalized_dims, not both"):
        ml.LayerNorm(5, normalized_dims=1)
    # values: LayerNorm(5) normalizes the last dim as PyTorch's does
    x = rng.normal(size=(2, 4, 5)).astype(np.float32)
    pm = compiled(ml.LayerNorm(5), [2, 4, 5])
    y = pm.evaluate(pm.randomize_params(), {"x": x})["y"]
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_visualize_draws_the_optimized_graph(tmp_path, monkeypatch):
    """compile(..., visualize=True, viz_options=...): DOT text, or SVG/PNG through Graphviz's dot;
    labels escaped; a clear error without dot; bad options rejected."""
    import shutil

    m = ml.Model()
    m += ml.Linear(8, 4)(input='x"quoted', output=ml.IOKey("y", expose=True))
    dot_path = tmp_path / "g.dot"
    ml.compile(m, ml.ReferenceBackend(), shapes={'x"quoted': [2, 8]}, visualize=True,
               viz_options={"format": "dot", "show_memory": True, "output_path": dot_path})
    text = dot_path.read_text()
    assert text.startswith("digraph ingot {") and '"n0" [label="matmul\\nfloat32 [2, 4] 32 B"];' in text
    assert 'input x\\"quoted\\nfloat32 [2, 8] 64 B' in text  # the quote escaped, not closing the label
    assert "values: " in text
    quiet = tmp_path / "q.dot"
    ml.compile(m, ml.ReferenceBackend(), shapes={'x"quoted': [2, 8]}, visualize=True,
               viz_options={"format": "dot", "show_shapes": False, "show_types": False, "output_path": str(quiet)})
    assert "[2, 8]" not in quiet.read_text() and "float32" not in quiet.read_text()
    if shutil.which("dot"):
        svg = tmp_path / "g.svg"
        ml.compile(m, ml.ReferenceBackend(), shapes={'x"quoted': [2, 8]}, visualize=True,
                   viz_options={"output_path": svg})
        assert svg.read_text().lstrip().startswith("<?xml") and "matmul" in svg.read_text()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ml.IngotError, match="Graphviz's `dot` program is not installed"):
        ml.compile(m, ml.ReferenceBackend(), shapes={'x"quoted': [2, 8]}, visualize=True,
                   viz_options={"format": "png", "output_path": tmp_path / "g.png"})
    assert not (tmp_path / "g.png").exists()
    with pytest.raises(TypeError, match="viz_options: unknown key 'colour'"):
        ml.compile(m, ml.ReferenceBackend(), visualize=True, viz_options={"colour": "red"})
    with pytest.raises(ml.IngotError, match="format 'pdf' is not one of svg, png, dot"):
        ml.compile(m, ml.ReferenceBackend(), visualize=True, viz_options={"format": "pdf"})
    with pytest.raises(TypeError, match="visualize must be True or False"):
        ml.compile(m, ml.ReferenceBackend(), visualize="yes")
    assert "visualize" in ml.compile_option_names() and "viz_options" in ml.compile_option_names()


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_save_intermediates_writes_every_value_of_each_evaluate(tmp_path, rng, backend):
    """compile(..., save_intermediates=True): each evaluate writes every intermediate tensor,
    named by its terminal, one directory per call; the results stay the user's outputs."""
    import struct

    be = ml.ReferenceBackend() if backend == "reference" else cpu()
    pm = ml.compile(ml.ExampleMLP(), be, shapes={"input": [2, 784]}, save_intermediates=True,
                    intermediate_dir=tmp_path / "npy")
    assert pm.output_names() == ["output"]
    p = pm.randomize_params(3)
    x = rng.normal(size=(2, 784)).astype(np.float32)
    out = pm.evaluate(p, {"input": x})
    assert list(out) == ["output"]
    first = tmp_path / "npy" / "evaluate_0000"
    files = sorted(f.name for f in first.iterdir())
    assert "relu_0.output.npy" in files and "linear_0.output.npy" in files, files
    hidden = np.maximum(x @ p["linear_0.weight"] + p["linear_0.bias"], 0)
    np.testing.assert_allclose(np.load(first / "relu_0.output.npy"), hidden, rtol=1e-4, atol=1e-5)
    _, grads = pm.evaluate(p, {"input": x}, output_gradients={"output": np.ones((2, 10), np.float32)})
    assert set(grads) == set(pm.gradient_names()) and (tmp_path / "npy" / "evaluate_0001").is_dir()
    st = ml.compile(ml.ExampleMLP(), be, shapes={"input": [2, 784]}, save_intermediates=True,
                    intermediate_dir=str(tmp_path / "st"), intermediate_format="safetensors")
    st.evaluate(p, {"input": x})
    data = (tmp_path / "st" / "evaluate_0000" / "intermediates.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    entry = header["relu_0.output"]
    a, b = entry["data_offsets"]
    assert entry["dtype"] == "F32" and entry["shape"] == [2, 256]
    np.testing.assert_allclose(np.frombuffer(data[8 + n + a:8 + n + b], np.float32).reshape(2, 256), hidden,
                               rtol=1e-4, atol=1e-5)
    with pytest.raises(ml.IngotError, match="intermediate_format 'csv' is not one of npy, safetensors"):
        ml.compile(ml.ExampleMLP(), be, save_intermediates=True, intermediate_format="csv")
    with pytest.raises(TypeError, match="save_intermediates must be True or False"):
        ml.compile(ml.ExampleMLP(), be, save_intermediates=1)
