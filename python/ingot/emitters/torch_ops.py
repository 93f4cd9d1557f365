"""Ops for the code TorchBackend generates: the catalogue over torch (CPU tensors). NumPy arrays
come in and go out through torch.from_numpy / Tensor.numpy (no copies); gradients come from
torch.autograd."""
from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
import torch.nn.functional as F

from ._array_ops import constant_array, normal01, uniform01
from ._catalogue import catalogue_op, python_ops
from ._control_flow import functional_ops

_DTYPES = {
    "bool": torch.bool, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "uint8": torch.uint8, "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
    "float64": torch.float64,
}


def scope():
    return contextlib.nullcontext()


def from_numpy(a):
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":  # ml_dtypes: same bits
        return torch.from_numpy(a.view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a).reshape(a.shape))  # ascontiguousarray makes 0-d arrays 1-d


def to_numpy(t):
    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def constant(c):
    return from_numpy(constant_array(c))


def jit(forward, options):
    """The generated function under torch.compile (compile(..., jit=True), the default)."""
    return torch.compile(forward, **options)


def cast(x, dtype):
    dt = _DTYPES[dtype]
    x = torch.as_tensor(x)
    return x if x.dtype == dt else x.to(dt)


def _float(x):
    return x if x.is_floating_point() else x.to(torch.float32)


def _axes(axes):
    return None if not axes else tuple(axes)


# The elementwise ops come from their Python forms (_catalogue) over torch's functions, with
# operands as tensors; these are torch's own (better) functions, or ops the forms leave out.
def rsqrt(x): return torch.rsqrt(_float(x))
def sigmoid(x): return torch.sigmoid(_float(x))
def erf(x): return torch.erf(_float(x))
def relu(x): return torch.relu(x)
def gelu(x, approximate="none"): return F.gelu(_float(x), approximate=approximate)
def fmod(a, b): return torch.fmod(torch.as_tensor(a), b)
def maximum(a, b): return torch.maximum(*torch.broadcast_tensors(*_promoted(a, b)))
def minimum(a, b): return torch.minimum(*torch.broadcast_tensors(*_promoted(a, b)))
def where(c, a, b): return torch.where(torch.as_tensor(c) != 0, *_promoted(a, b))


# Array-API names torch spells otherwise (torch.equal compares whole tensors).
_TORCH_NAMES = {"equal": "eq"}


def _torch_function(name):
    return getattr(torch, _TORCH_NAMES.get(name, name), None)


def _tensors(operands):
    return [torch.as_tensor(o) for o in operands]


def _promoted(a, b):
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    t = torch.promote_types(a.dtype, b.dtype)
    return a.to(t), b.to(t)


def sum(x, axes=None, keepdims=0):  # noqa: A001
    return torch.sum(x, dim=_axes(axes), keepdim=bool(keepdims)) if axes else torch.sum(x).reshape((1,) * x.dim() if keepdims else ())


def numel(x, axes=None, dtype="float32"):
    dims = [x.shape[a] for a in axes] if axes else list(x.shape)
    return torch.tensor(math.prod(dims), dtype=_DTYPES[dtype])


def mean(x, axes=None, keepdims=0):
    x = _float(x)
    return torch.mean(x, dim=_axes(axes), keepdim=bool(keepdims)) if axes else torch.mean(x).reshape((1,) * x.dim() if keepdims else ())


def max(x, axes=None, keepdims=0):  # noqa: A001
    return torch.amax(x, dim=_axes(axes) or tuple(range(x.dim())), keepdim=bool(keepdims))


def min(x, axes=None, keepdims=0):  # noqa: A001
    return torch.amin(x, dim=_axes(axes) or tuple(range(x.dim())), keepdim=bool(keepdims))


def argmax(x, axis, keepdims=0): return torch.argmax(x, dim=axis, keepdim=bool(keepdims))


def moments(x, axes=None, keepdims=0):
    x = _float(x)
    dims = _axes(axes) or tuple(range(x.dim()))
    m = torch.mean(x, dim=dims, keepdim=True)
    var = torch.mean((x - m) ** 2, dim=dims, keepdim=bool(keepdims))
    return (m if keepdims else m.squeeze(dims) if dims else m), var


