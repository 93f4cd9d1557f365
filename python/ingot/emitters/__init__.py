"""Framework emitters: Python source for the optimized graph, run in NumPy, PyTorch or JAX.

``ml.compile(model, ml.NumpyBackend())`` (or ``TorchBackend`` / ``JaxBackend``) builds the
optimized graph in C++, then :func:`emit_source` turns its JSON dump into a readable Python module
whose ``forward(inputs, constants)`` calls the framework through a small op module
(``numpy_ops``, ``torch_ops``, ``jax_ops``). Identifiers in the source are generated (``v12``);
model names appear only in comments, escaped.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence

from .._files import write_atomically
from . import _control_flow
from ._catalogue import python_ops

__all__ = ["Emitter", "emit_source", "FRAMEWORKS"]

# The options each framework's compiler takes through jit_options / jax_options / torch_options
# (jax.jit's and torch.compile's keyword arguments); another key is a TypeError naming these.
JIT_OPTIONS = {
    "jax": ("static_argnums", "static_argnames", "donate_argnums", "donate_argnames", "keep_unused", "inline"),
    "torch": ("backend", "mode", "fullgraph", "dynamic", "options", "disable"),
    "mlx": ("shapeless",),
    "numpy": (),
}

# backend name -> (module users install, op module in this package, display name)
FRAMEWORKS = {
    "numpy": ("numpy", "numpy_ops", "NumPy"),
    "torch": ("torch", "torch_ops", "PyTorch"),
    "jax": ("jax", "jax_ops", "JAX"),
    "mlx": ("mlx", "mlx_ops", "MLX"),
}

# Every op of src/ops/families.h: the forward ops, and the ops marked (grad) there, which appear
# only in ingot's backward graphs (a backend's gradients="ingot"). An op the C++ side adds later
# fails with an error naming the op.
GRAD_OPS = frozenset(
    """sum_to_like conv2d_input_grad conv2d_weight_grad max_pool2d_grad avg_pool2d_grad broadcast_to_like
    reshape_like expand_dims zeros_like slice_scatter concat_part index_add scatter_add
    scaled_dot_product_attention_grad""".split()
)
# The elementwise ops with a Python form in their definition (_catalogue) reach every emitter by
# themselves; the others each op module writes.
# The control-flow ops (if, while, scan) own subgraphs; _control_flow writes them.
SUPPORTED_OPS = GRAD_OPS | python_ops() | _control_flow.OPS | frozenset(
    """rsqrt sigmoid relu gelu erf cast fmod where
    sum mean max min argmax moments softmax log_softmax layer_norm rms_norm batch_norm
    matmul conv2d max_pool2d avg_pool2d global_avg_pool2d scaled_dot_product_attention
    identity reshape transpose broadcast_to slice concat gather take_along_axis top_k
    random_uniform random_normal dropout numel""".split()
)


def _comment(text: str) -> str:
    """A user string made safe for a one-line comment: printable ASCII, escaped like JSON."""
    return json.dumps(text, ensure_ascii=True)


def _literal(value: Any) -> str:
    """Python source for an attribute value (numbers, strings, lists of numbers)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "-float('inf')"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    raise ValueError(f"cannot emit attribute value {value!r}")


def _attr_value(attr: Dict[str, Any]) -> Any:
    value = attr["value"]
    if attr["type"] == "float":
        return float(value)  # also "nan" / "inf", as the dump writes them
    if attr["type"] == "floats":
        return [float(v) for v in value]
    return value


def _type_str(value: Dict[str, Any]) -> str:
    dims = ["?" if d is None else str(d) for d in value["shape"]]
    return f"{value['dtype']}[{', '.join(dims)}]"


def constant_slots(graph: Dict[str, Any]):
    """Every constant leaf of `graph` and of its subgraphs, nested, as (graph, value) in the order
    `forward` receives them in `constants`: the graph's own, then each node's subgraphs' in node
    order, depth first (a subgraph's function reads its constants from the same list)."""
    for v in graph["values"]:
        if v["producer"] < 0 and v["kind"] == "constant":
            yield graph, v
    for node in graph["nodes"]:
        for sub in node.get("subgraphs") or ():
            yield from constant_slots(sub)


