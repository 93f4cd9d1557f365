"""Control flow in logical models: ml.If, ml.While and ml.Scan blocks. The seed documents' two
examples run as written (with ingot's block names), on the reference and CPU backends, against
NumPy; gradients through the blocks against finite differences in float64; the
dynamic_control_flow rule and the errors a user meets."""
import numpy as np
import pytest

import ingot as ml
from conftest import cpu
from control_flow_models import recurrent_block, rnn_scan, seed_if_model, seed_while_model

RTOL = 1e-5


def backends():
    return [ml.ReferenceBackend(), cpu()]


@pytest.mark.parametrize("backend", backends(), ids=["reference", "cpu"])
def test_the_seeds_if_example(backend):
    model = seed_if_model()
    pm = ml.compile(model, backend, shapes={"input": [8, 32]}, types={"is_training": ml.bool},
                    dynamic_control_flow=True)
    params = pm.randomize_params(seed=1)
    x = np.random.default_rng(0).standard_normal((8, 32)).astype(np.float32)
    hidden = x @ np.asarray(params["linear_0.weight"]) + np.asarray(params["linear_0.bias"])
    off = pm.evaluate(params, {"input": x, "is_training": np.array(False)})["hidden_processed"]
    np.testing.assert_allclose(np.asarray(off), hidden, rtol=RTOL, atol=1e-5)
    on = np.asarray(pm.evaluate(params, {"input": x, "is_training": np.array(True)})["hidden_processed"])
    kept = on != 0
    assert 0.3 < kept.mean() < 0.7, "dropout with p = 0.5 keeps about half"
    np.testing.assert_allclose(on[kept], 2 * hidden[kept], rtol=RTOL, atol=1e-5)


def test_the_seeds_if_example_needs_dynamic_control_flow():
    with pytest.raises(ml.IngotError, match="dynamic_control_flow"):
        ml.compile(seed_if_model(), ml.ReferenceBackend(), shapes={"input": [8, 32]})
    # Fixed at compile time, the branch folds away and no option is needed.
    pm = ml.compile(seed_if_model(), ml.ReferenceBackend(), shapes={"input": [8, 32]},
                    constant_keys={"is_training": np.array(False)})
    assert " if(" not in pm.graph_text()


@pytest.mark.parametrize("backend", backends(), ids=["reference", "cpu"])
def test_the_seeds_while_example(backend):
    pm = ml.compile(seed_while_model(), backend, shapes={"initial_state": [4, 16], "max_steps": []},
                    dynamic_control_flow=True)
    params = pm.randomize_params(seed=2)
    w = np.asarray(params["while_0.body.linear_0.weight"])
    b = np.asarray(params["while_0.body.linear_0.bias"])
    s0 = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    for steps in (0, 1, 5):
        got = pm.evaluate(params, {"initial_state": s0, "max_steps": np.float32(steps)})["final_state"]
        want = s0
        for _ in range(steps):
            want = np.tanh(want @ w + b)
        np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=1e-5)


def test_a_data_dependent_while_needs_dynamic_control_flow():
    with pytest.raises(ml.IngotError, match="dynamic_control_flow.*|max_steps"):
        ml.compile(seed_while_model(), ml.ReferenceBackend(), shapes={"initial_state": [4, 16], "max_steps": []})


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("backend", backends(), ids=["reference", "cpu"])
def test_scan_is_an_rnn(backend, reverse):
    # Neither result is exposed: both are asked for (otherwise the canonical output alone is one).
    pm = ml.compile(rnn_scan(reverse), backend, shapes={"xs": [6, 2, 3], "h0": [2, 5]}, outputs=["hs", "last"])
    p = {k: np.asarray(v) for k, v in pm.randomize_params(seed=3).items()}
    xs = np.random.default_rng(4).standard_normal((6, 2, 3)).astype(np.float32)
    h0 = np.random.default_rng(5).standard_normal((2, 5)).astype(np.float32)
    out = pm.evaluate(p, {"xs": xs, "h0": h0})
    h, hs = h0, np.zeros((6, 2, 5), np.float32)
    for t in (reversed(range(6)) if reverse else range(6)):
        h = np.tanh(xs[t] @ p["scan_0.body.linear_0.weight"] + h @ p["scan_0.body.linear_1.weight"]
                    + p["scan_0.body.linear_1.bias"])
        hs[t] = h
    np.testing.assert_allclose(np.asarray(out["hs"]), hs, rtol=RTOL, atol=1e-5)
    np.testing.assert_allclose(np.asarray(out["last"]), h, rtol=RTOL, atol=1e-5)


