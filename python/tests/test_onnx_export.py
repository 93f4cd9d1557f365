"""ml.onnx.save: ingot models written as ONNX, checked by ONNX's own checker (onnx.checker with
full shape inference), read back by ml.onnx.load and compared with the original on both
backends, and (where onnxruntime is installed) run by ONNX Runtime against ingot's results;
the round trip import -> export of ONNX's own real models (onnx/backend/test/data/light)
matches their expected outputs. Skipped without `onnx` (scripts/python-test.sh installs it)."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import ingot as ml

from conftest import cpu, onnx_runner_feed

HAVE_ONNX = importlib.util.find_spec("onnx") is not None
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None
pytestmark = pytest.mark.skipif(not HAVE_ONNX, reason="onnx is not installed (pip install onnx==1.22.0)")


def cnn():
    m = ml.Model()
    m |= ml.Conv2d(3, 8, kernel_size=3, padding=1)
    m += ml.BatchNorm2d()
    m += ml.Relu()
    m += ml.MaxPool2d(2)
    m += ml.GlobalAvgPool2d()(output="hidden")
    m |= ml.Linear(dimension=5)(input="hidden", output=ml.IOKey("logits", expose=True))
    m |= ml.Softmax()(input="logits", output=ml.IOKey("probs", expose=True))
    return m


def _check(data: bytes):
    import onnx

    model = onnx.load_from_string(data)
    onnx.checker.check_model(model, full_check=True)  # structure, types, and ONNX's shape inference
    return model


@pytest.mark.parametrize("optimized", [False, True])
def test_model_round_trips_through_onnx(tmp_path, rng, optimized):
    shapes = {"input": ["N", 3, 8, 8]}
    pm = ml.compile(cnn(), ml.ReferenceBackend(), shapes=shapes, inference=True)
    params = pm.randomize_params(3)
    x = rng.normal(size=(2, 3, 8, 8)).astype(np.float32)
    want = pm.evaluate(params, {"input": x})
    path = tmp_path / "cnn.onnx"
    assert ml.onnx.save(cnn(), path, params=params, shapes=shapes, optimized=optimized) is None
    proto = _check(path.read_bytes())
    assert [i.name for i in proto.graph.input] == ["input"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert sorted(o.name for o in proto.graph.output) == ["logits", "probs"]
    back = ml.onnx.load(path)
    for backend in (ml.ReferenceBackend(), cpu()):
        got = ml.compile(back, backend).evaluate({}, {"input": x})
        for name in ("logits", "probs"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_physical_model_saves_its_optimized_graph_as_bytes(rng):
    pm = ml.compile(cnn(), cpu(), shapes={"input": [1, 3, 8, 8]}, inference=True)
    params = pm.randomize_params(1)
    data = ml.onnx.save(pm, params=params)
    assert isinstance(data, bytes)
    _check(data)
    x = rng.normal(size=(1, 3, 8, 8)).astype(np.float32)
    got = ml.compile(ml.onnx.load(data), ml.ReferenceBackend()).evaluate({}, {"input": x})
    np.testing.assert_allclose(got["probs"], pm.evaluate(params, {"input": x})["probs"], rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not HAVE_ORT, reason="onnxruntime is not installed: ONNX Runtime not compared")
def test_onnx_runtime_runs_the_export_with_ingots_results(rng):
    import onnxruntime as ort

    shapes = {"input": ["N", 3, 8, 8]}
    pm = ml.compile(cnn(), ml.ReferenceBackend(), shapes=shapes, inference=True)
    params = pm.randomize_params(5)
    x = rng.normal(size=(4, 3, 8, 8)).astype(np.float32)
    want = pm.evaluate(params, {"input": x})
    sess = ort.InferenceSession(ml.onnx.save(cnn(), params=params, shapes=shapes), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"input": x})))
    for name in ("logits", "probs"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["resnet50", "inception_v2", "squeezenet"])
def test_onnx_real_models_survive_import_then_export(name):
    """ONNX's own test models, imported, exported by ingot, imported again: the expected output
    still comes out (ONNX's runner's inputs and tolerance)."""
    import onnx
    from onnx import numpy_helper

    light = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    proto = onnx.load(str(light / f"light_{name}.onnx"))
    data = ml.onnx.save(ml.onnx.load(light / f"light_{name}.onnx"))
    _check(data)
    back = ml.onnx.load(data)
    feed = onnx_runner_feed(proto)
    got = ml.compile(back, ml.ReferenceBackend()).evaluate({}, feed)
    want = numpy_helper.to_array(onnx.load_tensor(str(light / f"light_{name}_output_0.pb")))
    np.testing.assert_allclose(got[proto.graph.output[0].name], want, rtol=1e-3, atol=1e-7)


def test_bad_requests_are_ingot_errors():
    with pytest.raises(ml.IngotError, match="no values for the parameters"):
        ml.onnx.save(cnn(), shapes={"input": [1, 3, 8, 8]})
    with pytest.raises(ml.IngotError, match="expected an ingot Model or PhysicalModel"):
        ml.onnx.save("not a model")
    pm = ml.compile(cnn(), ml.ReferenceBackend(), shapes={"input": [1, 3, 8, 8]})
    with pytest.raises(ml.IngotError, match="a PhysicalModel is saved as compiled"):
        ml.onnx.save(pm, shapes={"input": [1, 3, 8, 8]}, params=pm.randomize_params())