class _GraphWriter:
    """Writes a graph's body as lines of Python; a control-flow node's subgraphs become nested
    functions written by this same writer (_control_flow), so subgraphs nest to any depth."""

    def __init__(self, graph: Dict[str, Any], framework: str):
        self.display = FRAMEWORKS[framework][2]
        self.lax = framework == "jax"  # under jax.jit: lax.cond / while_loop / scan, no Python branching
        self._constants = {(id(g), v["id"]): i for i, (g, v) in enumerate(constant_slots(graph))}
        self._count = 0
        self.literal = _literal

    def fresh(self) -> int:
        """A number for a generated identifier (fn_3, t_4): unique in the module."""
        self._count += 1
        return self._count

    @staticmethod
    def origin(node: Dict[str, Any]) -> str:
        return f" (from {_comment(node['scope'])})" if node["scope"] else ""

    @staticmethod
    def static_shape(value: Dict[str, Any]) -> Optional[List[int]]:
        """The value's shape where every size is known at compile time, else None."""
        return value["shape"] if all(isinstance(d, int) for d in value["shape"]) else None

    def function(self, graph: Dict[str, Any], indent: str, role: str):
        """(name, lines) of a nested function computing `graph`: its inputs, in leaf order, are the
        parameters; it returns the list of its outputs."""
        name = f"fn_{self.fresh()}"
        params = [v for v in graph["values"] if v["producer"] < 0 and v["kind"] != "constant"]
        lines = [f"{indent}def {name}({', '.join('v%d' % v['id'] for v in params)}):  # {role}"]
        for v in params:
            lines.append(f"{indent}    # v{v['id']}: {v['kind']} {_comment(v['name'])}: {_type_str(v)}")
        return name, lines + self.body(graph, indent + "    ")

    def body(self, graph: Dict[str, Any], indent: str, inputs: bool = False) -> List[str]:
        """The statements of `graph`, ending in its return; `inputs`: bind the inputs from
        forward's `inputs` list (the top level; a subgraph's come in as parameters)."""
        values = graph["values"]
        leaves = [v for v in values if v["producer"] < 0]
        lines = []
        if inputs:
            for i, v in enumerate(v for v in leaves if v["kind"] != "constant"):
                lines.append(f"{indent}v{v['id']} = inputs[{i}]  # {v['kind']} {_comment(v['name'])}: {_type_str(v)}")
        for v in leaves:
            if v["kind"] == "constant":
                i = self._constants[(id(graph), v["id"])]
                lines.append(f"{indent}v{v['id']} = constants[{i}]  # constant {_comment(v['name'])}: {_type_str(v)}")
        for node in graph["nodes"]:
            lines += self.node(node, values, indent)
        for out in graph["outputs"]:
            lines.append(f"{indent}# output {_comment(out['name'])} = v{out['value']}")
        lines.append(f"{indent}return [" + ", ".join(f"v{o['value']}" for o in graph["outputs"]) + "]")
        return lines

    def node(self, node: Dict[str, Any], values: List[Dict[str, Any]], indent: str) -> List[str]:
        op = node["op"]
        if op not in SUPPORTED_OPS:
            raise NotImplementedError(f"The {self.display} backend has no emitter for op '{op}' (node {node['id']})")
        if op in _control_flow.OPS:
            return _control_flow.emit(self, node, values, indent)
        args = [f"v{i}" for i in node["inputs"]]
        args += [f"{k}={_literal(_attr_value(a))}" for k, a in sorted(node["attrs"].items())]
        outs = [f"v{o}" for o in node["outputs"]]
        scope = self.origin(node)
        call = f"ops.{op}({', '.join(args)})"
        if len(outs) == 1:
            value = values[node["outputs"][0]]
            return [f"{indent}{outs[0]} = ops.cast({call}, {_literal(value['dtype'])})  # -> {_type_str(value)}{scope}"]
        lines = [f"{indent}{', '.join(outs)} = {call}{scope and '  #' + scope}"]
        for o in node["outputs"]:
            lines.append(f"{indent}v{o} = ops.cast(v{o}, {_literal(values[o]['dtype'])})")
        return lines