def test_gradients_through_scan_and_if_match_finite_differences():
    model = rnn_scan()
    model |= ml.If("flip", ml.Model.primitive("neg", ["input"])(input="last", output="z"),
                   ml.Identity()(input="last", output="z"))
    model |= ml.Model.primitive("sum", ["input"])(input="z", output=ml.IOKey("loss", expose=True))
    shapes = {"xs": [3, 2, 3], "h0": [2, 5]}
    types = {"xs": ml.float64, "h0": ml.float64, "flip": ml.bool, "scan_0.body.linear_0.weight": ml.float64,
             "scan_0.body.linear_1.weight": ml.float64, "scan_0.body.linear_1.bias": ml.float64}
    pm = ml.compile(model, ml.ReferenceBackend(), shapes=shapes, types=types, dynamic_control_flow=True)
    params = {k: np.asarray(v) for k, v in pm.randomize_params(seed=6).items()}
    rng = np.random.default_rng(7)
    inputs = {"xs": rng.standard_normal((3, 2, 3)), "h0": rng.standard_normal((2, 5))}
    for flip in (False, True):
        data = dict(inputs, flip=np.array(flip))
        _, grads = pm.evaluate(params, data, output_gradients={"loss": np.float64(1.0)})
        name = "scan_0.body.linear_1.weight"
        eps, (i, j) = 1e-6, (1, 2)
        plus, minus = dict(params), dict(params)
        plus[name] = params[name].copy()
        plus[name][i, j] += eps
        minus[name] = params[name].copy()
        minus[name][i, j] -= eps
        fd = (float(pm.evaluate(plus, data)["loss"]) - float(pm.evaluate(minus, data)["loss"])) / (2 * eps)
        np.testing.assert_allclose(np.asarray(grads[name])[i, j], fd, rtol=1e-6, atol=1e-8)


def test_control_blocks_errors_name_what_is_wrong():
    with pytest.raises(ml.IngotError, match="cannot parse the expression"):
        ml.While("step <", recurrent_block(), initial_state={"state": "s"}, loop_vars={"state": "new_state"},
                 output_vars={"out": "state"})
    with pytest.raises(ml.IngotError, match="has no next value"):
        ml.While("step < 3", recurrent_block(), initial_state={"state": "s", "step": 0},
                 loop_vars={"state": "new_state"}, output_vars={"out": "state"})
    with pytest.raises(ml.IngotError, match="same outputs"):
        ml.If("p", ml.Identity()(input="x", output="y"), ml.Identity()(input="x", output="z"))
    with pytest.raises(TypeError, match="block"):
        ml.If("p", "not a block", ml.Identity())


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_recurrent_zoo_blocks_match_torch_nn(kind):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")
    torch.manual_seed(0)
    extra = {"nonlinearity": "relu"} if kind == "RNN" else {}
    ref = getattr(torch.nn, kind)(3, 4, num_layers=2, batch_first=True, bidirectional=True, **extra).double()
    model = ml.Model()
    model |= getattr(ml, kind)(3, 4, num_layers=2, batch_first=True, bidirectional=True, **extra)(
        input="x", output="y", h_n=ml.IOKey("h_n", expose=True))
    name = kind.lower() + "_0."
    types = {"x": ml.float64}
    types.update({name + k: ml.float64 for k in ref.state_dict()})
    pm = ml.compile(model, cpu(), shapes={"x": [2, 5, 3]}, types=types)
    params = {name + k: v.detach().numpy() for k, v in ref.state_dict().items()}  # PyTorch's names and layout
    x = np.random.default_rng(8).standard_normal((2, 5, 3))
    out = pm.evaluate(params, {"x": x})
    want_y, want_h = ref(torch.from_numpy(x))
    if kind == "LSTM":
        want_h = want_h[0]
    np.testing.assert_allclose(np.asarray(out["y"]), want_y.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out["h_n"]), want_h.detach().numpy(), rtol=1e-10, atol=1e-12)
