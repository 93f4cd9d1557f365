"""Control flow in the generated source: the ``if``, ``while`` and ``scan`` nodes, which own
subgraphs (src/ops/control_flow.cpp states their contracts).

Each subgraph becomes a nested function (``def fn_3(v0, v1):``) written from its JSON by the same
writer as the top-level graph, so subgraphs nest; the node's own statement calls them. Two styles:

- Python control flow (NumPy, PyTorch, MLX): ``if`` / ``while`` / ``for`` statements. The arrays
  are eager (MLX evaluates the condition when Python asks for its truth), so the condition is a
  Python bool, and torch.autograd and mx.vjp differentiate through the statements as they run.
- ``jax.lax`` (JAX): the generated function runs under ``jax.jit``, where a traced condition has
  no Python truth, so the node becomes ``lax.cond`` / ``lax.while_loop`` / ``lax.scan``; jax.vjp
  differentiates ``cond`` and ``scan`` (not ``while_loop``, see jax_ops.vjp).

The same ops are also functions over Python callables (``functional_ops``): ``getattr(ops, "scan")
(body, operands, num_carry=1, num_xs=1)``, so every op of SUPPORTED_OPS is an ``ops.<op>``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence

OPS = frozenset({"if", "while", "scan"})

# The subgraphs each op owns, by role, in the order of the node's "subgraphs".
ROLES = {"if": ("then", "else"), "while": ("cond", "body"), "scan": ("body",)}


def _targets(names: Sequence[str]) -> str:
    """An assignment target for a list of results: "v5, v6", or "[v5]" for one."""
    return ", ".join(names) if len(names) != 1 else f"[{names[0]}]"


def _args(names: Sequence[str]) -> str:
    return ", ".join(names)


def _assign(targets: Sequence[str], sources: Sequence[str]) -> str:
    """ "v5, v6 = v0, v1" (the loop's variables start as the node's operands)."""
    return f"{', '.join(targets)} = {', '.join(sources)}"


def emit(w, node: Dict[str, Any], values: List[Dict[str, Any]], indent: str) -> List[str]:
    """Lines for one control-flow node. `w` is the graph writer (emitters.__init__._GraphWriter):
    w.function(graph, indent, role) -> (name, lines) writes a subgraph as a nested function,
    w.fresh() numbers generated identifiers, w.lax picks the jax.lax style, w.origin(node) is
    the node's escaped scope for comments, w.literal / w.static_shape write attribute values."""
    op = node["op"]
    subgraphs = node.get("subgraphs") or []
    if len(subgraphs) != len(ROLES[op]):
        raise ValueError(f"{op} node {node['id']} has {len(subgraphs)} subgraphs, expected {len(ROLES[op])} "
                         f"({', '.join(ROLES[op])})")
    attrs = {k: a["value"] for k, a in node["attrs"].items()}
    lines = [f"{indent}# {op} node {node['id']}{w.origin(node)}"]
    fns = []
    for role, sub in zip(ROLES[op], subgraphs):
        name, body = w.function(sub, indent, f"the {role} graph of {op} node {node['id']}")
        fns.append(name)
        lines += body
    ins = [f"v{i}" for i in node["inputs"]]
    outs = [f"v{o}" for o in node["outputs"]]
    style = _LAX if w.lax else _PYTHON
    return lines + style[op](w, fns, ins, outs, attrs, values, node, indent)


# -- Python control flow: NumPy, PyTorch, MLX --------------------------------------------------

def _python_if(w, fns, ins, outs, attrs, values, node, indent):
    then_fn, else_fn = fns
    return [f"{indent}if ops.predicate({ins[0]}):",
            f"{indent}    {_targets(outs)} = {then_fn}({_args(ins[1:])})",
            f"{indent}else:",
            f"{indent}    {_targets(outs)} = {else_fn}({_args(ins[1:])})"]