def module_parts(graph: Dict[str, Any], framework: str) -> Dict[str, str]:
    """The pieces of the generated module, as a template_path template receives them: `header`
    (comment lines), `imports`, `signature` (``def forward(inputs, constants):``), `docstring`
    (without indentation), `body` (forward's statements, indented four spaces), and `framework`,
    `display`, `ops_module` (the emitter's op module's name). Every piece is generated: names
    from the model appear in comments only."""
    _, op_module, display = FRAMEWORKS[framework]
    return {
        "header": f"# Generated by ingot's {display} backend from the optimized graph. Do not edit: it is\n"
                  "# regenerated on every compile. Identifiers are generated; names appear in comments only.",
        "imports": f"from ingot.emitters import {op_module} as ops",
        "signature": "def forward(inputs, constants):",
        "docstring": '"""Runs the graph: `inputs` and `constants` in the order listed below; returns the outputs."""',
        "body": "\n".join(_GraphWriter(graph, framework).body(graph, "    ", inputs=True)),
        "framework": framework,
        "display": display,
        "ops_module": op_module,
    }


def emit_source(graph: Dict[str, Any], framework: str, template: Any = None) -> str:
    """Readable Python source of ``forward(inputs, constants)`` for a graph JSON dict; with a
    template (load_template), the template rendered with module_parts. The default template
    (templates/module.py.jinja) renders exactly the source this writes without one."""
    parts = module_parts(graph, framework)
    if template is not None:
        return render_template(template, parts)
    return "\n".join([parts["header"], parts["imports"], "", "", parts["signature"], "    " + parts["docstring"],
                      parts["body"]]) + "\n"


DEFAULT_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", "module.py.jinja")


def load_template(path: Any) -> Any:
    """The Jinja2 template at `path` (compile's template_path), parsed now so that a missing file or
    a syntax error is reported when compiling: an IngotError naming the file (and the line)."""
    from .._ingot import IngotError

    try:
        path = os.fspath(path)
    except TypeError:
        raise TypeError(f"compile(): template_path must be a path, got {type(path).__name__}") from None
    try:
        import jinja2
    except ImportError as e:
        raise IngotError("template_path needs Jinja2, which is not installed (pip install jinja2)") from e
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise IngotError(f"template_path: cannot read '{path}': {e.strerror or e}") from e
    # StrictUndefined: a misspelt piece ({{ bdy }}) is an error, not an empty string.
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    try:
        template = env.from_string(text)
    except jinja2.TemplateSyntaxError as e:
        raise IngotError(f"template_path: '{path}' line {e.lineno}: {e.message}") from e
    template.ingot_path = path
    return template


def render_template(template: Any, parts: Dict[str, str]) -> str:
    from .._ingot import IngotError
    import jinja2

    path = getattr(template, "ingot_path", "the template")
    try:
        source = template.render(**parts)
    except jinja2.TemplateError as e:
        raise IngotError(f"template_path: rendering '{path}' failed: {e}") from e
    if not source.endswith("\n"):
        source += "\n"
    return source


def has_python_branching(graph: Dict[str, Any]) -> bool:
    """Whether the Python-style source of `graph` branches on array values (an if or a while,
    at any depth): a tracing compiler without data-dependent control flow (mx.compile) cannot
    run it."""
    return any(node["op"] in ("if", "while") or any(has_python_branching(s) for s in node.get("subgraphs") or ())
               for node in graph["nodes"])


def _import_framework(framework: str):
    module, op_module, display = FRAMEWORKS[framework]
    try:
        importlib.import_module(module)
    except ImportError as e:
        from .._ingot import IngotError

        raise IngotError(
            f"The {display} backend needs '{module}', which is not installed (pip install {module}); "
            "ml.CpuBackend() and ml.ReferenceBackend() need no framework"
        ) from e
    return importlib.import_module(f"{__name__}.{op_module}")


class Runner:
    """The generated function bound to its constants: ``runner(arrays) -> outputs`` (NumPy)."""

    def __init__(self, source: str, ops_module, constants: List[Any], forward: Callable):
        self.source = source
        self.ops = ops_module
        self._constants = constants
        self._forward = forward
        self.jitted = False

    def __call__(self, inputs: Sequence[Any]) -> List[Any]:
        with self.ops.scope():
            args = [self.ops.from_numpy(x) for x in inputs]
            constants = [self.ops.from_numpy(c) for c in self._constants]
            return [self.ops.to_numpy(y) for y in self._forward(args, constants)]

    def vjp(self, inputs: Sequence[Any], cotangents: Sequence[Optional[Any]], wrt: Sequence[bool]):
        """Outputs and the gradients of sum(output * cotangent) for each input flagged in `wrt`."""
        with self.ops.scope():
            outs, grads = self.ops.vjp(self._forward, [self.ops.from_numpy(x) for x in inputs], self._constants,
                                       [None if c is None else self.ops.from_numpy(c) for c in cotangents], wrt)
            return [self.ops.to_numpy(y) for y in outs], [None if g is None else self.ops.to_numpy(g) for g in grads]


