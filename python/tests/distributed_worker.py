"""One rank of python/tests/test_distributed.py's mpirun jobs (not a test module itself).

    mpirun -np N python distributed_worker.py collectives   every collective against NumPy, and a gradient
    mpirun -np 2 python distributed_worker.py late           rank 1 skips a collective: the others name it
    mpirun -np N python distributed_worker.py train          data-parallel training against single-process
                                                            training, checkpoints, a signal context
    mpirun -np 2 python distributed_worker.py killed         rank 1 dies mid-training: the job ends, naming it

Prints "rank R ok" when every check on that rank passed; exits 1 with the failure otherwise."""
from __future__ import annotations

import os
import signal
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


def classifier(reduction):
    body = ml.Model()
    body += ml.Linear(8)
    body += ml.Tanh()
    body += ml.Linear(3)
    tm = ml.TrainModel(body)
    tm.add_loss(ml.CrossEntropyLoss("none"), {"input": "output", "target": "target"}, reduction=reduction, name="ce")
    tm.add_regularization("l2", 0.01, "*weight")
    tm.add_metric(ml.ClassAccuracy(), {"input": "output", "target": "target"}, "accuracy")
    return tm


def batches(n, steps):
    rng = np.random.default_rng(0)
    for _ in range(steps):
        yield {"input": rng.uniform(-1, 1, (n, 4)).astype(np.float32), "target": rng.integers(0, 3, n)}


def identical_across_ranks(params):
    for name, v in params.items():
        np.testing.assert_array_equal(v, np.asarray(dist.broadcast(ml.array(v))), err_msg=name)


def train():
    n, r = dist.size(), dist.rank()
    local = 4
    for reduction, optimizer in (("mean", ml.Adam(lr=0.02)), ("sum", ml.SGD(lr=0.05, momentum=0.9))):
        single = ml.compile_train_step(classifier(reduction), ml.CpuBackend(), optimizer, shapes={"input": [local * n, 4]})
        dp = ml.compile_train_step(classifier(reduction), ml.CpuBackend(), optimizer, shapes={"input": [local, 4]},
                                   data_parallel=True, gradient_bucket_bytes=128)
        assert dp.data_parallel and dp.group_size == n
        ps = single.randomize_params(1)
        # Other ranks start elsewhere: the first run gives them rank 0's parameters.
        pd = {k: v.copy() for k, v in ps.items()} if r == 0 else dp.randomize_params(50 + r)
        ss, sd = single.init_state(ps), dp.init_state(pd)
        for step, batch in enumerate(batches(local * n, 20)):
            a = single.run(ps, ss, batch)
            b = dp.run(pd, sd, dist.shard_batch(batch))
            assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]), (reduction, step, a["loss"], b["loss"])
            assert abs(float(a["metrics"]["accuracy"]) - float(b["metrics"]["accuracy"])) < 1e-6
            identical_across_ranks(pd)
        for k in ps:
            np.testing.assert_allclose(pd[k], ps[k], rtol=1e-4, atol=1e-5, err_msg=k)

    # Checkpoints: only rank 0 writes; every rank can read the file back.
    tag = int(np.asarray(dist.broadcast(ml.array(np.array([time.time_ns() % 10**9], np.int64))))[0])
    mine = f"{tempfile.gettempdir()}/ingot_dp_{tag}_{r}.safetensors"
    dp.save_checkpoint(mine, pd, sd)
    assert os.path.exists(mine) == (r == 0), mine
    loaded = dp.randomize_params(9)
    loaded_state = dp.init_state(loaded)
    dp.load_checkpoint(f"{tempfile.gettempdir()}/ingot_dp_{tag}_0.safetensors", loaded, loaded_state)
    assert loaded_state.step == sd.step
    for k in pd:
        np.testing.assert_array_equal(loaded[k], pd[k], err_msg=k)
    dist.barrier()

    # A signal context from a YAML file: the step is given the global batch and shards it itself.
    config = f"{tempfile.gettempdir()}/ingot_dp_{tag}_{r}.yaml"
    with open(config, "w") as f:
        f.write("signals:\n  training_loop:\n    compile: true\n    shard: {axis: 0, workers: [%s]}\n"
                % ", ".join(str(i) for i in range(n)))
    ml.signal.load_config(config)
    batch = next(batches(local * n, 1))
    p1 = {k: v.copy() for k, v in pd.items()}
    s1 = dp.init_state(p1)
    s1.step = 1  # past the first run's synchronisation: the ranks already agree
    p2 = {k: v.copy() for k, v in pd.items()}
    s2 = dp.init_state(p2)
    s2.step = 1
    with ml.signal.context("training_loop") as ctx:
        assert (ctx.rank, ctx.size) == (r, n)
        np.testing.assert_array_equal(ctx.shard(batch)["input"], dist.shard_batch(batch)["input"])
        a = dp.run(p1, s1, batch)
    b = dp.run(p2, s2, dist.shard_batch(batch))
    assert a["loss"] == b["loss"], (a["loss"], b["loss"])
    os.remove(config)
    dist.barrier()
    if r == 0:
        os.remove(f"{tempfile.gettempdir()}/ingot_dp_{tag}_0.safetensors")


def killed():
    dp = ml.compile_train_step(classifier("mean"), ml.CpuBackend(), ml.SGD(lr=0.1), shapes={"input": [4, 4]},
                               data_parallel=True)
    params = dp.randomize_params(0)
    state = dp.init_state(params)
    for step, batch in enumerate(batches(4 * dist.size(), 5)):
        if step == 2 and dist.rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # dies between steps, as a crashed or killed process would
        dp.run(params, state, dist.shard_batch(batch))
    raise AssertionError("rank 0 went on training after rank 1 died")


if __name__ == "__main__":
    {"collectives": collectives, "late": late, "train": train, "killed": killed}[sys.argv[1]]()
    print(f"rank {dist.rank()} ok", flush=True)
