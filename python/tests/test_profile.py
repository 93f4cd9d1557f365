"""ml.profile(): per-kernel times of evaluations, summary table and Chrome trace JSON."""
from __future__ import annotations

import json

import numpy as np
import pytest

import ingot as ml
from conftest import cpu


def mlp(backend):
    pm = ml.compile(ml.ExampleMLP(), backend, shapes={"input": [4, 784]})
    return pm, pm.randomize_params(), {"input": np.ones((4, 784), np.float32)}


@pytest.mark.parametrize("backend_name", ["reference", "cpu"])
def test_profile_records_each_kernel(backend_name, tmp_path):
    pm, p, x = mlp(ml.ReferenceBackend() if backend_name == "reference" else cpu())
    pm.evaluate(p, x)  # not recorded: outside the block
    with ml.profile() as prof:
        pm.evaluate(p, x)
        pm.evaluate(p, x)
    pm.evaluate(p, x)  # not recorded: after the block
    rows = prof.rows()
    assert rows and all(r["count"] == 2 and r["backend"] == backend_name for r in rows)
    assert abs(sum(r["share"] for r in rows) - 1) < 1e-9
    assert all(r["total_s"] >= 0 and r["mean_s"] * r["count"] == pytest.approx(r["total_s"]) for r in rows)
    text = prof.summary()
    assert "kernel" in text and "share" in text and rows[0]["name"] in text
    prof.write_chrome_trace(tmp_path / "trace.json")
    trace = json.loads((tmp_path / "trace.json").read_text())
    events = trace["traceEvents"]
    assert len(events) == sum(r["count"] for r in rows) == len(prof.events())
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)
    if backend_name == "cpu":
        assert all(r["name"].startswith(("k", "ref_")) for r in rows)


def test_profile_needs_the_with_block():
    with pytest.raises(RuntimeError, match="with ml.profile"):
        ml.profile().summary()
