"""Hot-path auto-compile from Python: eager loops switch to a compiled executable after exactly N
evaluations (by counter, never by time), failures fall back to eager, compile regions, the
configuration API, and the INGOT_* environment variables in fresh processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ingot as ml
from conftest import assert_close


pytestmark = pytest.mark.usefixtures("fresh_hot_path")  # conftest.py


X = np.arange(12, dtype=np.float32).reshape(3, 4) / 10


def hot_graph(x):
    return ml.sum(ml.relu(x @ x.T) * 2.0)


def run_hot_graph(times):
    x = ml.array(X)
    return [hot_graph(x).item() for _ in range(times)]


def test_auto_compile_switches_after_exactly_threshold_evaluations(capfd):
    ml.set_compile_config(auto_compile=True, auto_compile_threshold=3, debug=True)
    eager = run_hot_graph(3)
    stats = ml.auto_compile_stats()
    assert (stats["evaluations"], stats["eager_runs"], stats["compiled_runs"], stats["compiles_started"]) == (3, 3, 0, 1)
    ml.wait_for_background_compiles()
    compiled = run_hot_graph(1)
    assert ml.auto_compile_stats()["compiled_runs"] == 1 and ml.auto_compile_stats()["compiles_finished"] == 1
    assert_close(compiled[0], eager[0])
    err = capfd.readouterr().err
    assert "[COMPILE] hot sequence transpose -> matmul -> relu -> mul -> sum (seen 3 times)" in err, err
    assert "[COMPILE] compile finished" in err


def test_an_injected_build_failure_falls_back_to_eager_with_one_warning(capfd):
    ml.set_compile_config(auto_compile=True, auto_compile_threshold=2, inject_build_failure=True)
    values = run_hot_graph(2)
    ml.wait_for_background_compiles()
    values += run_hot_graph(3)
    stats = ml.auto_compile_stats()
    assert (stats["compile_failures"], stats["compiled_runs"], stats["eager_runs"]) == (1, 0, 5)
    assert len(set(values)) == 1
    err = capfd.readouterr().err
    assert err.count("[COMPILE] warning: compile failed") == 1 and "injected build failure" in err


def test_compile_region_runs_its_body_as_one_unit_and_compiles_it():
    ml.set_compile_config(auto_compile_threshold=2)  # regions compile without INGOT_AUTO_COMPILE
    w = ml.array(X)

    def region_step(w):
        with ml.compile_region("loop"):
            y = hot_graph(w)
            w = w * 0.5
            ml.eval(y, w)
        return y, w

    for _ in range(2):
        y, w = region_step(w)
    ml.wait_for_background_compiles()
    assert ml.auto_compile_stats()["compiled_runs"] == 0
    y, w = region_step(w)
    stats = ml.auto_compile_stats()
    assert stats["compiles_finished"] == 1 and stats["compiled_runs"] == 1 and stats["evaluations"] == 3
    assert_close(y, hot_graph(ml.array(X * 0.5 ** 2)))
    assert_close(w, X * 0.5 ** 3)


def test_a_region_defers_eval_and_an_exception_drops_the_deferred_work():
    a = ml.ones(3) * 2.0
    with ml.compile_region("deferred"):
        ml.eval(a)
        evaluations = ml.auto_compile_stats()["evaluations"]
    assert ml.auto_compile_stats()["evaluations"] == evaluations + 1  # at the end of the block
    b = ml.ones(3) * 3.0
    with pytest.raises(KeyError):
        with ml.compile_region("failing"):
            ml.eval(b)
            raise KeyError("stop")
    assert ml.auto_compile_stats()["evaluations"] == evaluations + 1  # dropped, not run
    region = ml.compile_region("twice")
    with region:
        with pytest.raises(ml.IngotError, match="compile_region 'twice' is already open"):
            region.__enter__()


def test_compile_config_round_trip_and_errors():
    ml.set_compile_config(debug=True, auto_compile_threshold=7, instruction_log=None)
    config = ml.compile_config()
    assert config["debug"] is True and config["auto_compile_threshold"] == 7 and config["backend"] == "reference"
    assert set(config) == {"disable_compile", "auto_compile", "auto_compile_threshold", "compile_all", "debug",
                           "instruction_log", "backend", "inject_build_failure"}
    with pytest.raises(TypeError, match="unknown setting 'treshold' \\(valid: disable_compile, auto_compile"):
        ml.set_compile_config(treshold=3)
    with pytest.raises(TypeError, match="framework emitters cannot build compiled functions"):
        ml.set_compile_config(backend=ml.NumpyBackend())
    with pytest.raises(TypeError, match="'debug' must be True or False, got 1"):
        ml.set_compile_config(debug=1)
    with pytest.raises(ml.IngotError, match="auto_compile_threshold must be >= 1, got 0"):
        ml.set_compile_config(auto_compile_threshold=0)


# A fresh process reads the INGOT_* variables at its first evaluation: an eager loop, then a
# wait for the background build, then three more evaluations.
SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    import ingot as ml
    x = ml.array(np.arange(16, dtype=np.float32).reshape(4, 4) / 10)
    f = ml.compile(lambda v: v * 2.0)
    f(x)
    def step():
        return ml.sum(ml.relu(x @ x) * 2.0).item()
    n = ml.compile_config()["auto_compile_threshold"]
    values = [step() for _ in range(n)]
    ml.wait_for_background_compiles()
    before = ml.auto_compile_stats()
    values += [step() for _ in range(3)]
    print(json.dumps({"before": before, "after": ml.auto_compile_stats(), "values": values,
                      "compile_count": ml.compile_count(), "config": ml.compile_config()}))
""")


