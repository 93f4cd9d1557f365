"""Trees of arrays (nested lists, tuples and dicts), as function compile and the transforms take and
return them: flattening to a list of arrays and back, and the slots of captured state."""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Tuple

from . import _ingot

_LEAF = "leaf"


# The walkers below are module functions, not closures: a recursive closure is a reference cycle
# (the function holds the cell that holds it), which would keep the arrays it reaches alive until
# the garbage collector runs, and arrays can be large.

def flatten(tree: Any, what: str, convert: bool = False,
            borrowed: Optional[List[bool]] = None) -> Tuple[List["_ingot.array"], Any]:
    """The arrays of `tree` in order, and its structure for unflatten. None is an empty subtree.
    With `convert`, other leaves become ml.arrays (array data, numbers); else they are a TypeError
    naming their path inside `what`. With a `borrowed` list, converted array data is read in place
    (ml.asarray: no copy where the dtype and layout allow) and `borrowed` gets, per leaf, whether
    it was converted (its memory may be the caller's)."""
    leaves: List[_ingot.array] = []
    return leaves, _flatten(tree, what, "", convert, leaves, borrowed)


def _flatten(x: Any, what: str, path: str, convert: bool, leaves: List["_ingot.array"],
             borrowed: Optional[List[bool]]) -> Any:
    if isinstance(x, _ingot.array):
        leaves.append(x)
        if borrowed is not None:
            borrowed.append(False)
        return _LEAF
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return (type(x), [_flatten(v, what, f"{path}[{i}]", convert, leaves, borrowed) for i, v in enumerate(x)])
    if isinstance(x, dict):
        return (dict, list(x),
                [_flatten(v, what, f"{path}[{k!r}]", convert, leaves, borrowed) for k, v in x.items()])
    if convert:
        leaves.append(as_array(x, f"{what}{path}", copy=borrowed is None))
        if borrowed is not None:
            borrowed.append(True)
        return _LEAF
    raise TypeError(f"{what}{path} is a {type(x).__name__}: expected ml.arrays, or lists, tuples and dicts of them")


class Arguments:
    """Positional arguments that are trees, flattened into one list of arrays (their leaves,
    converted from array data and numbers) and rebuilt from a list of the same length. With
    `borrow`, array data is read in place and `borrowed` says which leaves may be the caller's
    memory (see flatten)."""

    def __init__(self, args: Any, what: Callable[[int], str], borrow: bool = False):
        self.leaves: List["_ingot.array"] = []
        self.structures: List[Any] = []
        self.offsets: List[int] = []
        self.borrowed: Optional[List[bool]] = [] if borrow else None
        for i, a in enumerate(args):
            flat, structure = flatten(a, what(i), convert=True, borrowed=self.borrowed)
            self.offsets.append(len(self.leaves))
            self.leaves += flat
            self.structures.append(structure)
        self.offsets.append(len(self.leaves))

    def rebuilt(self, xs: List[Any]) -> List[Any]:
        """The arguments with `xs` in place of their leaves."""
        return [unflatten(s, xs[self.offsets[i]:self.offsets[i + 1]]) for i, s in enumerate(self.structures)]

    def part(self, i: int, xs: List[Any]) -> Any:
        """Argument i's tree with `xs` (one per leaf of that argument) as its leaves."""
        return unflatten(self.structures[i], xs)

    def indices(self, i: int) -> range:
        """The positions of argument i's leaves in `leaves`."""
        return range(self.offsets[i], self.offsets[i + 1])


def as_array(x: Any, what: str, copy: bool = True) -> "_ingot.array":
    """x as an ml.array (array data is copied, or with copy=False read in place where its dtype
    and layout allow, as ml.asarray). Errors name `what`: what is not array data is a TypeError
    (nanobind's own message would only list the constructor's signature), data of an unsupported
    dtype an IngotError."""
    if isinstance(x, _ingot.array):
        return x
    try:
        return _ingot.array(x) if copy else _ingot.asarray(x)
    except _ingot.IngotError as e:  # data of an unsupported dtype
        raise _ingot.IngotError(f"{what}: {e}") from None
    except TypeError:
        raise TypeError(f"{what} has type {type(x).__name__}: expected an ml.array or array data (a NumPy array, "
                        "anything with __dlpack__ or the buffer protocol, a list or a number)") from None


