"""Residual blocks and real CNNs on the CPU backend against the reference interpreter, under
every layout target (ml.compile(..., layout_target=...) and $INGOT_LAYOUT_TARGET), so one machine
covers what AVX2 and AVX-512 machines pick. The first two tests are the residual-block issue's
reproducers: before the fix the CPU backend was off by 1.3 (relative) with no error."""
import numpy as np
import pytest

import ingot as ml

TARGETS = ["nchw8c", "nchw16c", "nhwc", "nchw"]


def relative_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))


def residual_model(channels):
    m = ml.Model()
    m |= ml.Conv2d(channels, channels, kernel_size=3, padding=1, use_bias=False)(input="input", output="c0")
    m |= ml.Conv2d(channels, channels, kernel_size=3, padding=1, use_bias=False)(input="c0", output="c1")
    m |= ml.Add()(left="c1", right="input", output=ml.IOKey("y", expose=True))
    return m


@pytest.mark.parametrize("layout", TARGETS)
@pytest.mark.parametrize("level", ["medium", "high"])
@pytest.mark.parametrize("channels", [4, 16])
def test_conv_conv_plus_input_as_a_model(layout, level, channels):
    opts = dict(shapes={"input": [2, channels, 8, 8]}, inference=True, optimization_level=level, layout_target=layout)
    m = residual_model(channels)
    ref = ml.compile(m, ml.ReferenceBackend(), **opts)
    cpu = ml.compile(m, ml.CpuBackend(), **opts)
    params = ref.randomize_params(3)
    x = np.random.default_rng(0).uniform(-1, 1, (2, channels, 8, 8)).astype(np.float32)
    err = relative_error(cpu.evaluate(params, {"input": x})["y"], ref.evaluate(params, {"input": x})["y"])
    assert err < 1e-5, f"relative error {err} (float32 rounding is ~1e-7)"


@pytest.mark.parametrize("layout", TARGETS)
def test_conv_conv_plus_input_as_a_function(layout, monkeypatch):
    monkeypatch.setenv("INGOT_LAYOUT_TARGET", layout)
    rng = np.random.default_rng(1)
    x = ml.array(rng.uniform(-1, 1, (2, 16, 8, 8)).astype(np.float32))
    w0, w1 = (ml.array(rng.uniform(-0.2, 0.2, (16, 16, 3, 3)).astype(np.float32)) for _ in range(2))

    def block(x, w0, w1):
        return ml.conv2d(ml.conv2d(x, w0, padding=(1, 1)), w1, padding=(1, 1)) + x

    want = np.asarray(block(x, w0, w1))
    got = np.asarray(ml.compile(block)(x, w0, w1))
    assert relative_error(got, want) < 1e-5


def test_bad_layout_targets_are_clear_errors(monkeypatch):
    m = residual_model(4)
    with pytest.raises(ml.IngotError, match="unknown layout target 'nchw4c'"):
        ml.compile(m, ml.CpuBackend(), shapes={"input": [1, 4, 8, 8]}, layout_target="nchw4c")
    monkeypatch.setenv("INGOT_LAYOUT_TARGET", "blocked")
    with pytest.raises(ml.IngotError, match="INGOT_LAYOUT_TARGET: unknown layout target 'blocked'"):
        ml.compile(m, ml.CpuBackend(), shapes={"input": [1, 4, 8, 8]})


@pytest.mark.parametrize("layout", ["auto", "nchw8c", "nchw16c"])
def test_resnet18_logits_match_the_reference(layout):
    # Random weights with non-trivial batch-norm statistics, batch 2, 32x32.
    opts = dict(shapes={"input": [2, 3, 32, 32]}, inference=True, layout_target=layout)
    net = ml.ResNet18(num_classes=10)
    ref = ml.compile(net, ml.ReferenceBackend(), **opts)
    cpu = ml.compile(net, ml.CpuBackend(), **opts)
    rng = np.random.default_rng(2)
    params = dict(ref.randomize_params(4))
    for name, value in params.items():
        if name.endswith("running_var"):
            params[name] = rng.uniform(0.5, 2.0, value.shape).astype(np.float32)
        elif name.endswith("running_mean") or (value.ndim == 1 and name.endswith("bias")):
            params[name] = rng.uniform(-0.5, 0.5, value.shape).astype(np.float32)
    x = rng.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)
    want = ref.evaluate(params, {"input": x})["output"]
    got = cpu.evaluate(params, {"input": x})["output"]
    assert got.shape == (2, 10)
    assert relative_error(got, want) < 1e-4


@pytest.mark.parametrize("winograd", [True, False])
def test_winograd_and_direct_convs_keep_resnet_blocks_right(winograd):
    # Winograd kernels (the default where oneDNN has them: AVX-512, 16-channel blocks, constant
    # weights) round differently from direct convolutions (winograd=False); the logits stay
    # within float32 rounding of the reference either way, weights constant or passed.
    assert ml.CpuBackend().winograd and not ml.CpuBackend(winograd=False).winograd
    backend = ml.CpuBackend(winograd=winograd)
    opts = dict(shapes={"input": [2, 3, 32, 32]}, inference=True)
    net = ml.ResNet18(num_classes=10)
    ref = ml.compile(net, ml.ReferenceBackend(), **opts)
    params = ref.randomize_params(5)
    x = np.random.default_rng(3).uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)
    want = ref.evaluate(params, {"input": x})["output"]
    constant = ml.compile(net, backend, constant_keys=params, **opts).evaluate({}, {"input": x})["output"]
    assert relative_error(constant, want) < 1e-4
    passed = ml.compile(net, backend, **opts).evaluate(params, {"input": x})["output"]
    assert relative_error(passed, want) < 1e-4


def test_winograd_convs_keep_an_inf_in_the_input_where_the_reference_does():
    # A Winograd kernel's transform turned an inf into NaN (inf - inf) and spread it over its
    # tile; a Winograd conv whose input holds a NaN or an inf runs with the direct kernel.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 32, 12, 12)).astype(np.float32)
    x[0, 3, 4, 4] = np.inf
    x[1, 7, 9, 2] = np.nan
    m = ml.Model()
    m |= ml.Conv2d(32, 32, kernel_size=3, padding=1, use_bias=False)(input="input", output="a")
    m |= ml.MaxPool2d(2, 2)(input="a", output="p")  # keeps the conv's output in channel blocks
    m |= ml.Conv2d(32, 32, kernel_size=1, use_bias=False)(input="p", output=ml.IOKey("y", expose=True))
    opts = dict(shapes={"input": list(x.shape)}, inference=True)
    ref = ml.compile(m, ml.ReferenceBackend(), **opts)
    params = {k: np.abs(v) for k, v in ref.randomize_params(1).items()}  # an inf stays +inf
    want = ref.evaluate(params, {"input": x})["y"]
    # Constant weights: the convs that run Winograd kernels (with weights passed, direct ones).
    got = ml.compile(m, ml.CpuBackend(), constant_keys=params, **opts).evaluate({}, {"input": x})["y"]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    finite = np.isfinite(want)
    assert np.isinf(want).sum() > 0 and relative_error(got[finite], want[finite]) < 1e-4
