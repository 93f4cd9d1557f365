"""ml.distributed: the size-1 group of a plain run here, and jobs of 2 and 4 ranks through mpirun
(distributed_worker.py; skipped when mpirun or ingot's MPI support is missing)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import ingot as ml

dist = ml.distributed
WORKER = os.path.join(os.path.dirname(__file__), "distributed_worker.py")


def test_a_plain_run_is_a_group_of_one(rng):
    dist.init()
    assert (dist.rank(), dist.size()) == (0, 1)
    dist.barrier()
    x = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
    for f in (dist.all_sum, dist.all_mean, dist.all_max, dist.all_gather, dist.reduce_scatter, dist.broadcast):
        np.testing.assert_array_equal(np.asarray(f(ml.array(x))), x, err_msg=f.__name__)
    g = ml.grad(lambda v: ml.sum(dist.all_sum(v) * v))(ml.array(x))
    np.testing.assert_allclose(np.asarray(g), 2 * x, rtol=1e-6)


def test_mistakes_are_clear_errors():
    with pytest.raises(ml.IngotError, match="a mean needs a float dtype, got int32"):
        dist.all_mean(ml.array(np.ones(2, np.int32))).eval()
    with pytest.raises(ml.IngotError, match="root 1 is not a rank of a group of 1"):
        dist.broadcast(ml.array(np.ones(2, np.float32)), root=1)
    with pytest.raises(ml.IngotError, match=">= 0"):
        dist.set_timeout(-1)


def mpirun(n, mode, timeout=300, script=WORKER):
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)")
    if not dist.mpi_available():
        pytest.skip("ingot was built without MPI (apt-get install libopenmpi-dev, then rebuild)")
    root = ["--allow-run-as-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    env = dict(os.environ, INGOT_DISTRIBUTED_TIMEOUT="60")
    args = [mode] if mode else []
    return subprocess.run(["mpirun", "--oversubscribe", *root, "-np", str(n), sys.executable, script, *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_across_ranks_match_numpy(n):
    p = mpirun(n, "collectives")
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(n):
        assert f"rank {r} ok" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("n", [2, 4])
def test_data_parallel_training_equals_single_process_training(n):
    pytest.importorskip("yaml", reason="PyYAML reads the signal configuration (pip install pyyaml)")
    p = mpirun(n, "train")
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(n):
        assert f"rank {r} ok" in p.stdout, p.stdout + p.stderr


def test_a_rank_that_dies_mid_training_ends_the_job_naming_it():
    p = mpirun(2, "killed", timeout=120)
    assert p.returncode != 0, p.stdout + p.stderr
    assert "rank 0 ok" not in p.stdout
    out = p.stdout + p.stderr
    assert "rank 1" in out, out  # mpirun's report, or ingot's "rank 1 did not reach ..." on rank 0


def test_a_group_of_one_trains_data_parallel_as_without_it(rng):
    body = ml.Model()
    body += ml.Linear(3)
    tm = ml.TrainModel(body)
    tm.add_loss(ml.CrossEntropyLoss(), {"input": "output", "target": "target"})
    plain = ml.compile_train_step(tm, ml.CpuBackend(), ml.SGD(lr=0.1), shapes={"input": [6, 4]})
    dp = ml.compile_train_step(tm, ml.CpuBackend(), ml.SGD(lr=0.1), shapes={"input": [6, 4]}, data_parallel=True)
    assert dp.data_parallel and dp.group_size == 1 and not plain.data_parallel
    assert "all_reduce_start" in dp.graph_text() and "all_reduce_wait" in dp.graph_text()
    p1, p2 = plain.randomize_params(0), dp.randomize_params(0)
    s1, s2 = plain.init_state(p1), dp.init_state(p2)
    batch = {"input": rng.uniform(-1, 1, (6, 4)).astype(np.float32), "target": rng.integers(0, 3, 6)}
    for _ in range(3):
        assert abs(plain.run(p1, s1, batch)["loss"] - dp.run(p2, s2, batch)["loss"]) < 1e-6
    for k in p1:
        np.testing.assert_allclose(p1[k], p2[k], rtol=1e-6, atol=1e-7)
    with pytest.raises(TypeError, match="unknown option 'data_paralel'"):
        ml.compile_train_step(tm, ml.CpuBackend(), ml.SGD(), data_paralel=True)
    with pytest.raises(ml.IngotError, match="gradient_bucket_bytes"):
        ml.compile_train_step(tm, ml.CpuBackend(), ml.SGD(), gradient_bucket_bytes=-1)


def test_shard_batch_and_its_errors():
    batch = {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "y": np.arange(4)}
    np.testing.assert_array_equal(dist.shard_batch(batch)["x"], batch["x"])  # a group of one
    with pytest.raises(ml.IngotError, match="axis 2 is out of range for 'x'"):
        dist.shard_batch(batch, axis=2)


def test_signal_configuration_errors_are_clear(tmp_path, monkeypatch):
    pytest.importorskip("yaml", reason="PyYAML reads the signal configuration (pip install pyyaml)")
    ml.signal.reset_config()
    monkeypatch.delenv("INGOT_CONFIG", raising=False)
    with pytest.raises(ml.IngotError, match="no configuration; set INGOT_CONFIG"):
        ml.signal.context("training_loop")
    good = tmp_path / "config.yaml"
    good.write_text("signals:\n  training_loop:\n    compile: true\n    shard: {axis: 0, workers: [0]}\n"
                    "  eval_loop:\n    compile: false\n")
    monkeypatch.setenv("INGOT_CONFIG", str(good))
    with ml.signal.context("training_loop") as ctx:  # read from INGOT_CONFIG
        assert ctx.sharded and ctx.config.compile and (ctx.rank, ctx.size) == (0, 1)
        assert ml.signal.current() is ctx
        np.testing.assert_array_equal(ctx.shard({"a": np.ones((2, 2), np.float32)})["a"], np.ones((2, 2)))
    assert ml.signal.current() is None
    with pytest.raises(ml.IngotError, match="signal context 'training' is not in .*config.yaml .contexts there: eval_loop, training_loop"):
        ml.signal.context("training")
    with pytest.raises(ml.IngotError, match="has no shard settings"):
        with ml.signal.context("eval_loop") as ctx:
            ctx.shard({"a": np.ones(2)})
    cases = {
        "signals:\n  t:\n    shard: {axis: -1, workers: [0]}\n": "shard axis must be a non-negative integer, got -1",
        "signals:\n  t:\n    shard: {axis: x, workers: [0]}\n": "shard axis must be a non-negative integer, got 'x'",
        "signals:\n  t:\n    shard: {axis: 0, workers: []}\n": "shard workers must be a non-empty list",
        "signals:\n  t:\n    shard: {axis: 0, workers: [0, 0]}\n": "list a rank twice",
        "signals:\n  t:\n    shard: {axes: 0}\n": "shard has an unknown key 'axes'",
        "signals:\n  t:\n    compiled: true\n": "unknown key 'compiled' .valid keys: compile, shard.",
        "signals:\n  t:\n    compile: yes please\n": "compile must be true or false",
        "signals: [1, 2]\n": "'signals' must map context names",
        "signals:\n  t: {\n": "not valid YAML",
    }
    for text, message in cases.items():
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(ml.IngotError, match=message):
            ml.signal.load_config(bad)
    two = tmp_path / "two.yaml"
    two.write_text("training_loop:\n  shard: {axis: 0, workers: [0, 1]}\n")  # contexts at the top level
    ml.signal.load_config(two)
    with pytest.raises(ml.IngotError, match=r"workers \[0, 1\] must be the ranks of this launch, 0 to 0 .it has 1; start 2 with mpirun -np 2"):
        ml.signal.context("training_loop")
    with pytest.raises(ml.IngotError, match="cannot read"):
        ml.signal.load_config(tmp_path / "missing.yaml")
    ml.signal.reset_config()


def test_the_data_parallel_example_trains_on_two_ranks():
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "data_parallel.py")
    p = mpirun(2, None, script=example)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "epoch 2: loss" in p.stdout and "rank 1 of 2:" in p.stdout, p.stdout + p.stderr


def test_a_late_rank_is_named_within_the_timeout():
    p = mpirun(2, "late")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank 0 ok" in p.stdout and "rank 1 ok" in p.stdout, p.stdout + p.stderr
