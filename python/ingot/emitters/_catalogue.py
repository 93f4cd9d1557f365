"""The elementwise ops whose definition gives a Python form (``ElementwiseForms::python`` in
src/ir/op_registry.h): an expression over the operands (``x``; or ``a``, ``b``) and functions of
the Python array API standard (``exp``, ``subtract``, ``where``...), evaluated in a framework's
namespace. An op that joins the catalogue with such a form reaches the NumPy, JAX, PyTorch and
MLX emitters with no line here; an op module defines an op itself only where its framework has a
better function (``torch.rsqrt``) or the standard has none (``erf``).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Optional, Sequence

_OPERANDS = {1: ("x",), 2: ("a", "b")}


@functools.lru_cache(maxsize=None)
def forms() -> Dict[str, Dict[str, Any]]:
    """Every elementwise op's forms by name: kind, arity, python, onnx (from the C++ registry)."""
    from .._ingot import elementwise_forms

    return dict(elementwise_forms())


def python_ops() -> frozenset:
    """The elementwise ops every emitter gets from their Python form."""
    return frozenset(name for name, form in forms().items() if form["python"])


def catalogue_op(name: str, resolve: Callable[[str], Any], to_float: Callable[[Any], Any],
                 prepare: Optional[Callable[[Sequence[Any]], Sequence[Any]]] = None) -> Optional[Callable]:
    """``ops.<name>`` built from the op's Python form, or None when it has none.

    ``resolve(function_name)`` gives the framework's function of that array-API name (or None);
    operands of an op whose result is floating for any input (kind ``unary_float``: integers
    compute in float32) go through ``to_float`` first, then all through ``prepare`` (PyTorch:
    ``torch.as_tensor``)."""
    form = forms().get(name)
    if form is None or not form["python"] or form["arity"] not in _OPERANDS:
        return None
    params = _OPERANDS[form["arity"]]
    code = compile(form["python"], f"<ingot op {name}: {form['python']}>", "eval")
    functions = {}
    for n in code.co_names:  # function names, and any attribute names (left unresolved)
        f = None if n in params else resolve(n)
        if f is not None:
            functions[n] = f
    floating = form["kind"] == "unary_float"

    def op(*operands):
        if len(operands) != len(params):
            raise TypeError(f"{name} takes {len(params)} operand(s), got {len(operands)}")
        if floating:
            operands = tuple(to_float(o) for o in operands)
        if prepare is not None:
            operands = tuple(prepare(operands))
        scope = dict(functions)
        scope.update(zip(params, operands))
        return eval(code, scope)  # noqa: S307 - the catalogue's own expression, no user text

    op.__name__ = name
    op.__doc__ = f"{name}({', '.join(params)}) = {form['python']} (the op's Python form)"
    return op
