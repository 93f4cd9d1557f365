"""Random arrays (counter-based, reproducible): ``ml.random.normal``, ``uniform``, ``seed``, ``key``
and ``state``.

Each draw without a ``key`` reads the global random state and advances it; ``ml.random.seed(s)``
resets it. An explicit ``key`` (an int or ``ml.random.key(s)``) gives the same numbers every time.
List ``ml.random.state`` in ``ml.compile``'s ``inputs`` and ``outputs`` so that a compiled function
draws fresh numbers on every call (otherwise the trace's draw is replayed as it was).
"""
from __future__ import annotations

from typing import Any, Sequence, Union

from . import _ingot

state = _ingot.RandomState()
"""The global random state (a capture slot for ml.compile's inputs= and outputs=)."""

Shape = Union[int, Sequence[int]]


def seed(s: int) -> None:
    """Resets the global random state to `s`."""
    _ingot._random_seed(s)


def key(s: int) -> "_ingot.array":
    """An explicit random key: an int64 scalar array for the `key=` arguments."""
    return _ingot.array(s, dtype="int64")


def uniform(shape: Shape, low: float = 0.0, high: float = 1.0, dtype: Any = "float32", key: Any = None) -> "_ingot.array":
    """Uniform numbers in [low, high). `key`: None (draw from the global state), an int or a key array."""
    return _ingot._random_uniform(shape, low, high, dtype, key)


def normal(shape: Shape, mean: float = 0.0, std: float = 1.0, dtype: Any = "float32", key: Any = None) -> "_ingot.array":
    """Normal numbers with `mean` and `std`. `key`: None (draw from the global state), an int or a key array."""
    return _ingot._random_normal(shape, mean, std, dtype, key)


__all__ = ["key", "normal", "seed", "state", "uniform"]
