"""compile(..., profile=True, profile_output=path): each compile stage, the passes inside optimize
and the CPU backend's steps inside lower, timed, as JSON that is also a Chrome trace."""
from __future__ import annotations

import json

import pytest

import ingot as ml


def test_profile_output_is_json_and_a_chrome_trace(tmp_path):
    path = tmp_path / "compile.json"
    ml.compile(ml.ExampleMLP(), ml.CpuBackend(), shapes={"input": [2, 784]}, profile=True, profile_output=path)
    j = json.loads(path.read_text())
    names = [s["name"] for s in j["stages"]]
    for want in ("flatten", "shape inference", "optimize", "pass fusion", "lower", "cpu: generate C++"):
        assert want in names, want
    assert any(n.startswith("cpu: build or load") for n in names)
    depth = {s["name"]: s["depth"] for s in j["stages"]}
    assert depth["optimize"] == 0 and depth["pass fusion"] == 1 and depth["cpu: generate C++"] == 1
    assert j["total_ms"] == pytest.approx(sum(s["ms"] for s in j["stages"] if s["depth"] == 0))
    assert [e["name"] for e in j["traceEvents"]] == names and all(e["ph"] == "X" for e in j["traceEvents"])


def test_profile_without_a_path_prints_a_table(capfd):
    ml.compile(ml.ExampleMLP(), ml.NumpyBackend(), shapes={"input": [2, 784]}, profile=True)
    err = capfd.readouterr().err
    assert "[ingot] compile profile (ms):" in err and "  pass fusion" in err


def test_profile_options_are_listed_and_checked():
    assert {"profile", "profile_output"} <= set(ml.compile_option_names())
    with pytest.raises(ml.IngotError, match="profile"):
        ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [2, 784]}, profile="often")


def test_trace_shapes_names_the_rule_that_sized_each_dimension(capfd):
    """trace_shapes=True: each shape-inference step that sized dimensions, with its rule."""
    ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [2, 784]}, trace_shapes=True)
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("[ingot] shape: ")]
    assert any("shapes['input']" in line and "'input'[0]" in line and line.endswith("= 2") for line in lines), lines
    assert any("matmul" in line and line.endswith("= 256") for line in lines), lines  # the first layer's width
    ml.compile(ml.ExampleMLP(), ml.ReferenceBackend(), shapes={"input": [2, 784]})
    assert "[ingot] shape:" not in capfd.readouterr().err