def _python_while(w, fns, ins, outs, attrs, values, node, indent):
    cond_fn, body_fn = fns
    carried = outs  # the results are the last carried values: the loop updates them in place
    operands = _args(carried + ins[len(carried):])
    limit = int(attrs.get("max_iterations", 0))
    lines = [f"{indent}{_assign(carried, ins[:len(carried)])}"]
    test = f"ops.predicate({cond_fn}({operands})[0])"
    if limit > 0:
        i = f"i_{w.fresh()}"
        lines.append(f"{indent}{i} = 0")
        test = f"{i} < {limit} and {test}"  # the bound first: no condition evaluated past it
    lines += [f"{indent}while {test}:",
              f"{indent}    {_targets(carried)} = {body_fn}({operands})"]
    if limit > 0:
        lines.append(f"{indent}    {i} += 1")
    return lines


def _python_scan(w, fns, ins, outs, attrs, values, node, indent):
    (body_fn,) = fns
    c, x = int(attrs.get("num_carry", 0)), int(attrs.get("num_xs", 1))
    carry = outs[:c]
    k = w.fresh()
    t, steps = f"t_{k}", f"{ins[c]}.shape[0]"
    stacked = node["outputs"][c:]
    stacks = [f"ys_{o}" for o in stacked]  # ys_6: the steps stacked into v6
    lines = [f"{indent}{_assign(carry, ins[:c])}"] if c else []
    lines += [f"{indent}{s} = [None] * {steps}" for s in stacks]
    order = f"reversed(range({steps}))" if attrs.get("reverse", 0) else f"range({steps})"
    step_args = carry + [f"{xs}[{t}]" for xs in ins[c:c + x]] + ins[c + x:]
    lines += [f"{indent}for {t} in {order}:",
              f"{indent}    {_targets(carry + [f'{s}[{t}]' for s in stacks])} = {body_fn}({_args(step_args)})"]
    for s, o in zip(stacks, stacked):  # in index order t, also in reverse, as the contract says
        value = values[o]
        lines.append(f"{indent}v{o} = ops.stack_steps({s}, {w.literal(value['dtype'])}, {w.literal(w.static_shape(value))})")
    return lines


# -- jax.lax: JAX, under jax.jit ----------------------------------------------------------------

def _lax_if(w, fns, ins, outs, attrs, values, node, indent):
    then_fn, else_fn = fns
    operands = "".join(f", {a}" for a in ins[1:])
    return [f"{indent}{_targets(outs)} = ops.lax.cond(ops.predicate({ins[0]}), {then_fn}, {else_fn}{operands})"]


def _lax_while(w, fns, ins, outs, attrs, values, node, indent):
    cond_fn, body_fn = fns
    n = len(outs)
    invariants = "".join(f", {a}" for a in ins[n:])  # read by the loop's functions from here
    limit = int(attrs.get("max_iterations", 0))
    test, step = f"fn_{w.fresh()}", f"fn_{w.fresh()}"
    init = f"[{_args(ins[:n])}]"
    if limit <= 0:
        return [f"{indent}def {test}(carried):  # lax.while_loop's condition",
                f"{indent}    return ops.predicate({cond_fn}(*carried{invariants})[0])",
                f"{indent}def {step}(carried):  # lax.while_loop's body",
                f"{indent}    return {body_fn}(*carried{invariants})",
                f"{indent}{_targets(outs)} = ops.lax.while_loop({test}, {step}, {init})"]
    # max_iterations: the loop carries its iteration count too, and stops at the bound.
    return [f"{indent}def {test}(loop):  # lax.while_loop's condition: under {limit} iterations, and the cond graph",
            f"{indent}    i, carried = loop",
            f"{indent}    return (i < {limit}) & ops.predicate({cond_fn}(*carried{invariants})[0])",
            f"{indent}def {step}(loop):  # lax.while_loop's body: one more iteration",
            f"{indent}    i, carried = loop",
            f"{indent}    return i + 1, {body_fn}(*carried{invariants})",
            f"{indent}_, [{_args(outs)}] = ops.lax.while_loop({test}, {step}, (0, {init}))"]


