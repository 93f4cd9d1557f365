"""Ops for the code MlxBackend generates: ArrayOps over mlx.core (Apple's MLX; its CPU build runs
on Linux too), with what mlx.core spells differently or lacks filled in. NumPy arrays come in
and go out through mx.array / np.array; gradients come from mx.vjp; jit=True runs the generated
function under mx.compile."""
from __future__ import annotations

import math

import mlx.core as mx
import numpy as np

from ._array_ops import ArrayOps, constant_array, export

_DTYPES = {
    "bool": mx.bool_, "int8": mx.int8, "int16": mx.int16, "int32": mx.int32, "int64": mx.int64, "uint8": mx.uint8,
    "float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32, "float64": mx.float64,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


def _mx_dtype(dtype):
    """An mlx dtype from an ingot name, a NumPy dtype or an mlx dtype."""
    if isinstance(dtype, mx.Dtype):
        return dtype
    if dtype is bool:
        return mx.bool_
    return _DTYPES[str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype]


class _Namespace:
    """mlx.core with NumPy's names where ArrayOps uses them and mlx spells them otherwise."""

    inf = math.inf
    floating = mx.floating

    def __getattr__(self, name):
        return getattr(mx, name)

    @staticmethod
    def asarray(x, dtype=None):
        a = x if isinstance(x, mx.array) else mx.array(np.asarray(x))
        return a if dtype is None else a.astype(_mx_dtype(dtype))

    @staticmethod
    def fmod(a, b):
        return a - b * mx.trunc(a / b) if mx.issubdtype(mx.array(a).dtype, mx.floating) else a - b * (a // b)

    @staticmethod
    def zeros(shape, dtype=mx.float32):
        return mx.zeros(shape, dtype=_mx_dtype(dtype))

    @staticmethod
    def ones(shape, dtype=mx.float32):
        return mx.ones(shape, dtype=_mx_dtype(dtype))

    @staticmethod
    def transpose(x, axes=None):
        return mx.transpose(x) if axes is None else mx.transpose(x, axes)


# mx.compile traces the function without evaluating arrays, so the generated `if` / `while`,
# which read a condition's value, cannot run inside it: Emitter.lower runs such a graph eagerly
# (a scan's `for` over a static length compiles).
JIT_BRANCHES_ON_VALUES = False


class MlxOps(ArrayOps):
    def __init__(self):
        super().__init__(_Namespace())

    def from_numpy(self, a):
        a = np.asarray(a)
        if a.dtype.name == "bfloat16":  # ml_dtypes: through float32, exact
            return mx.array(a.astype(np.float32)).astype(mx.bfloat16)
        return mx.array(a)

    def to_numpy(self, a):
        if a.dtype == mx.bfloat16:
            import ml_dtypes

            return np.array(a.astype(mx.float32)).astype(ml_dtypes.bfloat16)
        return np.array(a)

    def constant(self, c):
        return self.from_numpy(constant_array(c))

    def cast(self, x, dtype):
        x = self.xp.asarray(x)
        dt = _mx_dtype(dtype)
        return x if x.dtype == dt else x.astype(dt)

    def _is_bool(self, x) -> bool:
        return self.xp.asarray(x).dtype == mx.bool_

    def _float(self, x):
        x = self.xp.asarray(x)
        return x if mx.issubdtype(x.dtype, mx.floating) else x.astype(mx.float32)

    def erf(self, x):
        return mx.erf(self._float(x))

    @staticmethod
    def _lowest(x):
        name = _NAMES[x.dtype]
        return float(np.iinfo(np.dtype(name)).min) if name.startswith(("int", "uint")) else -math.inf

    def _add_at(self, a, index, value):
        index = tuple(mx.array(i) if isinstance(i, np.ndarray) else i for i in index)
        return a.at[index].add(value)

    def numel(self, x, axes=None, dtype="float32"):
        dims = [x.shape[a] for a in axes] if axes else list(x.shape)
        return mx.array(math.prod(dims), dtype=_mx_dtype(dtype))

    def top_k(self, x, k, axis=-1, largest=1):
        # ingot's order (NaN largest, equal values in index order) has no lexsort in mlx: each
        # element's rank is the count of elements before it in that order (an n x n comparison
        # per row), and the ranks, all distinct, sort without ties.
        axis = axis % x.ndim
        xt = mx.moveaxis(x, axis, -1)
        n = xt.shape[-1]
        if mx.issubdtype(xt.dtype, mx.floating):
            nan = mx.isnan(xt)
            key = mx.where(nan, mx.zeros_like(xt), -xt if largest else xt)
            first = mx.logical_not(nan) if largest else nan
        else:
            key = -xt.astype(mx.int64) if largest else xt.astype(mx.int64)
            first = mx.zeros(xt.shape, dtype=mx.bool_)
        f = first.astype(mx.int32)
        fi, fj = mx.expand_dims(f, -1), mx.expand_dims(f, -2)
        ki, kj = mx.expand_dims(key, -1), mx.expand_dims(key, -2)
        idx = mx.arange(n)
        ii, jj = mx.expand_dims(idx, -1), mx.expand_dims(idx, -2)
        # before[..., i, j]: element j comes before element i
        before = (fj < fi) | ((fj == fi) & ((kj < ki) | ((kj == ki) & (jj < ii))))
        rank = mx.sum(before.astype(mx.int32), axis=-1)
        order = mx.argsort(rank, axis=-1)[..., :k]
        values = mx.take_along_axis(xt, order, axis=-1)
        return mx.moveaxis(values, -1, axis), mx.moveaxis(order.astype(mx.int64), -1, axis)

    def jit(self, forward, options):
        """The generated function under mx.compile (compile(..., jit=True), the default)."""
        return mx.compile(forward, **options)

    def vjp(self, forward, inputs, constants, cotangents, wrt):
        differentiable = [i for i, w in enumerate(wrt) if w]
        consts = [self.xp.asarray(c) for c in constants]

        def f(*diff_args):
            args = list(inputs)
            for i, a in zip(differentiable, diff_args):
                args[i] = a
            return forward(args, consts)

        outs = f(*[inputs[i] for i in differentiable])
        cts = [mx.zeros_like(o) if c is None else self.xp.asarray(c).astype(o.dtype) for o, c in zip(outs, cotangents)]
        _, grads = mx.vjp(lambda *a: f(*a), [inputs[i] for i in differentiable], cts)
        result = [None] * len(inputs)
        for i, g in zip(differentiable, grads):
            result[i] = g
        return outs, result


export(MlxOps(), globals())