def run_fresh(env_vars, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGOT_") or k == "INGOT_CACHE_DIR"}
    env.update(env_vars)
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_auto_compile_environment_in_a_fresh_process(tmp_path):
    log = tmp_path / "instructions.log"
    out, err = run_fresh({"INGOT_AUTO_COMPILE": "1", "INGOT_AUTO_COMPILE_THRESHOLD": "4", "INGOT_DEBUG_COMPILE": "1",
                          "INGOT_INSTRUCTION_LOG": str(log)}, tmp_path)
    assert out["config"]["auto_compile"] and out["config"]["auto_compile_threshold"] == 4
    step_before = out["before"]
    assert step_before["compiled_runs"] == 0 and step_before["compiles_finished"] == 1
    assert out["after"]["compiled_runs"] == 3 and out["compile_count"] == 1
    assert len(set(out["values"])) == 1
    assert "[COMPILE] hot sequence matmul -> relu -> mul -> sum (seen 4 times)" in err, err
    assert "[COMPILE] compile started" in err and "[COMPILE] compile finished" in err
    assert "[COMPILE] speedup matmul -> relu -> mul -> sum: eager" in err
    assert "[COMPILE] compiled function for float32[4, 4]" in err
    modes = [line.split(" mode=")[1].split()[0] for line in log.read_text().splitlines() if "ops=matmul" in line]
    assert modes == ["eager"] * 4 + ["compiled"] * 3


@pytest.mark.parametrize("env, all_compiled, compile_count", [
    ({"INGOT_COMPILE": "1"}, True, 1),  # every graph compiled at its first evaluation
    ({"INGOT_DISABLE_COMPILE": "1", "INGOT_AUTO_COMPILE": "1"}, False, 0),  # nothing compiled at all
])
def test_compile_everything_and_disable_in_a_fresh_process(tmp_path, env, all_compiled, compile_count):
    out, _ = run_fresh(env, tmp_path)
    stats = out["after"]
    assert stats["compiled_runs"] == (stats["evaluations"] if all_compiled else 0) and stats["evaluations"] > 10
    assert out["compile_count"] == compile_count
    assert len(set(out["values"])) == 1


def test_a_bad_environment_value_names_the_variable(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGOT_") or k == "INGOT_CACHE_DIR"}
    env["INGOT_AUTO_COMPILE_THRESHOLD"] = "ten"
    r = subprocess.run([sys.executable, "-c", "import ingot as ml; (ml.ones(2) * 2.0).tolist()"], env=env,
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0 and "IngotError: Environment variable INGOT_AUTO_COMPILE_THRESHOLD='ten'" in r.stderr
