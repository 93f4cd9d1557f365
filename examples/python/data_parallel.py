"""Data-parallel training in Python: the bundled MLP on generated blobs, each rank on its shard
of every global batch, gradients averaged inside the compiled step.

    mpirun -np 2 python examples/python/data_parallel.py            # 2 ranks on this machine
    mpirun --hostfile hosts -np 8 python examples/python/data_parallel.py
    INGOT_CONFIG=config.yaml mpirun -np 2 python examples/python/data_parallel.py --signal

With --signal the shard comes from a signal context of the configuration file
(``signals: {training_loop: {compile: true, shard: {axis: 0, workers: [0, 1]}}}``), and the step
is given the global batch. Rank 0 prints the progress, every rank's throughput and the accuracy.
"""
from __future__ import annotations

import sys
import time

import numpy as np

import ingot as ml

dist = ml.distributed


def blobs(n, features=784, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(100).uniform(-1, 1, (classes, features))
    y = rng.integers(0, classes, n)
    x = centres[y] + 1.5 * rng.uniform(-1, 1, (n, features))
    return x.astype(np.float32), y


def main(use_signal: bool) -> None:
    rank, size = dist.rank(), dist.size()
    global_batch = 128
    tm = ml.TrainModel(ml.ExampleMLP())
    tm.add_loss(ml.CrossEntropyLoss(), {"input": "output", "target": "target"})
    tm.add_metric(ml.ClassAccuracy(), {"input": "output", "target": "target"}, "accuracy")
    step = ml.compile_train_step(tm, ml.CpuBackend(), ml.SGD(lr=0.05, momentum=0.9),
                                 shapes={"input": [global_batch // size, 784]}, data_parallel=True)
    params = step.randomize_params(0)
    state = step.init_state(params)
    x, y = blobs(1024)
    start = time.perf_counter()

    def epoch():
        for b in range(0, len(y), global_batch):
            batch = {"input": x[b:b + global_batch], "target": y[b:b + global_batch]}
            r = step.run(params, state, batch if use_signal else dist.shard_batch(batch))
        return r

    for e in range(2):
        if use_signal:
            with ml.signal.context("training_loop"):
                r = epoch()
        else:
            r = epoch()
        if rank == 0:
            print(f"epoch {e + 1}: loss {r['loss']:.4f}, accuracy {100 * float(r['metrics']['accuracy']):.1f}%")
    rate = 2 * len(y) / (time.perf_counter() - start)
    rates = np.asarray(dist.all_gather(ml.array(np.array([rate]))))
    if rank == 0:
        for r_, v in enumerate(rates):
            print(f"rank {r_} of {size}: {v:.0f} samples/s")
    import os, tempfile
    step.save_checkpoint(os.path.join(tempfile.gettempdir(), "mlp_checkpoint.safetensors"), params, state)  # rank 0 writes it


if __name__ == "__main__":
    main("--signal" in sys.argv)
