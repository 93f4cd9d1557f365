"""Ops for the code NumpyBackend generates (see _array_ops.ArrayOps)."""
import numpy as np

from ._array_ops import ArrayOps, export

export(ArrayOps(np), globals())
