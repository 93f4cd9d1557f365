"""``ml.compile(fn)`` over lazy arrays (MLX-style), the transforms (grad, value_and_grad, vjp) and
``ml.eval``. The C++ library traces, caches and builds (include/ingot/function_compile.h,
transforms.h); this module handles Python's side: trees of arrays in and out, captured state in
lists and dicts, and one cache per function object."""
from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Dict, List, Sequence, Tuple, Union

from . import _ingot, _tree
from ._ingot import IngotError


class _Cache:
    """What every ``ml.compile`` of one function (with the same options) shares: the C++
    executables per signature and the result structure each signature's trace returned."""

    def __init__(self, shapeless: bool, inputs: Any, outputs: Any):
        self.state = _ingot._CompiledState(shapeless)
        self.inputs, self.outputs = inputs, outputs
        self.structures: Dict[str, Any] = {}


# function -> {(shapeless, id(inputs), id(outputs)): _Cache}. A _Cache holds its state trees, so
# their ids stay theirs while the entry lives; an entry lives as long as its function.
_caches: "weakref.WeakKeyDictionary[Any, Dict[Tuple[bool, int, int], _Cache]]" = weakref.WeakKeyDictionary()


def _cache_for(fn: Callable, shapeless: bool, inputs: Any, outputs: Any) -> _Cache:
    key = (shapeless, id(inputs), id(outputs))
    try:
        per_function = _caches.setdefault(fn, {})
    except TypeError:  # not weakly referenceable: a cache of its own
        return _Cache(shapeless, inputs, outputs)
    if key not in per_function:
        per_function[key] = _Cache(shapeless, inputs, outputs)
    return per_function[key]


class CompiledFunction:
    """A function compiled by ``ml.compile(fn)``: call it like fn, with positional arguments that
    are ml.arrays, array data, numbers, or trees of them (nested lists, tuples and dicts, as in
    JAX and MLX). The first call for each signature (the arguments' tree structures, the shapes
    and dtypes of their leaves and of the captured inputs, the layout of the state trees) traces
    fn with placeholder arrays and builds the trace; later calls run the cached executable.
    Array data (a NumPy array of the dtype it holds, C-contiguous) is read in place for the call,
    not copied; what the call returns never views it (a result that is an argument, or a view of
    one, comes back as a copy), so the caller may reuse its buffer as soon as the call returns."""

    def __init__(self, fn: Callable, cache: _Cache):
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._cache = cache
        self._name = getattr(fn, "__name__", type(fn).__name__)  # callable objects have no __name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise TypeError(f"compiled function {self._name}() takes positional ml.arrays only, got keyword "
                            f"arguments {sorted(kwargs)} (bind them with functools.partial before ml.compile)")
        # Arguments are trees (nested lists, tuples and dicts of arrays, array data and numbers):
        # their leaves are the executable's inputs, their structure part of the signature.
        # Array data (NumPy) is read in place for the call, not copied: call_compiled copies it
        # where a result or a lazy eager run could keep it.
        arguments = _tree.Arguments(args, lambda i: f"compiled function {self._name}(): argument {i}", borrow=True)
        arrays = arguments.leaves
        c = self._cache
        ins = _tree.slots(c.inputs, "inputs", mutable=False)
        outs = _tree.slots(c.outputs, "outputs", mutable=True)
        # The state layout is part of the signature: a new, removed or reordered entry traces again.
        key = ("|args:" + _tree.describe(arguments.structures) + "|in:" + ",".join(s.path for s in ins) + "|out:" +
               ",".join(s.path for s in outs))
        captured = [s.get() for s in ins]
        before = [s.get() for s in outs]
        traced: List[Any] = []

        def trace(xs: List["_ingot.array"]) -> List["_ingot.array"]:
            restores = []
            try:
                for slot, x in zip(ins, xs[len(arrays):]):
                    restores.append(slot.swap_input(x))
                flat, structure = _tree.flatten(self._fn(*arguments.rebuilt(xs[:len(arrays)])),
                                                f"the result of {self._name}()")
                traced.append(structure)
                return flat + [s.get() for s in outs]
            finally:
                for restore in reversed(restores):
                    restore()

        signature = _ingot._compiled_signature(c.state, arrays + captured, key)
        try:
            results = _ingot._call_compiled(c.state, arrays + captured, arguments.borrowed + [False] * len(captured),
                                            trace, key)
        except BaseException:
            for slot, value in zip(outs, before):  # leave the state as it was before the call
                slot.set(value)
            raise
        if traced:
            c.structures[signature] = traced[-1]
        returned = results[:len(results) - len(outs)]
        for slot, value in zip(outs, results[len(returned):]):
            slot.set(value)
        return _tree.unflatten(c.structures[signature], returned)

    def __repr__(self) -> str:
        return f"<ingot.CompiledFunction {self._name}>"