def transformed(source: str, transformers: Sequence[Callable[[str], str]]) -> str:
    """`source` through each code transformer in turn; each must return the new source as a str."""
    for i, fn in enumerate(transformers):
        source = fn(source)
        if not isinstance(source, str):
            raise TypeError(f"code_transformers[{i}] returned {type(source).__name__}, not the source as a str")
        if not source:
            raise ValueError(f"code_transformers[{i}] returned empty source")
    return source


def gradient_file_path(file_path: str) -> str:
    """Where the backward graph's source goes beside the model's: 'mlp.py' -> 'mlp_grad.py'."""
    root, ext = os.path.splitext(file_path)
    return f"{root}_grad{ext or '.py'}"


class Emitter:
    """Lowers a graph JSON dump to a Runner of one framework (used by ingot's PythonBackend).

    One compile lowers the model's graph (`runner`) and, for evaluate(..., output_gradients=...)
    with gradients="ingot", the joint forward + backward graph (`gradient_runner`; its source is
    written beside `file_path` as <name>_grad.py)."""

    def __init__(self, framework: str, file_path: Optional[str] = None, jit: bool = False,
                 jit_options: Optional[Dict[str, Any]] = None):
        self.framework = framework
        self.file_path = file_path
        # jit: the generated function runs under the framework's compiler (jax.jit, torch.compile)
        # with `jit_options` passed through; NumPy has none (ignored).
        self.jit = jit
        self.jit_options = dict(jit_options or {})
        # code_transformers: functions (source: str) -> str applied in order to the generated module
        # before it is written and run (compile(..., code_transformers=[...])).
        self.code_transformers: List[Callable[[str], str]] = []
        # template: a Jinja2 template of the generated module (compile(..., template_path=...)), or
        # None for the default; the code transformers then apply to what it renders.
        self.template: Any = None
        self.runner: Optional[Runner] = None
        self.gradient_runner: Optional[Runner] = None
        self._lowering_gradients = False

    @contextlib.contextmanager
    def lowering_gradients(self):
        """Marks what ingot lowers meanwhile as the joint forward + backward graph (the C++ side
        lowers it inside evaluate(..., output_gradients=...), on first use per set of seeds)."""
        self._lowering_gradients = True
        try:
            yield
        finally:
            self._lowering_gradients = False

    def lower(self, graph_json: str) -> Runner:
        ops = _import_framework(self.framework)
        graph = json.loads(graph_json)
        joint = self._lowering_gradients
        source = transformed(emit_source(graph, self.framework, self.template), self.code_transformers)
        path = self.file_path and (gradient_file_path(self.file_path) if joint else self.file_path)
        if path:  # atomically: a reader never sees half a module
            write_atomically(path, source.encode("utf-8"))
        namespace: Dict[str, Any] = {}
        where = path or f"<ingot {self.framework} backend>"
        try:
            code = compile(source, where, "exec")
        except SyntaxError as e:
            if self.template is None and not self.code_transformers:
                raise
            from .._ingot import IngotError

            raise IngotError(f"the generated module ({'template_path' if self.template is not None else 'code_transformers'}"
                             f" output) is not valid Python: line {e.lineno}: {e.msg}") from e
        exec(code, namespace)
        constants = [ops.constant(v["constant"]) for _, v in constant_slots(graph)]
        forward = namespace.get("forward")
        if not callable(forward):
            from .._ingot import IngotError

            raise IngotError("the generated module defines no forward(inputs, constants) (check template_path's template: "
                             "it must keep {{ signature }} and {{ body }})")
        # A compiler that traces without values (mx.compile) cannot run Python branching on an
        # array's value: such a graph runs eagerly there.
        if self.jit and hasattr(ops, "jit") and (getattr(ops, "JIT_BRANCHES_ON_VALUES", True) or not has_python_branching(graph)):
            forward = ops.jit(forward, self.jit_options)
        runner = Runner(source, ops, constants, forward)
        runner.jitted = forward is not namespace["forward"]  # under the framework's compiler
        if joint:
            self.gradient_runner = runner
        else:
            self.runner = runner
        return runner