def _lax_scan(w, fns, ins, outs, attrs, values, node, indent):
    (body_fn,) = fns
    c, x = int(attrs.get("num_carry", 0)), int(attrs.get("num_xs", 1))
    step = f"fn_{w.fresh()}"
    invariants = "".join(f", {a}" for a in ins[c + x:])
    reverse = ", reverse=True" if attrs.get("reverse", 0) else ""
    return [f"{indent}def {step}(carry, xs_t):  # lax.scan's step: (carry, xs[t]) -> (next carry, y_t)",
            f"{indent}    results = {body_fn}(*carry, *xs_t{invariants})",
            f"{indent}    return results[:{c}], results[{c}:]",
            f"{indent}[{_args(outs[:c])}], [{_args(outs[c:])}] = "
            f"ops.lax.scan({step}, [{_args(ins[:c])}], [{_args(ins[c:c + x])}]{reverse})"]


_PYTHON = {"if": _python_if, "while": _python_while, "scan": _python_scan}
_LAX = {"if": _lax_if, "while": _lax_while, "scan": _lax_scan}


# -- the ops as functions over Python callables -------------------------------------------------

def functional_ops(predicate: Callable[[Any], Any], stack_steps: Callable[..., Any]) -> Dict[str, Callable]:
    """``if``, ``while`` and ``scan`` as Python control flow over subgraph functions (each takes
    and returns a list), with the node's attributes as keywords; the statements the NumPy,
    PyTorch and MLX emitters write do the same inline."""

    def if_(cond, then_fn, else_fn, *operands):
        return list(then_fn(*operands) if predicate(cond) else else_fn(*operands))

    def while_(cond_fn, body_fn, *operands, num_invariant=0, max_iterations=0):
        n = len(operands) - num_invariant
        carried, invariants = list(operands[:n]), list(operands[n:])
        i = 0
        while (max_iterations <= 0 or i < max_iterations) and predicate(cond_fn(*carried, *invariants)[0]):
            carried = list(body_fn(*carried, *invariants))
            i += 1
        return carried

    def scan(body_fn, *operands, num_carry=0, num_xs=1, reverse=0):
        c, x = num_carry, num_xs
        carry, xs, invariants = list(operands[:c]), operands[c:c + x], list(operands[c + x:])
        steps = xs[0].shape[0]
        ys: List[List[Any]] = []
        for t in (reversed(range(steps)) if reverse else range(steps)):
            results = list(body_fn(*carry, *[a[t] for a in xs], *invariants))
            carry = results[:c]
            ys.append(results[c:])
        if reverse:
            ys.reverse()
        if not ys:
            raise ValueError("scan over zero steps: the stacked results' shapes are unknown here")
        stacked = [stack_steps([y[j] for y in ys], None, None) for j in range(len(ys[0]))]
        return carry + stacked

    return {"if": if_, "while": while_, "scan": scan}


def lax_ops(lax, predicate: Callable[[Any], Any]) -> Dict[str, Callable]:
    """The same functions over jax.lax (what the JAX emitter writes inline)."""

    def if_(cond, then_fn, else_fn, *operands):
        return list(lax.cond(predicate(cond), then_fn, else_fn, *operands))

    def while_(cond_fn, body_fn, *operands, num_invariant=0, max_iterations=0):
        n = len(operands) - num_invariant
        invariants = list(operands[n:])
        test = lambda loop: (max_iterations <= 0 or loop[0] < max_iterations) & predicate(  # noqa: E731
            cond_fn(*loop[1], *invariants)[0])
        step = lambda loop: (loop[0] + 1, list(body_fn(*loop[1], *invariants)))  # noqa: E731
        return lax.while_loop(test, step, (0, list(operands[:n])))[1]

    def scan(body_fn, *operands, num_carry=0, num_xs=1, reverse=0):
        c, x = num_carry, num_xs
        invariants = list(operands[c + x:])

        def step(carry, xs_t):
            results = list(body_fn(*carry, *xs_t, *invariants))
            return results[:c], results[c:]

        carry, ys = lax.scan(step, list(operands[:c]), list(operands[c:c + x]), reverse=bool(reverse))
        return list(carry) + list(ys)

    return {"if": if_, "while": while_, "scan": scan}
