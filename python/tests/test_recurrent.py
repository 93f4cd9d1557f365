"""ml.lstm, ml.gru and ml.rnn: against torch.nn.LSTM / GRU / RNN with the same weights (where
PyTorch is installed), against a NumPy loop of PyTorch's documented equations (always), and their
gradients against finite differences in float64."""
import numpy as np
import pytest

import ingot as ml


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def weights(gates, hidden, inputs, seed, dtype=np.float32):
    r = np.random.default_rng(seed)
    k = 1 / np.sqrt(hidden)
    shapes = [(gates * hidden, inputs), (gates * hidden, hidden), (gates * hidden,), (gates * hidden,)]
    return [r.uniform(-k, k, s).astype(dtype) for s in shapes]


def lstm_numpy(x, h, c, w_ih, w_hh, b_ih, b_hh, reverse=False):
    H = h.shape[1]
    ys = [None] * len(x)
    for t in (reversed(range(len(x))) if reverse else range(len(x))):
        g = x[t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, gg, o = sigmoid(g[:, :H]), sigmoid(g[:, H:2 * H]), np.tanh(g[:, 2 * H:3 * H]), sigmoid(g[:, 3 * H:])
        c = f * c + i * gg
        h = o * np.tanh(c)
        ys[t] = h
    return np.stack(ys), h, c


def gru_numpy(x, h, w_ih, w_hh, b_ih, b_hh):
    H = h.shape[1]
    ys = []
    for t in range(len(x)):
        gi, gh = x[t] @ w_ih.T + b_ih, h @ w_hh.T + b_hh
        r, z = sigmoid(gi[:, :H] + gh[:, :H]), sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
        n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
        h = (1 - z) * n + z * h
        ys.append(h)
    return np.stack(ys), h


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_matches_the_equations(reverse):
    T, B, I, H = 5, 2, 3, 4
    r = np.random.default_rng(0)
    x, h0, c0 = (r.standard_normal(s).astype(np.float32) for s in [(T, B, I), (B, H), (B, H)])
    w = weights(4, H, I, 1)
    ys, h, c = ml.lstm(x, h0, c0, *w, reverse=reverse)
    want = lstm_numpy(x, h0, c0, *w, reverse=reverse)
    for got, exp in zip((ys, h, c), want):
        np.testing.assert_allclose(np.asarray(got), exp, rtol=1e-5, atol=1e-6)


def test_gru_matches_the_equations():
    T, B, I, H = 4, 3, 2, 5
    r = np.random.default_rng(2)
    x, h0 = r.standard_normal((T, B, I)).astype(np.float32), r.standard_normal((B, H)).astype(np.float32)
    w = weights(3, H, I, 3)
    ys, h = ml.gru(x, h0, *w)
    want_ys, want_h = gru_numpy(x, h0, *w)
    np.testing.assert_allclose(np.asarray(ys), want_ys, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h), want_h, rtol=1e-5, atol=1e-6)


def test_against_torch_modules_with_copied_weights():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    T, B, I, H = 6, 2, 3, 4
    x = np.random.default_rng(4).standard_normal((B, T, I)).astype(np.float32)
    h0 = np.random.default_rng(5).standard_normal((1, B, H)).astype(np.float32)
    c0 = np.random.default_rng(6).standard_normal((1, B, H)).astype(np.float32)
    for kind in ("lstm", "gru", "rnn"):
        torch.manual_seed(7)
        module = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}[kind](I, H, batch_first=True)
        w = [getattr(module, n).detach().numpy() for n in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")]
        with torch.no_grad():
            if kind == "lstm":
                want, (want_h, _) = module(torch.from_numpy(x), (torch.from_numpy(h0), torch.from_numpy(c0)))
                ys, h, _ = ml.lstm(x, h0[0], c0[0], *w, batch_first=True)
            else:
                want, want_h = module(torch.from_numpy(x), torch.from_numpy(h0))
                ys, h = getattr(ml, kind)(x, h0[0], *w, batch_first=True)
        np.testing.assert_allclose(np.asarray(ys), want.numpy(), rtol=1e-5, atol=1e-6, err_msg=kind)
        np.testing.assert_allclose(np.asarray(h), want_h.numpy()[0], rtol=1e-5, atol=1e-6, err_msg=kind)


def test_lstm_gradients_match_finite_differences():
    T, B, I, H = 3, 2, 2, 3
    r = np.random.default_rng(8)
    x, h0, c0 = (r.standard_normal(s) for s in [(T, B, I), (B, H), (B, H)])
    w = weights(4, H, I, 9, np.float64)
    proj = r.standard_normal((T, B, H))

    def loss(x, w_ih, w_hh, b_ih):
        ys, h, c = ml.lstm(x, h0, c0, w_ih, w_hh, b_ih, w[3])
        return ml.sum(ys * proj) + ml.sum(c * c)

    args = [x, w[0], w[1], w[2]]
    grads = ml.grad(loss, argnums=(0, 1, 2, 3))(*args)
    eps = 1e-6
    for i, a in enumerate(args):
        num = np.zeros_like(a)
        for idx in np.ndindex(*a.shape):
            plus, minus = [b.copy() for b in args], [b.copy() for b in args]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            num[idx] = (float(loss(*plus)) - float(loss(*minus))) / (2 * eps)
        np.testing.assert_allclose(np.asarray(grads[i]), num, rtol=1e-6, atol=1e-8)


def test_bad_layouts_are_clear_errors():
    x = np.zeros((3, 2, 4), np.float32)
    w = weights(4, 5, 4, 0)
    with pytest.raises(ml.IngotError, match=r"w_hh must have shape \[20, 5\]"):
        ml.lstm(x, np.zeros((2, 5), np.float32), np.zeros((2, 5), np.float32), w[0], w[0], w[2], w[3])
    with pytest.raises(ml.IngotError, match=r"x must be \[T, B, I\]"):
        ml.gru(x[0], np.zeros((2, 5), np.float32), *weights(3, 5, 4, 0))
    with pytest.raises(ValueError, match="nonlinearity must be 'tanh' or 'relu'"):
        ml.rnn(x, np.zeros((2, 5), np.float32), *weights(1, 5, 4, 0), nonlinearity="gelu")
