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


def mpirun(n, mode):
    if shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)")
    if not dist.mpi_available():
        pytest.skip("ingot was built without MPI (apt-get install libopenmpi-dev, then rebuild)")
    root = ["--allow-run-as-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    env = dict(os.environ, INGOT_DISTRIBUTED_TIMEOUT="60")
    return subprocess.run(["mpirun", "--oversubscribe", *root, "-np", str(n), sys.executable, WORKER, mode],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.parametrize("n", [2, 4])
def test_collectives_across_ranks_match_numpy(n):
    p = mpirun(n, "collectives")
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(n):
        assert f"rank {r} ok" in p.stdout, p.stdout + p.stderr


def test_a_late_rank_is_named_within_the_timeout():
    p = mpirun(2, "late")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank 0 ok" in p.stdout and "rank 1 ok" in p.stdout, p.stdout + p.stderr