def softmax(x, axis=-1): return torch.softmax(_float(x), dim=axis)
def log_softmax(x, axis=-1): return torch.log_softmax(_float(x), dim=axis)


def layer_norm(x, weight=None, bias=None, axis=-1, eps=1e-5):
    x = _float(x)
    return F.layer_norm(x, tuple(x.shape[axis % x.dim():]), weight, bias, eps)


def rms_norm(x, weight=None, axis=-1, eps=1e-5):
    x = _float(x)
    dims = tuple(range(axis % x.dim(), x.dim()))
    y = x * torch.rsqrt(torch.mean(x * x, dim=dims, keepdim=True) + eps)
    return y if weight is None else y * weight


def batch_norm(x, weight, bias, mean, variance, eps=1e-5):
    shape = (1, -1) + (1,) * (x.dim() - 2)
    return (x - mean.reshape(shape)) / torch.sqrt(variance.reshape(shape) + eps) * weight.reshape(shape) + bias.reshape(shape)


def _attention(q, k, v, mask, scale, causal, causal_offset):
    g = q.shape[-3] // k.shape[-3] if q.dim() >= 3 else 1
    if g > 1:  # grouped-query heads: query head h reads key/value head h // g
        k, v = k.repeat_interleave(g, dim=-3), v.repeat_interleave(g, dim=-3)
    s = torch.matmul(q, k.transpose(-1, -2)) * (scale or 1.0 / math.sqrt(q.shape[-1]))
    hidden = torch.tensor(-math.inf, dtype=s.dtype)
    if mask is not None:
        s = torch.where(mask, s, hidden) if mask.dtype == torch.bool else s + mask
    if causal:
        i = torch.arange(q.shape[-2])[:, None]
        j = torch.arange(k.shape[-2])[None, :]
        s = torch.where(j <= i + causal_offset, s, hidden)
    e = torch.exp(s - torch.amax(s, dim=-1, keepdim=True))  # a row of -inf: NaN, as ingot's kernels
    return torch.matmul(e / e.sum(dim=-1, keepdim=True), v)


def scaled_dot_product_attention(q, k, v, mask=None, scale=0.0, causal=0, causal_offset=0):
    return _attention(q, k, v, mask, scale, causal, causal_offset)


def scaled_dot_product_attention_grad(q, k, v, dy, mask=None, scale=0.0, causal=0, causal_offset=0):
    float_mask = mask is not None and mask.is_floating_point()
    with torch.enable_grad():
        ins = [t.detach().requires_grad_(True) for t in (q, k, v)]
        m = mask.detach().requires_grad_(True) if float_mask else mask
        y = _attention(*ins, m, scale, causal, causal_offset)
        grads = torch.autograd.grad(y, ins + ([m] if float_mask else []), dy)
    dmask = grads[3] if float_mask else torch.zeros(mask.shape if mask is not None else (0,), dtype=q.dtype)
    return grads[0], grads[1], grads[2], dmask


def matmul(a, b): return torch.matmul(a, b)


def _pair(v, default):
    if v is None:
        return tuple(default)
    return tuple(v) if len(v) == 2 else (v[0], v[0])


def conv2d(x, w, bias=None, stride=None, padding=None, dilation=None, groups=1):
    return F.conv2d(x, w, bias, _pair(stride, (1, 1)), _pair(padding, (0, 0)), _pair(dilation, (1, 1)), groups)


def max_pool2d(x, kernel, stride=None, padding=None, ceil_mode=0):
    k = _pair(kernel, (1, 1))
    return F.max_pool2d(x, k, _pair(stride, k), _pair(padding, (0, 0)), ceil_mode=bool(ceil_mode))


def avg_pool2d(x, kernel, stride=None, padding=None, count_include_pad=1):
    k = _pair(kernel, (1, 1))
    return F.avg_pool2d(_float(x), k, _pair(stride, k), _pair(padding, (0, 0)), count_include_pad=bool(count_include_pad))


def global_avg_pool2d(x, keepdims=0): return torch.mean(_float(x), dim=(2, 3), keepdim=bool(keepdims))


