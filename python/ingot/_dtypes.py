"""Element types as objects, MLX-style: ``ml.float32``, ``ml.bfloat16``, ``ml.int64``, ``ml.bool``.

A ``DType`` is a ``str`` (its name), so it works wherever a dtype name does (``types=``,
``astype``, ``IOKey(dtype=...)``, ``ml.array(x, dtype=...)``); it also compares equal to the
NumPy dtype it stands for (``ml.float32 == np.float32``) and tells its size. ``array.dtype`` and
``PhysicalModel.get_types()`` return them.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

_ITEMSIZE: Dict[str, int] = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1,
                             "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


class DType(str):
    """One of ingot's element types. Equal to its name and to NumPy's dtype of that name."""

    __slots__ = ()

    def __new__(cls, name: Any) -> "DType":
        if isinstance(name, DType):
            return name
        text = name if isinstance(name, str) else _numpy_name(name)
        if text not in _ITEMSIZE:
            raise TypeError(f"{name!r} is not an ingot dtype (ingot has {', '.join(_ITEMSIZE)})")
        return str.__new__(cls, text)

    @property
    def name(self) -> str:
        """The dtype's name: 'float32', 'int64', ..."""
        return str(self)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _ITEMSIZE[str(self)]

    @property
    def is_floating(self) -> bool:
        """Whether it is a floating-point type (float16, bfloat16, float32, float64)."""
        return str(self).startswith(("float", "bfloat"))

    def __repr__(self) -> str:
        return f"ml.{self}"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, str):
            return str.__eq__(self, other)
        try:
            return str(self) == _numpy_name(other)
        except TypeError:
            return NotImplemented

    def __ne__(self, other: Any) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__


def _numpy_name(obj: Any) -> str:
    """The name NumPy gives `obj` as a dtype (np.float32, np.dtype('int64'), bool ...)."""
    try:
        return np.dtype(obj).name
    except Exception as e:  # noqa: BLE001 - NumPy raises TypeError or others for non-dtypes
        raise TypeError(f"{obj!r} is not a dtype") from e


def dtype_of(name: str) -> DType:
    """The DType object of a name (what the C++ bindings return)."""
    return _BY_NAME[name]


bool = DType("bool")  # noqa: A001 - MLX's and NumPy's name
int8 = DType("int8")
int16 = DType("int16")
int32 = DType("int32")
int64 = DType("int64")
uint8 = DType("uint8")
float16 = DType("float16")
bfloat16 = DType("bfloat16")
float32 = DType("float32")
float64 = DType("float64")

_BY_NAME: Dict[str, DType] = {str(t): t for t in (bool, int8, int16, int32, int64, uint8, float16, bfloat16, float32,
                                                     float64)}
DTYPES = tuple(_BY_NAME.values())
