"""The training API: ml.TrainModel, the optimizers (ml.SGD, ml.Adam, ml.AdamW) and
ml.compile_train_step, the compiled training step (forward, backward and optimizer update as one
executable), data parallel over ml.distributed's group with ``data_parallel=True``."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from . import _ingot
from . import signal as _signal

__all__ = ["TrainStep", "compile_train_step"]


class TrainStep:
    """A compiled training step (see compile_train_step).

    ``run(params, state, batch)`` updates the NumPy arrays of ``params`` in place and ``state``,
    and returns ``{"loss": float, "losses": {...}, "metrics": {...}}``. Data parallel, ``batch`` is
    this rank's shard (``ml.distributed.shard_batch``), or the global batch inside an
    ``ml.signal.context`` whose configuration shards it; the first run gives every rank rank 0's
    parameters and optimizer state; losses and metrics are the global batch's."""

    def __init__(self, native: "_ingot.TrainStep"):
        self._native = native

    def randomize_params(self, seed: int = 0) -> Dict[str, Any]:
        """Parameters drawn from each parameter's initializer (NumPy arrays)."""
        return self._native.randomize_params(seed)

    def init_state(self, params: Mapping[str, Any]) -> "_ingot.OptimizerState":
        """Zero optimizer slots for the trained parameters; step 0."""
        return self._native.init_state(dict(params))

    def run(self, params: Dict[str, Any], state: "_ingot.OptimizerState", batch: Mapping[str, Any]) -> Dict[str, Any]:
        """One training step (see the class doc)."""
        ctx = _signal.current()
        if ctx is not None and ctx.sharded and self._native.data_parallel:
            batch = ctx.shard(dict(batch))
        return self._native.run(params, state, dict(batch))

    def set_lr(self, lr: float) -> None:
        """Sets the learning rate for the next runs (no recompile)."""
        self._native.set_lr(lr)

    def set_hyperparameter(self, name: str, value: float) -> None:
        """Sets a run-time hyperparameter of the optimizer ('lr', 'weight_decay', 'momentum')."""
        self._native.set_hyperparameter(name, value)

    @property
    def data_parallel(self) -> bool:
        """Whether the step averages gradients over ml.distributed's group."""
        return self._native.data_parallel

    @property
    def group_size(self) -> int:
        """The ranks the step averages over (1 unless data parallel)."""
        return self._native.group_size

    @property
    def trained_parameters(self) -> List[str]:
        """The parameters the optimizer updates."""
        return self._native.trained_parameters

    def sync_from_root(self, params: Dict[str, Any], state: "_ingot.OptimizerState") -> None:
        """Gives every rank rank 0's parameters and optimizer state (every rank must call it)."""
        self._native.sync_from_root(params, state)

    def save_checkpoint(self, path: str, params: Mapping[str, Any], state: "_ingot.OptimizerState") -> None:
        """Parameters, slots and step in one safetensors file, written atomically; data parallel,
        by rank 0 only (every rank returns once it is complete)."""
        self._native.save_checkpoint(str(path), dict(params), state)

    def load_checkpoint(self, path: str, params: Dict[str, Any], state: "_ingot.OptimizerState") -> None:
        """Reads a save_checkpoint file into `params` and `state` (names, dtypes and shapes checked)."""
        self._native.load_checkpoint(str(path), params, state)

    def graph_text(self) -> str:
        """The optimized step graph as text."""
        return self._native.graph_text()


def compile_train_step(model: "_ingot.TrainModel", backend: Any = None, optimizer: Optional["_ingot.Optimizer"] = None,
                       **options: Any) -> TrainStep:
    """Compiles a TrainModel's training step for `backend` (ml.CpuBackend() by default) with
    `optimizer` (ml.SGD() by default). Options are ml.compile's (shapes, types, ...), plus
    ``data_parallel=True`` (gradients averaged over ml.distributed's ranks inside the step),
    ``gradient_bucket_bytes`` and ``gradient_overlap``."""
    if not isinstance(model, _ingot.TrainModel):
        raise TypeError(f"compile_train_step() needs an ml.TrainModel, got {type(model).__name__}")
    backend = _ingot.CpuBackend() if backend is None else backend
    optimizer = _ingot.SGD() if optimizer is None else optimizer
    if not isinstance(optimizer, _ingot.Optimizer):
        raise TypeError(f"compile_train_step(): optimizer must be ml.SGD, ml.Adam or ml.AdamW, got "
                        f"{type(optimizer).__name__}")
    unknown = sorted(set(options) - set(_ingot.compile_option_names()))
    if unknown:
        raise TypeError(f"compile_train_step() got an unknown option '{unknown[0]}' (valid options: "
                        f"{', '.join(_ingot.compile_option_names())})")
    return TrainStep(_ingot.compile_train_step(model, backend, optimizer, options))
