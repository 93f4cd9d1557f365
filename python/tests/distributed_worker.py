"""One rank of python/tests/test_distributed.py's mpirun jobs (not a test module itself).

    mpirun -np N python distributed_worker.py collectives   every collective against NumPy, and a gradient
    mpirun -np 2 python distributed_worker.py late           rank 1 skips a collective: the others name it

Prints "rank R ok" when every check on that rank passed; exits 1 with the failure otherwise."""
from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

import ingot as ml

dist = ml.distributed


def operand(rank, shape, dtype):
    # Small non-negative integers: exact in every dtype, sums included.
    return ((3 * rank + 5 * np.arange(int(np.prod(shape)))) % 7).reshape(shape).astype(dtype)


def collectives():
    r, n = dist.rank(), dist.size()
    assert n > 1, "run under mpirun with several ranks"
    shape = (2 * n, 3)
    every = [operand(p, shape, np.float64) for p in range(n)]
    for dtype in ("int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"):
        x = ml.array(operand(r, shape, dtype))
        total = np.sum(every, axis=0)
        np.testing.assert_array_equal(np.asarray(dist.all_sum(x)), total.astype(dtype), err_msg=dtype)
        np.testing.assert_array_equal(np.asarray(dist.all_max(x)), np.max(every, axis=0).astype(dtype), err_msg=dtype)
        if dtype.startswith("float"):
            np.testing.assert_array_equal(np.asarray(dist.all_mean(x)), (total / n).astype(dtype), err_msg=dtype)
        np.testing.assert_array_equal(np.asarray(dist.all_gather(x)), np.concatenate(every).astype(dtype), err_msg=dtype)
        np.testing.assert_array_equal(np.asarray(dist.broadcast(x, root=n - 1)), every[n - 1].astype(dtype), err_msg=dtype)
        np.testing.assert_array_equal(np.asarray(dist.reduce_scatter(x)), total[2 * r:2 * r + 2].astype(dtype),
                                      err_msg=dtype)
    # The gradient of the sum over ranks of sum(w_r * all_sum(x_r)) w.r.t. x_r is the sum of the w's.
    w = [np.full((3,), p + 1.0, np.float32) for p in range(n)]
    g = ml.grad(lambda x: ml.sum(dist.all_sum(x) * ml.array(w[r])))(ml.array(np.ones(3, np.float32)))
    np.testing.assert_allclose(np.asarray(g), np.sum(w, axis=0))
    # Traced into a compiled function (the CPU backend runs them through its host callback).
    f = ml.compile(lambda x: dist.all_sum(x * 2.0) + 1.0)
    np.testing.assert_allclose(np.asarray(f(ml.array(np.full((4,), r, np.float32)))), 2.0 * sum(range(n)) + 1.0)
    # A logical model with a symbolic batch: all_gather's leading dimension is a new symbol.
    m = ml.Model()
    m.expose(ml.apply("all_gather", m.input("x"), group_size=n), "y")
    with tempfile.TemporaryDirectory(prefix="ingot-dist-") as cache:
        pm = ml.compile(m, ml.CpuBackend(cache_dir=cache), shapes={"x": ["N", 3]})
        y = pm.evaluate({}, {"x": np.full((2, 3), r, np.float32)})["y"]
    np.testing.assert_array_equal(np.asarray(y), np.repeat(np.arange(n, dtype=np.float32), 6).reshape(2 * n, 3))
    try:
        dist.all_sum(ml.array(np.zeros((2, 3 + (r == 1)), np.float32))).eval()
        raise AssertionError("mismatched shapes were not reported")
    except ml.IngotError as e:
        assert "rank 1 runs all_reduce(sum)" in str(e), str(e)
    dist.barrier()


def late():
    dist.set_timeout(2)
    if dist.rank() == 1:
        return  # as a rank that raised and went on would
    start = time.monotonic()
    try:
        dist.all_sum(ml.array(np.ones(4, np.float32))).eval()
        raise AssertionError("the late rank was not reported")
    except ml.IngotError as e:
        assert "rank 1 did not reach all_reduce(sum)" in str(e), str(e)
    assert time.monotonic() - start < 10


if __name__ == "__main__":
    {"collectives": collectives, "late": late}[sys.argv[1]]()
    print(f"rank {dist.rank()} ok", flush=True)
