"""The ops of the catalogue (src/ops/families.h) over a NumPy-like namespace ``xp``.

NumPy (``numpy_ops``) and JAX (``jax_ops``) share these definitions; each overrides what its
namespace lacks. Results follow ingot's reference kernels; the generated code casts every result
to the dtype ingot inferred.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, List, Optional, Sequence

import numpy as np

from ._catalogue import catalogue_op, python_ops
from ._control_flow import functional_ops

_M64 = (1 << 64) - 1


def _mix64(x):
    """splitmix64 finalizer (src/core/random.h), on Python ints or uint64 arrays."""
    if isinstance(x, int):
        x = (x + 0x9E3779B97F4A7C15) & _M64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
        return x ^ (x >> 31)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _bits(seed: int, counters: np.ndarray) -> np.ndarray:
    return _mix64(np.uint64(_mix64(seed & _M64)) ^ counters)


def uniform01(seed: int, n: int) -> np.ndarray:
    """Counter-based uniform [0, 1) floats, the same numbers as every ingot backend."""
    b = _bits(seed, np.arange(n, dtype=np.uint64))
    return (b >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def normal01(seed: int, n: int) -> np.ndarray:
    """Counter-based standard normals (Box-Muller over counters 2i, 2i + 1), in float64."""
    i = np.arange(n, dtype=np.uint64)
    u1 = ((_bits(seed, i * np.uint64(2)) >> np.uint64(11)).astype(np.float64) + 1.0) * (1.0 / 9007199254740993.0)
    u2 = (_bits(seed, i * np.uint64(2) + np.uint64(1)) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


def numpy_dtype(name: str):
    """The NumPy dtype of an ingot dtype name (bfloat16 needs ml_dtypes)."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise TypeError("bfloat16 arrays need the ml_dtypes package (pip install ml_dtypes)") from e
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def constant_array(c: dict) -> np.ndarray:
    """A constant of the graph JSON dump ({dtype, shape, data}; floats may be 'nan' / 'inf')."""
    data = [float(x) if isinstance(x, str) else x for x in c["data"]]
    return np.asarray(data, dtype=np.float64 if c["dtype"] in ("float16", "bfloat16", "float32", "float64") else None).astype(
        numpy_dtype(c["dtype"])).reshape(c["shape"])


def _pair(v, default):
    if v is None:
        return tuple(default)
    return tuple(v) if len(v) == 2 else (v[0], v[0])


