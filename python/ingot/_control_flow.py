"""ml.cond, ml.while_loop and ml.scan: control flow on lazy arrays, with JAX's signatures.

Each function is called once, on placeholder arrays, and what it records becomes a subgraph of an
`if`, `while` or `scan` op of the IR, so the branch or the loop runs when the graph runs: eagerly,
inside ml.compile (one trace serves every predicate value and trip count), and under ml.grad
(through cond, scan, and while_loop given max_iterations; without it a gradient through
while_loop is an error that says to set it). Operands, carries and
results may be arrays or trees of them (lists, tuples, dicts); numbers and array data convert.
Arrays a function reads without receiving them (weights, literals) are passed in for it.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from . import _ingot, _tree


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """true_fun(*operands) where `pred` (one element) is true, else false_fun(*operands); both
    branches return the same structure, each array with one shape and dtype in both."""
    arguments = _tree.Arguments(operands, lambda i: f"cond: operand {i}")
    structures: List[Any] = []

    def branch(fun: Callable, name: str) -> Callable:
        def flat(xs: List["_ingot.array"]) -> List["_ingot.array"]:
            leaves, structure = _tree.flatten(fun(*arguments.rebuilt(xs)), f"cond: {name}'s result", convert=True)
            structures.append(structure)
            return leaves
        return flat

    out = _ingot._cond(_tree.as_array(pred, "cond: pred"), branch(true_fun, "true_fun"), branch(false_fun, "false_fun"),
                       arguments.leaves)
    if _tree.describe(structures[0]) != _tree.describe(structures[1]):
        raise _ingot.IngotError(f"cond: true_fun returns {_tree.describe(structures[0])} but false_fun returns "
                                f"{_tree.describe(structures[1])}")
    return _tree.unflatten(structures[0], list(out))


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any, max_iterations: Optional[int] = None) -> Any:
    """The loop state after body_fun(state) ran while cond_fun(state) (one bool element) held, at
    most `max_iterations` times when given; body_fun returns the state's structure, shapes and dtypes.
    ml.grad through the loop needs max_iterations: the backward pass saves that many iterations."""
    leaves, structure = _tree.flatten(init_val, "while_loop: init_val", convert=True)

    def flat_cond(xs: List["_ingot.array"]) -> "_ingot.array":
        return _tree.as_array(cond_fun(_tree.unflatten(structure, xs)), "while_loop: cond_fun's result")

    def flat_body(xs: List["_ingot.array"]) -> List["_ingot.array"]:
        out, out_structure = _tree.flatten(body_fun(_tree.unflatten(structure, xs)), "while_loop: body_fun's result",
                                           convert=True)
        if _tree.describe(out_structure) != _tree.describe(structure):
            raise _ingot.IngotError(f"while_loop: body_fun returns {_tree.describe(out_structure)} for a state of "
                                    f"{_tree.describe(structure)}")
        return out

    return _tree.unflatten(structure, list(_ingot._while_loop(flat_cond, flat_body, leaves, max_iterations)))


def scan(f: Callable, init: Any, xs: Any, reverse: bool = False) -> Tuple[Any, Any]:
    """(last carry, stacked ys) of `carry, y = f(carry, x)` over the leading axis of every array of
    `xs` (last first with `reverse`); each y is stacked along a new leading axis (y may be None)."""
    carry_leaves, carry_structure = _tree.flatten(init, "scan: init", convert=True)
    x_leaves, x_structure = _tree.flatten(xs, "scan: xs", convert=True)
    y_structures: List[Any] = []

    def step(carry: List["_ingot.array"], x: List["_ingot.array"]) -> Tuple[List["_ingot.array"], List["_ingot.array"]]:
        out = f(_tree.unflatten(carry_structure, carry), _tree.unflatten(x_structure, x))
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError(f"scan: f must return a (carry, y) pair, got {type(out).__name__}")
        new_carry, new_structure = _tree.flatten(out[0], "scan: f's carry", convert=True)
        if _tree.describe(new_structure) != _tree.describe(carry_structure):
            raise _ingot.IngotError(f"scan: f returns a carry of {_tree.describe(new_structure)} for "
                                    f"{_tree.describe(carry_structure)}")
        ys, y_structure = _tree.flatten(out[1], "scan: f's y", convert=True)
        y_structures.append(y_structure)
        return new_carry, ys

    carry, ys = _ingot._scan(step, carry_leaves, x_leaves, reverse)
    return _tree.unflatten(carry_structure, list(carry)), _tree.unflatten(y_structures[0], list(ys))