_FN_OPTIONS = ("shapeless", "inputs", "outputs")


def compile_function(fn: Callable, shapeless: bool = False, inputs: Any = None, outputs: Any = None) -> CompiledFunction:
    """``ml.compile(fn, ...)`` for a Python function (see ingot.compile)."""
    if not isinstance(shapeless, bool):
        raise TypeError(f"compile(fn): shapeless must be True or False, got {shapeless!r}")
    _tree.slots(inputs, "inputs", mutable=False)  # the state trees' errors, now rather than at the first call
    _tree.slots(outputs, "outputs", mutable=True)
    return CompiledFunction(fn, _cache_for(fn, shapeless, inputs, outputs))


def _argnums(argnums: Union[int, Sequence[int]], count: int) -> List[int]:
    nums = [argnums] if isinstance(argnums, int) else list(argnums)
    if not nums or not all(isinstance(n, int) and not isinstance(n, bool) for n in nums):
        raise TypeError(f"argnums must be an int or a non-empty sequence of ints, got {argnums!r}")
    out = []
    for n in nums:
        if not -count <= n < count:
            raise IngotError(f"argnums: {n} is out of range for a call with {count} arguments")
        out.append(n % count)
    if len(set(out)) != len(out):
        raise IngotError(f"argnums: {argnums!r} names an argument twice")
    return out


def value_and_grad(fn: Callable, argnums: Union[int, Sequence[int]] = 0) -> Callable:
    """A function returning (fn(*args), gradients of its loss w.r.t. the arguments in `argnums`).

    fn returns the loss (an array of one element), or a tuple/list whose first item is the loss
    and whose other items are auxiliary values (returned, not differentiated). Arguments may be
    arrays or trees of them (lists, tuples, dicts, e.g. a dict of parameters); each gradient has
    its argument's structure. With an int `argnums` the gradient comes alone, with a sequence as a
    tuple. Composes with ml.compile both ways: ml.compile(ml.grad(f)) builds one executable, and
    ml.grad(ml.compile(f)) inlines the compiled function into the trace.
    """
    def wrapped(*args: Any) -> Tuple[Any, Any]:
        nums = _argnums(argnums, len(args))
        arguments = _tree.Arguments(args, lambda i: f"argument {i}")
        wrt = [k for n in nums for k in arguments.indices(n)]
        result_structure: List[Any] = []

        def flat_fn(xs: List["_ingot.array"]) -> List["_ingot.array"]:
            out = fn(*arguments.rebuilt(xs))
            first = out[0] if isinstance(out, (tuple, list)) and out else out
            if not isinstance(first, _ingot.array):
                raise TypeError(f"value_and_grad: the function must return the loss array, or a tuple whose first item "
                                f"is the loss; got {type(first).__name__}")
            flat, structure = _tree.flatten(out, "the function's result")
            result_structure.append(structure)
            return flat

        values, grads = _ingot._value_and_grad(flat_fn, arguments.leaves, wrt)
        per_argument, start = [], 0
        for n in nums:
            count = len(arguments.indices(n))
            per_argument.append(arguments.part(n, grads[start:start + count]))
            start += count
        value = _tree.unflatten(result_structure[-1], values)
        return value, (per_argument[0] if isinstance(argnums, int) else tuple(per_argument))

    return wrapped


def grad(fn: Callable, argnums: Union[int, Sequence[int]] = 0) -> Callable:
    """A function returning the gradient of fn's loss w.r.t. the arguments in `argnums` (see
    value_and_grad, which also returns fn's value)."""
    vg = value_and_grad(fn, argnums)
    return lambda *args: vg(*args)[1]


def vjp(fn: Callable, primals: Sequence[Any], cotangents: Sequence[Any]) -> Tuple[List["_ingot.array"], List[Any]]:
    """(fn(*primals)'s arrays as a flat list, the vector-Jacobian products): the cotangents (one
    per array of fn's result, in its flattened order, shaped like it; they may be given as a tree
    of the result's structure) pulled back to each primal. A primal may be a tree (lists, tuples,
    dicts of arrays); its vector-Jacobian product has its structure."""
    arguments = _tree.Arguments(primals, lambda i: f"vjp: primal {i}")

    def flat_fn(xs: List["_ingot.array"]) -> List["_ingot.array"]:
        return _tree.flatten(fn(*arguments.rebuilt(xs)), "the function's result")[0]

    seeds = _tree.flatten(list(cotangents), "vjp: cotangent", convert=True)[0]
    outputs, vjps = _ingot._vjp(flat_fn, arguments.leaves, seeds)
    return list(outputs), arguments.rebuilt(list(vjps))


def eval(*trees: Any) -> None:  # noqa: A001 - MLX's name
    """Computes the given arrays (and lists, tuples and dicts of them) now, as one graph."""
    _ingot._eval(_tree.flatten(list(trees), "eval() argument")[0])