def identity(x): return x
def reshape(x, shape): return torch.reshape(x, tuple(x.shape[i] if d == 0 else d for i, d in enumerate(shape)))
def transpose(x, perm=None): return x.permute(*(perm if perm else reversed(range(x.dim()))))
def broadcast_to(x, shape): return torch.broadcast_to(x, tuple(shape))
def concat(*xs, axis=0): return torch.cat(xs, dim=axis)
def gather(x, indices, axis=0): return torch.index_select(x, axis, indices.reshape(-1).long()).reshape(
    tuple(x.shape[:axis % x.dim()]) + tuple(indices.shape) + tuple(x.shape[axis % x.dim() + 1:]))
def take_along_axis(x, indices, axis): return torch.take_along_dim(x, indices.long(), dim=axis)


def top_k(x, k, axis=-1, largest=1):
    # ingot's order (src/ops/sort.cpp): NaN largest, equal values in index order; stable sorts by
    # value, then by the NaN flag (torch.topk leaves the order of ties open).
    if x.is_floating_point():
        nan = torch.isnan(x)
        key = torch.where(nan, torch.zeros_like(x), -x if largest else x)
        first = (~nan if largest else nan).to(torch.int8)
    else:
        key = -x.long() if largest else x.long()
        first = torch.zeros_like(key, dtype=torch.int8)
    order = torch.argsort(key, dim=axis, stable=True)
    order = torch.take_along_dim(order, torch.argsort(torch.take_along_dim(first, order, dim=axis), dim=axis, stable=True),
                                 dim=axis)
    indices = order.narrow(axis, 0, k)
    return torch.take_along_dim(x, indices, dim=axis), indices


def slice(x, starts, ends, axes=None, steps=None):  # noqa: A001
    axes = axes if axes else list(range(len(starts)))
    steps = steps if steps else [1] * len(starts)
    for s, e, a, st in zip(starts, ends, axes, steps):
        d = x.shape[a]
        norm = lambda i, lo, hi: builtins_min(builtins_max(i + d if i < 0 else i, lo), hi)  # noqa: E731
        if st > 0:
            x = x.narrow(a, norm(s, 0, d), builtins_max(0, norm(e, 0, d) - norm(s, 0, d)))[
                (np.s_[:],) * (a % x.dim()) + (np.s_[::st],)]
        else:  # torch has no negative steps: flip, then step forward
            s2, e2 = norm(s, -1, d - 1), norm(e, -1, d - 1)
            idx = torch.arange(s2, e2, st, dtype=torch.long)
            x = torch.index_select(x, a, idx)
    return x


# The counter-based streams are computed in NumPy's uint64 arithmetic; torch.compile would trace
# that NumPy code as torch ops (which have no uint64 multiply) and get other numbers, so the
# random ops run eagerly inside a compiled function.
_eager = getattr(getattr(torch, "compiler", None), "disable", None) or torch._dynamo.disable


@_eager
def random_uniform(shape, seed, low=0.0, high=1.0, dtype="float32"):
    return torch.from_numpy((low + (high - low) * uniform01(seed, int(np.prod(shape))).astype(np.float64)).reshape(shape))


@_eager
def random_normal(shape, seed, mean=0.0, std=1.0, dtype="float32"):
    return torch.from_numpy((mean + std * normal01(seed, int(np.prod(shape)))).reshape(shape))


@_eager
def _keep_mask(shape, p, seed):
    return torch.from_numpy(uniform01(seed, int(np.prod(shape))).astype(np.float64).reshape(shape) >= p)


def dropout(x, p, seed, training=0):
    if not training:
        return x
    keep = _keep_mask(tuple(x.shape), p, seed)
    return torch.where(keep, x * (1.0 / (1.0 - p)), torch.zeros_like(x))


# -- the (grad) ops of ingot's backward graphs (gradients="ingot"). Each is the pullback of its
# forward op, so torch's own backward kernels compute it: `like` gives the shape the forward read.
def _pullback(forward_op, primal, cotangent):
    """d(sum(forward_op(p) * cotangent)) / dp at p = primal."""
    with torch.enable_grad():
        p = primal.detach().to(cotangent.dtype).requires_grad_(True)
        (g,) = torch.autograd.grad(forward_op(p), p, cotangent)
    return g


def _at_zeros(like, cotangent):
    return torch.zeros(tuple(like.shape), dtype=cotangent.dtype)