class ArrayOps:
    """Op implementations over ``xp``; one method per op of the catalogue."""

    def __init__(self, xp):
        self.xp = xp

    # -- framework plumbing (overridden by frameworks whose arrays are not NumPy's)
    def scope(self):
        """A context every generated call runs in (JAX: 64-bit types on)."""
        return contextlib.nullcontext()

    def from_numpy(self, a):
        return self.xp.asarray(a)

    def to_numpy(self, a):
        return np.asarray(a)

    def constant(self, c):
        return self.xp.asarray(constant_array(c))

    def cast(self, x, dtype):
        dt = numpy_dtype(dtype)
        x = self.xp.asarray(x)
        return x if x.dtype == dt else x.astype(dt)

    def _is_bool(self, x) -> bool:
        return self.xp.asarray(x).dtype == bool

    def _float(self, x):
        """Float operands stay; others compute in float32 (ingot's to_floating)."""
        x = self.xp.asarray(x)
        return x if self.xp.issubdtype(x.dtype, self.xp.floating) else x.astype(np.float32)

    # -- elementwise: the catalogue's Python forms (see __getattr__), and those it leaves to us
    def __getattr__(self, name):
        """ops.<op> for an elementwise op from its Python form (_catalogue), resolved once."""
        if name.startswith("_"):
            raise AttributeError(name)
        op = catalogue_op(name, self._function, self._float)
        if op is None:
            raise AttributeError(f"{type(self).__name__} has no op '{name}'")
        setattr(self, name, op)
        return op

    def _function(self, name):
        """The namespace's function of an array-API name (None when it has none)."""
        return getattr(self.xp, name, None)

    def erf(self, x):
        x = self._float(x)
        return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)

    def gelu(self, x, approximate="none"):
        x = self._float(x)
        if approximate == "tanh":
            return 0.5 * x * (1 + self.xp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
        return 0.5 * x * (1 + self.erf(x * 0.7071067811865476))

    def fmod(self, a, b): return self.xp.fmod(a, b)
    def where(self, c, a, b): return self.xp.where(self.xp.asarray(c) != 0, a, b)

    # -- reductions
    @staticmethod
    def _axes(axes: Optional[Sequence[int]]):
        return None if not axes else tuple(axes)

    def sum(self, x, axes=None, keepdims=0): return self.xp.sum(x, axis=self._axes(axes), keepdims=bool(keepdims))

    def numel(self, x, axes=None, dtype="float32"):
        """x's element count over `axes` (all when empty) as a scalar: BatchNorm's unbiased variance uses it."""
        dims = [x.shape[a] for a in axes] if axes else list(x.shape)
        return self.xp.asarray(math.prod(dims), dtype=numpy_dtype(dtype))
    def mean(self, x, axes=None, keepdims=0): return self.xp.mean(self._float(x), axis=self._axes(axes), keepdims=bool(keepdims))
    def max(self, x, axes=None, keepdims=0): return self.xp.max(x, axis=self._axes(axes), keepdims=bool(keepdims))
    def min(self, x, axes=None, keepdims=0): return self.xp.min(x, axis=self._axes(axes), keepdims=bool(keepdims))
    def argmax(self, x, axis, keepdims=0): return self.xp.argmax(x, axis=axis, keepdims=bool(keepdims))

    def moments(self, x, axes=None, keepdims=0):
        x = self._float(x)
        mean = self.xp.mean(x, axis=self._axes(axes), keepdims=True)
        var = self.xp.mean((x - mean) ** 2, axis=self._axes(axes), keepdims=bool(keepdims))
        return (mean if keepdims else self.xp.squeeze(mean, axis=self._axes(axes) or tuple(range(x.ndim)))), var

    def softmax(self, x, axis=-1):
        x = self._float(x)
        e = self.xp.exp(x - self.xp.max(x, axis=axis, keepdims=True))
        return e / self.xp.sum(e, axis=axis, keepdims=True)

    def log_softmax(self, x, axis=-1):
        x = self._float(x)
        s = x - self.xp.max(x, axis=axis, keepdims=True)
        return s - self.xp.log(self.xp.sum(self.xp.exp(s), axis=axis, keepdims=True))

    def layer_norm(self, x, weight=None, bias=None, axis=-1, eps=1e-5):
        x = self._float(x)
        first = axis % x.ndim
        axes = tuple(range(first, x.ndim))
        mean = self.xp.mean(x, axis=axes, keepdims=True)
        var = self.xp.mean((x - mean) ** 2, axis=axes, keepdims=True)
        y = (x - mean) / self.xp.sqrt(var + eps)
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y

    def rms_norm(self, x, weight=None, axis=-1, eps=1e-5):
        x = self._float(x)
        axes = tuple(range(axis % x.ndim, x.ndim))
        y = x / self.xp.sqrt(self.xp.mean(x * x, axis=axes, keepdims=True) + eps)
        return y if weight is None else y * weight

    def batch_norm(self, x, weight, bias, mean, variance, eps=1e-5):
        shape = (1, -1) + (1,) * (x.ndim - 2)
        r = lambda v: self.xp.reshape(v, shape)  # noqa: E731
        return (x - r(mean)) / self.xp.sqrt(r(variance) + eps) * r(weight) + r(bias)

    # -- attention
    def _attention_probabilities(self, q, k, mask, scale, causal, causal_offset):
        """softmax(scale q k^T + mask) with hidden keys at -inf; k's heads already repeated."""
        xp = self.xp
        scale = scale or 1.0 / math.sqrt(q.shape[-1])
        s = xp.matmul(q, xp.swapaxes(k, -1, -2)) * scale
        if mask is not None:
            s = xp.where(xp.asarray(mask), s, -xp.inf) if self._is_bool(mask) else s + mask
        if causal:
            i = xp.arange(q.shape[-2])[:, None]
            j = xp.arange(k.shape[-2])[None, :]
            s = xp.where(j <= i + causal_offset, s, -xp.inf)
        e = xp.exp(s - xp.max(s, axis=-1, keepdims=True))  # a row of -inf: NaN, as ingot's kernels
        return e / xp.sum(e, axis=-1, keepdims=True)

    @staticmethod
    def _head_groups(q, k):
        return q.shape[-3] // k.shape[-3] if q.ndim >= 3 else 1

    def scaled_dot_product_attention(self, q, k, v, mask=None, scale=0.0, causal=0, causal_offset=0):
        g = self._head_groups(q, k)
        if g > 1:  # grouped-query heads: query head h reads key/value head h // g
            k, v = self.xp.repeat(k, g, axis=-3), self.xp.repeat(v, g, axis=-3)
        p = self._attention_probabilities(q, k, mask, scale, causal, causal_offset)
        return self.xp.matmul(p, v).astype(q.dtype)

    def scaled_dot_product_attention_grad(self, q, k, v, dy, mask=None, scale=0.0, causal=0, causal_offset=0):
        xp = self.xp
        g = self._head_groups(q, k)
        kr, vr = (xp.repeat(k, g, axis=-3), xp.repeat(v, g, axis=-3)) if g > 1 else (k, v)
        p = self._attention_probabilities(q, kr, mask, scale, causal, causal_offset)
        scale = scale or 1.0 / math.sqrt(q.shape[-1])
        dp = xp.matmul(dy, xp.swapaxes(vr, -1, -2))
        ds = p * (dp - xp.sum(p * dp, axis=-1, keepdims=True))
        dq = xp.matmul(ds, kr) * scale
        dk = xp.matmul(xp.swapaxes(ds, -1, -2), q) * scale
        dv = xp.matmul(xp.swapaxes(p, -1, -2), dy)
        if g > 1:  # the query heads that shared a key/value head add up
            fold = lambda t: t.reshape(t.shape[:-3] + (k.shape[-3], g) + t.shape[-2:]).sum(axis=-3)  # noqa: E731
            dk, dv = fold(dk), fold(dv)
        if mask is None:
            dmask = xp.zeros((0,), dtype=q.dtype)
        elif self._is_bool(mask):
            dmask = xp.zeros(mask.shape, dtype=q.dtype)
        else:
            lead = ds.ndim - mask.ndim
            dmask = xp.sum(ds, axis=tuple(range(lead))) if lead else ds
            dmask = xp.sum(dmask, axis=tuple(a for a in range(mask.ndim) if mask.shape[a] == 1 and dmask.shape[a] != 1),
                           keepdims=True)
        return (dq.astype(q.dtype), dk.astype(q.dtype), dv.astype(q.dtype), xp.asarray(dmask).astype(q.dtype))

    # -- linear algebra, convolution, pooling
    def matmul(self, a, b): return self.xp.matmul(a, b)

    def conv2d(self, x, w, bias=None, stride=None, padding=None, dilation=None, groups=1):
        xp = self.xp
        sh, sw = _pair(stride, (1, 1))
        ph, pw = _pair(padding, (0, 0))
        dh, dw = _pair(dilation, (1, 1))
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        xpad = xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        xg = xp.reshape(xpad, (n, groups, cg, h + 2 * ph, wd + 2 * pw))
        wg = xp.reshape(w, (groups, o // groups, cg, kh, kw))
        out = 0
        for i in range(kh):  # one tap at a time: a matmul over channels per kernel position
            for j in range(kw):
                patch = xg[:, :, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
                out = out + xp.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
        out = xp.reshape(out, (n, o, oh, ow))
        return out if bias is None else out + xp.reshape(bias, (1, -1, 1, 1))

    @staticmethod
    def _pool_taps(hw, kernel, stride, padding, ceil_mode=0):
        """The padding ((top, bottom), (left, right)) and, per kernel position, the [..., rows, cols]
        index of the padded input it reads. ceil_mode (max_pool2d's): one more window where the
        floor rule stops short, unless it would start in the end padding; the end padding then
        reaches it."""
        kh, kw = _pair(kernel, (1, 1))
        sh, sw = _pair(stride, (kh, kw))
        ph, pw = _pair(padding, (0, 0))

        def count(n, k, s, p):
            o = (n + 2 * p - k) // s + 1
            return o + 1 if ceil_mode and (n + 2 * p - k) % s and o * s < n + p else o

        oh, ow = count(hw[0], kh, sh, ph), count(hw[1], kw, sw, pw)
        pads = ((ph, max(ph, (oh - 1) * sh + kh - hw[0] - ph)), (pw, max(pw, (ow - 1) * sw + kw - hw[1] - pw)))
        taps = [(Ellipsis, slice(i, i + sh * (oh - 1) + 1, sh), slice(j, j + sw * (ow - 1) + 1, sw))
                for i in range(kh) for j in range(kw)]
        return pads, taps

    def _windows(self, x, kernel, stride, padding, fill, ceil_mode=0):
        pads, taps = self._pool_taps(x.shape[2:], kernel, stride, padding, ceil_mode)
        xpad = self.xp.pad(x, ((0, 0), (0, 0)) + pads, constant_values=fill)
        for tap in taps:
            yield xpad[tap]

    @staticmethod
    def _lowest(x):
        """What max pooling pads with: integers their lowest value, floats -inf."""
        try:
            return np.iinfo(np.dtype(x.dtype)).min
        except ValueError:
            return -np.inf

    def max_pool2d(self, x, kernel, stride=None, padding=None, ceil_mode=0):
        out = None
        for win in self._windows(x, kernel, stride, padding, self._lowest(x), ceil_mode):
            out = win if out is None else self.xp.maximum(out, win)
        return out

    def avg_pool2d(self, x, kernel, stride=None, padding=None, count_include_pad=1):
        x = self._float(x)
        total = sum(self._windows(x, kernel, stride, padding, 0))
        if count_include_pad:
            kh, kw = _pair(kernel, (1, 1))
            return total / (kh * kw)
        ones = self.xp.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype)
        return total / sum(self._windows(ones, kernel, stride, padding, 0))

    def global_avg_pool2d(self, x, keepdims=0):
        return self.xp.mean(self._float(x), axis=(2, 3), keepdims=bool(keepdims))

    # -- movement
    def identity(self, x): return x

    def reshape(self, x, shape):
        return self.xp.reshape(x, tuple(x.shape[i] if d == 0 else d for i, d in enumerate(shape)))

    def transpose(self, x, perm=None):
        return self.xp.transpose(x, tuple(perm) if perm else None)

    def broadcast_to(self, x, shape): return self.xp.broadcast_to(x, tuple(shape))

    @staticmethod
    def _slice_index(shape, starts, ends, axes=None, steps=None):
        axes = axes if axes else list(range(len(starts)))
        steps = steps if steps else [1] * len(starts)
        index: List[Any] = [slice(None)] * len(shape)
        for s, e, a, st in zip(starts, ends, axes, steps):
            d = shape[a]
            norm = lambda i, lo, hi: min(max(i + d if i < 0 else i, lo), hi)  # noqa: E731
            s2, e2 = (norm(s, 0, d), norm(e, 0, d)) if st > 0 else (norm(s, -1, d - 1), norm(e, -1, d - 1))
            index[a % len(shape)] = slice(s2, None if e2 < 0 else e2, st)
        return tuple(index)

    def slice(self, x, starts, ends, axes=None, steps=None):
        return x[self._slice_index(x.shape, starts, ends, axes, steps)]

    def concat(self, *xs, axis=0): return self.xp.concatenate(xs, axis=axis)
    def gather(self, x, indices, axis=0): return self.xp.take(x, indices, axis=axis)
    def take_along_axis(self, x, indices, axis): return self.xp.take_along_axis(x, indices, axis=axis)

    def top_k(self, x, k, axis=-1, largest=1):
        # ingot's order (src/ops/sort.cpp): NaN largest, equal values in index order; a lexsort
        # on (NaN flag, value, index), the value negated for the largest.
        xp = self.xp
        axis = axis % x.ndim
        index = xp.broadcast_to(xp.arange(x.shape[axis]).reshape([-1 if d == axis else 1 for d in range(x.ndim)]),
                                x.shape)
        if xp.issubdtype(x.dtype, xp.floating):
            nan = xp.isnan(x)
            key = xp.where(nan, 0, -x if largest else x)
            first = ~nan if largest else nan
        else:
            key = -x.astype(xp.int64) if largest else x.astype(xp.int64)
            first = xp.zeros(x.shape, dtype=bool)
        order = xp.lexsort((index, key, first), axis=axis)
        indices = xp.take(order, xp.arange(k), axis=axis)
        return xp.take_along_axis(x, indices, axis=axis), indices.astype(xp.int64)

    # -- random: the counter-based streams of src/core/random.h, computed in NumPy
    def random_uniform(self, shape, seed, low=0.0, high=1.0, dtype="float32"):
        u = uniform01(seed, int(np.prod(shape))).astype(np.float64)
        return self.xp.asarray((low + (high - low) * u).reshape(shape))

    def random_normal(self, shape, seed, mean=0.0, std=1.0, dtype="float32"):
        return self.xp.asarray((mean + std * normal01(seed, int(np.prod(shape)))).reshape(shape))

    def dropout(self, x, p, seed, training=0):
        if not training:
            return x
        keep = self.xp.asarray(uniform01(seed, int(np.prod(x.shape))).astype(np.float64).reshape(x.shape) >= p)
        return self.xp.where(keep, x * (1.0 / (1.0 - p)), self.xp.zeros_like(x))

    # -- the (grad) ops of ingot's backward graphs (gradients="ingot"); `like` operands give shapes only
    def _add_at(self, a, index, value):
        """a with `value` added at `index` (repeated indices add up); a new array."""
        out = a.copy()
        np.add.at(out, index, value)
        return out

    def _zeros(self, shape, like_dtype):
        return self.xp.zeros(tuple(shape), dtype=like_dtype)

    def sum_to_like(self, x, like):
        extra = x.ndim - like.ndim
        if extra > 0:
            x = self.xp.sum(x, axis=tuple(range(extra)))
        axes = tuple(i for i, (a, b) in enumerate(zip(x.shape, like.shape)) if b == 1 and a != 1)
        if axes:
            x = self.xp.sum(x, axis=axes, keepdims=True)
        return self.xp.reshape(x, tuple(like.shape))

    def broadcast_to_like(self, x, like): return self.xp.broadcast_to(x, tuple(like.shape))
    def reshape_like(self, x, like): return self.xp.reshape(x, tuple(like.shape))
    def expand_dims(self, x, axes): return self.xp.expand_dims(x, tuple(axes))
    def zeros_like(self, x): return self.xp.zeros_like(x)

    def slice_scatter(self, grad, like, starts, ends, axes=None, steps=None):
        index = self._slice_index(like.shape, starts, ends, axes, steps)
        return self._add_at(self._zeros(like.shape, grad.dtype), index, grad)

    def concat_part(self, grad, *xs, axis, index):
        axis %= grad.ndim
        start = sum(x.shape[axis] for x in xs[:index])
        part: List[Any] = [slice(None)] * grad.ndim
        part[axis] = slice(start, start + xs[index].shape[axis])
        return grad[tuple(part)]

    def index_add(self, like, indices, updates, axis=0):
        axis %= like.ndim
        return self._add_at(self._zeros(like.shape, updates.dtype), (slice(None),) * axis + (indices,), updates)

    def scatter_add(self, like, indices, updates, axis):
        index = list(np.indices(tuple(indices.shape), sparse=True))
        index[axis % like.ndim] = indices
        return self._add_at(self._zeros(like.shape, updates.dtype), tuple(index), updates)

    def _conv_geometry(self, x_shape, w_shape, stride, padding, dilation, groups):
        sh, sw = _pair(stride, (1, 1))
        ph, pw = _pair(padding, (0, 0))
        dh, dw = _pair(dilation, (1, 1))
        n, _, h, wd = x_shape
        o, cg, kh, kw = w_shape
        oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
        ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        taps = [(i, j, (Ellipsis, slice(i * dh, i * dh + sh * (oh - 1) + 1, sh), slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)))
                for i in range(kh) for j in range(kw)]
        return (n, h, wd, o, cg, ph, pw), taps

    def conv2d_input_grad(self, dy, w, like, stride=None, padding=None, dilation=None, groups=1):
        (n, h, wd, o, cg, ph, pw), taps = self._conv_geometry(like.shape, w.shape, stride, padding, dilation, groups)
        dyg = self.xp.reshape(dy, (n, groups, o // groups) + tuple(dy.shape[2:]))
        wg = self.xp.reshape(w, (groups, o // groups, cg) + tuple(w.shape[2:]))
        dx = self._zeros((n, groups, cg, h + 2 * ph, wd + 2 * pw), dy.dtype)
        for i, j, tap in taps:  # each kernel position sends dy back through its weights
            dx = self._add_at(dx, tap, self.xp.einsum("ngohw,goc->ngchw", dyg, wg[:, :, :, i, j]))
        return self.xp.reshape(dx, (n, groups * cg, h + 2 * ph, wd + 2 * pw))[:, :, ph:ph + h, pw:pw + wd]

    def conv2d_weight_grad(self, x, dy, like, stride=None, padding=None, dilation=None, groups=1):
        (n, h, wd, o, cg, ph, pw), taps = self._conv_geometry(x.shape, like.shape, stride, padding, dilation, groups)
        xg = self.xp.reshape(self.xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))), (n, groups, cg, h + 2 * ph, wd + 2 * pw))
        dyg = self.xp.reshape(dy, (n, groups, o // groups) + tuple(dy.shape[2:]))
        per_tap = [self.xp.einsum("ngchw,ngohw->goc", xg[tap], dyg) for _, _, tap in taps]
        return self.xp.reshape(self.xp.stack(per_tap, axis=-1), tuple(like.shape))

    def max_pool2d_grad(self, x, dy, kernel, stride=None, padding=None, ceil_mode=0):
        ((ph, ph_end), (pw, pw_end)), taps = self._pool_taps(x.shape[2:], kernel, stride, padding, ceil_mode)
        wins = list(self._windows(x, kernel, stride, padding, self._lowest(x), ceil_mode))
        best = wins[0]
        for win in wins[1:]:
            best = self.xp.maximum(best, win)
        dx = self._zeros(tuple(x.shape[:2]) + (x.shape[2] + ph + ph_end, x.shape[3] + pw + pw_end), dy.dtype)
        taken = self.xp.zeros(best.shape, dtype=bool)
        for tap, win in zip(taps, wins):  # each window's first maximum takes its dy
            first = (win == best) & ~taken
            taken = taken | first
            dx = self._add_at(dx, tap, self.xp.where(first, dy, self.xp.zeros_like(dy)))
        return dx[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]]

    def avg_pool2d_grad(self, dy, like, kernel, stride=None, padding=None, count_include_pad=1):
        ((ph, _), (pw, _)), taps = self._pool_taps(like.shape[2:], kernel, stride, padding)
        if count_include_pad:
            share = dy / len(taps)
        else:
            ones = self.xp.ones((1, 1) + tuple(like.shape[2:]), dtype=dy.dtype)
            share = dy / sum(self._windows(ones, kernel, stride, padding, 0))
        dx = self._zeros(tuple(like.shape[:2]) + (like.shape[2] + 2 * ph, like.shape[3] + 2 * pw), dy.dtype)
        for tap in taps:
            dx = self._add_at(dx, tap, share)
        return dx[:, :, ph:ph + like.shape[2], pw:pw + like.shape[3]]

    # -- control flow (_control_flow writes the statements; these are the pieces they call)
    def predicate(self, x):
        """A one-element array's truth (nonzero: true) as a 0-d bool array: Python's `if` reads
        it as a bool, lax.cond takes it traced."""
        return self.xp.reshape(self.xp.asarray(x), ()) != 0

    def stack_steps(self, steps, dtype, shape):
        """A scan's y_t of every step stacked on a new leading axis (in index order); over zero
        steps, zeros of the stacked `shape` (None: not known at compile time, an error)."""
        if steps:
            return self.xp.stack(steps)
        if shape is None:
            raise ValueError("scan over zero steps: the stacked result's shape is not known at compile time")
        return self.xp.zeros(tuple(shape), dtype=numpy_dtype(dtype))

    def _control_flow_ops(self):
        """ops.if / ops.while / ops.scan over Python functions (getattr(ops, "if"))."""
        return functional_ops(self.predicate, self.stack_steps)

    # -- gradients through the framework's autodiff (gradients="framework")
    def vjp(self, forward, inputs, constants, cotangents, wrt):
        from .._ingot import IngotError

        raise IngotError("NumPy has no autodiff: NumpyBackend's gradients come from ingot's backward graph "
                         "(gradients='ingot')")


def export(ops: ArrayOps, namespace: dict) -> None:
    """Makes every op a module-level function of `namespace` (the generated code calls ops.<op>)."""
    for name in dir(ops):
        if not name.startswith("_"):
            namespace[name] = getattr(ops, name)
    for name in python_ops():  # the catalogue's elementwise ops, unless `ops` writes them itself
        if name not in namespace:
            namespace[name] = getattr(ops, name)
    namespace.update(ops._control_flow_ops())  # "if", "while", "scan": not Python identifiers