def unflatten(structure: Any, leaves: List["_ingot.array"]) -> Any:
    """The tree `flatten` took apart, with `leaves` in place of its arrays."""
    return _unflatten(structure, iter(leaves))


def _unflatten(s: Any, leaves: Iterator["_ingot.array"]) -> Any:
    if s == _LEAF:
        return next(leaves)
    if s is None:
        return None
    if s[0] is dict:
        return {k: _unflatten(v, leaves) for k, v in zip(s[1], s[2])}
    items = [_unflatten(v, leaves) for v in s[1]]
    return s[0](*items) if hasattr(s[0], "_fields") else s[0](items)  # a namedtuple takes its fields


def describe(structure: Any) -> str:
    """A structure as text, for a cache key: equal exactly when the structures are."""
    if structure == _LEAF:
        return "*"
    if structure is None:
        return "None"
    if isinstance(structure, list):
        return "[" + ",".join(describe(s) for s in structure) + "]"
    if structure[0] is dict:
        return "{" + ",".join(f"{k!r}:{describe(v)}" for k, v in zip(structure[1], structure[2])) + "}"
    kind = structure[0]
    return f"{kind.__module__}.{kind.__qualname__}(" + ",".join(describe(s) for s in structure[1]) + ")"


class Slot:
    """Where one captured array lives: an entry of a list or dict, or the global random state."""

    def __init__(self, container: Any, key: Any, path: str):
        self.container, self.key, self.path = container, key, path

    def get(self) -> "_ingot.array":
        if isinstance(self.container, _ingot.RandomState):
            return self.container.value
        return self.container[self.key]

    def set(self, value: "_ingot.array") -> None:
        if isinstance(self.container, _ingot.RandomState):
            self.container.value = value
        else:
            self.container[self.key] = value

    def swap_input(self, value: "_ingot.array") -> Callable[[], None]:
        """Makes this captured input hold `value` until the returned function is called. The
        ml.array object itself changes (not only the container's entry), so code that reads it
        directly, not through the container, sees `value` too."""
        if isinstance(self.container, _ingot.RandomState):
            state, old = self.container, self.container.value
            state.value = value
            return lambda: setattr(state, "value", old)
        target = self.get()
        old = _ingot.array(target)  # a second handle to the same value
        _ingot._rebind(target, value)
        return lambda: _ingot._rebind(target, old)


def slots(tree: Any, what: str, mutable: bool) -> List[Slot]:
    """Every array slot of a state tree (lists, tuples, dicts, ml.random.state). Trees that are
    written back into (`mutable`: compile's outputs) cannot hold tuples."""
    out: List[Slot] = []
    if tree is not None:
        _slots(tree, what, "", mutable, out)
    return out


def _slots(x: Any, what: str, path: str, mutable: bool, out: List[Slot]) -> None:
    if isinstance(x, _ingot.RandomState):
        out.append(Slot(x, None, path))
        return
    if isinstance(x, tuple) and mutable:
        raise TypeError(f"{what}{path} is a tuple, which cannot be updated in place: use a list")
    if isinstance(x, (list, tuple)):
        items: Any = enumerate(x)
    elif isinstance(x, dict):
        items = x.items()
    else:
        raise TypeError(f"{what}{path} is a {type(x).__name__}: captured state is lists, tuples and dicts of "
                        "ml.arrays (and ml.random.state)")
    for k, v in items:
        p = f"{path}[{k!r}]"
        if isinstance(v, _ingot.array):
            out.append(Slot(x, k, p))
        else:
            _slots(v, what, p, mutable, out)