def sum_to_like(x, like): return _pullback(lambda p: torch.broadcast_to(p, tuple(x.shape)), _at_zeros(like, x), x)
def broadcast_to_like(x, like): return torch.broadcast_to(x, tuple(like.shape))
def reshape_like(x, like): return torch.reshape(x, tuple(like.shape))
def zeros_like(x): return torch.zeros_like(x)


def expand_dims(x, axes):
    for a in sorted(a % (x.dim() + len(axes)) for a in axes):  # positions in the result, lowest first
        x = torch.unsqueeze(x, a)
    return x


def slice_scatter(grad, like, starts, ends, axes=None, steps=None):
    return _pullback(lambda p: slice(p, starts, ends, axes, steps), _at_zeros(like, grad), grad)


def concat_part(grad, *xs, axis, index):
    axis %= grad.dim()
    start = _builtins.sum(x.shape[axis] for x in xs[:index])
    return grad.narrow(axis, start, xs[index].shape[axis])


def index_add(like, indices, updates, axis=0):
    return _pullback(lambda p: gather(p, indices, axis), _at_zeros(like, updates), updates)


def scatter_add(like, indices, updates, axis):
    return _pullback(lambda p: take_along_axis(p, indices, axis), _at_zeros(like, updates), updates)


def conv2d_input_grad(dy, w, like, stride=None, padding=None, dilation=None, groups=1):
    return _pullback(lambda p: conv2d(p, w.to(dy.dtype), None, stride, padding, dilation, groups), _at_zeros(like, dy), dy)


def conv2d_weight_grad(x, dy, like, stride=None, padding=None, dilation=None, groups=1):
    return _pullback(lambda p: conv2d(x.to(dy.dtype), p, None, stride, padding, dilation, groups), _at_zeros(like, dy), dy)


def max_pool2d_grad(x, dy, kernel, stride=None, padding=None, ceil_mode=0):
    # torch's max_pool2d backward routes dy to each window's first maximum, as ingot's kernel does.
    return _pullback(lambda p: max_pool2d(p, kernel, stride, padding, ceil_mode), x, dy)


def avg_pool2d_grad(dy, like, kernel, stride=None, padding=None, count_include_pad=1):
    return _pullback(lambda p: avg_pool2d(p, kernel, stride, padding, count_include_pad), _at_zeros(like, dy), dy)


def vjp(forward, inputs, constants, cotangents, wrt):
    args = [x.detach().clone().requires_grad_(True) if w else x for x, w in zip(inputs, wrt)]
    outs = forward(args, [from_numpy(c) if isinstance(c, np.ndarray) else c for c in constants])
    pairs = [(o, c) for o, c in zip(outs, cotangents) if c is not None and o.requires_grad]
    leaves = [a for a, w in zip(args, wrt) if w]
    grads = torch.autograd.grad([o for o, _ in pairs], leaves, [c.to(o.dtype) for o, c in pairs], allow_unused=True) if pairs else [None] * len(leaves)
    it = iter(grads)
    result = [None] * len(inputs)
    for i, w in enumerate(wrt):
        if w:
            g = next(it)
            result[i] = torch.zeros_like(args[i]) if g is None else g
    return outs, result


# -- control flow: the generated code's `if` / `while` / `for` statements call these (a
# condition's truth is a graph break under torch.compile, which runs the rest compiled).
def predicate(x):
    """A one-element tensor's truth (nonzero: true) as a 0-d bool tensor; `if` reads it as a bool."""
    return torch.as_tensor(x).reshape(()) != 0


def stack_steps(steps, dtype, shape):
    """A scan's y_t of every step stacked on a new leading axis; zeros of `shape` over zero steps."""
    if steps:
        return torch.stack(steps)
    if shape is None:
        raise ValueError("scan over zero steps: the stacked result's shape is not known at compile time")
    return torch.zeros(tuple(shape), dtype=_DTYPES[dtype])


globals().update(functional_ops(predicate, stack_steps))  # ops.if / ops.while / ops.scan (getattr)


import builtins as _builtins  # noqa: E402

builtins_min, builtins_max = _builtins.min, _builtins.max


for _name in python_ops():
    if _name not in globals():
        globals()[_name] = catalogue_op(_name, _torch_function, _float, _tensors)
