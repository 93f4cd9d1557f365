"""``ml.compile(model, backend, backend_map={key: backend})``: one model over several backends.

Blocks marked ``block.set_attribute("backend", key)`` compile with ``backend_map[key]``, the rest
with the default backend. The whole model is flattened and its shapes and types inferred once (so
names, shapes, dtypes and parameters are those of a single-backend compile); the inferred graph is
then cut, in topological order, into segments of consecutive nodes with the same backend. Each
segment is compiled alone by its backend: a value it reads from an earlier segment becomes one of
its inputs, a value a later segment reads (or a model output) one of its outputs. ``evaluate``
runs the segments in order; with ``output_gradients`` it runs their vector-Jacobian products in
reverse order, each segment's input gradients seeding the outputs of the segments that produced
them (the chain rule across backends).

Arrays cross between segments as NumPy arrays viewing the memory the producing backend computed
them in, and each backend reads them in place where it can (README "backend_map" says where).
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import _ingot
from ._backends import _FrameworkBackend
from ._compile import PhysicalModel, _native_backend
from ._ingot import IngotError

# Options that write one file per compile or shape one framework's generated module: with several
# backends compiling separate segments they would have no single meaning, so they are refused.
UNSUPPORTED_OPTIONS = ("file_path", "dump_graph", "dump_after_each_pass", "profile_output", "visualize", "viz_options",
                       "save_intermediates", "intermediate_dir", "intermediate_format", "template_path",
                       "code_transformers", "jit_options", "jax_options", "torch_options", "mlx_options")

_BACKEND_EXAMPLES = "ml.CpuBackend(), ml.ReferenceBackend(), ml.NumpyBackend(), ml.TorchBackend(), ml.JaxBackend()"


def _is_backend(value: Any) -> bool:
    return isinstance(value, (_FrameworkBackend, _ingot.Backend))


def _check_backend_map(default: Any, backend_map: Any) -> Dict[str, Any]:
    if not _is_backend(default):
        raise TypeError(f"compile() needs a default backend besides backend_map ({_BACKEND_EXAMPLES}), "
                        f"got {type(default).__name__}")
    if not isinstance(backend_map, Mapping):
        raise TypeError(f"compile(): backend_map must be a dict {{key: backend}}, got {type(backend_map).__name__}")
    for key, value in backend_map.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"compile(): backend_map keys are the non-empty strings blocks are marked with "
                            f"(set_attribute('backend', key)), got {key!r}")
        if not _is_backend(value):
            raise TypeError(f"compile(): backend_map[{key!r}] is {type(value).__name__}, not a backend ({_BACKEND_EXAMPLES})")
    return dict(backend_map)


def _segment_options(options: Dict[str, Any], backend: Any, any_cpu: bool = True) -> Dict[str, Any]:
    """The C++ options for one segment: cpu_options and optimize_for='size' tune the CPU backend's
    generated library, so only CpuBackend segments get them (with no CpuBackend segment at all,
    every segment does, and refuses them as a single-backend compile would)."""
    out = dict(options)
    if any_cpu and backend.name != "cpu":
        out.pop("cpu_options", None)
        if out.get("optimize_for") == "size":
            out.pop("optimize_for")
    return out


def _live_nodes(graph: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The nodes some output needs (the inferred graph still holds the blocks whose wires nothing
    reads; dead-code elimination runs later, inside each compile)."""
    producer = {n["id"]: n for n in graph["nodes"]}
    live_values = {o["value"] for o in graph["outputs"]}
    live = set()
    for node in reversed(graph["nodes"]):
        if any(v in live_values for v in node["outputs"]):
            live.add(node["id"])
            live_values.update(node["inputs"])
    return [producer[i] for i in sorted(live)]


class Segment:
    """Consecutive nodes of the model compiled together by one backend."""

    def __init__(self, key: str, backend: Any, model: PhysicalModel, boundary_inputs: List[str], outputs: List[str]):
        self.key = key  # the backend_map key, "" for the default backend
        self.backend = backend
        self.model = model  # the segment's own PhysicalModel
        self.boundary_inputs = boundary_inputs  # values computed by earlier segments, by wire name
        self.outputs = outputs  # model outputs and values later segments read, by wire name
        self._boundary = frozenset(boundary_inputs)
        self._params = model.parameter_names()
        self._inputs = model.input_names()

    def params_from(self, params: Mapping[str, Any]) -> Dict[str, Any]:
        return {n: params[n] for n in self._params if n in params}

    def inputs_from(self, wires: Mapping[str, Any]) -> Dict[str, Any]:
        return {n: wires[n] for n in self._inputs if n in wires}

    def is_boundary(self, name: str) -> bool:
        return name in self._boundary

    def __repr__(self) -> str:
        return (f"<ingot.Segment backend={self.backend.name} key={self.key or '(default)'!r} "
                f"inputs_from_earlier={self.boundary_inputs} outputs={self.outputs}>")


def _segment_graph(root: Dict[str, Any], nodes: List[Dict[str, Any]], boundary: Dict[int, str],
                   outputs: List[Tuple[str, int]]) -> str:
    """The graph JSON of one segment: its nodes, the leaves they read (same names and kinds), the
    values of earlier segments they read as inputs named by `boundary` (differentiable when of a
    float type, so that their gradients come back), and `outputs`."""
    values = root["values"]
    produced = {v for n in nodes for v in n["outputs"]}
    read = {v for n in nodes for v in n["inputs"]}
    keep = [v for v in values if (v["producer"] < 0 and v["id"] in read) or v["id"] in boundary or v["id"] in produced]
    new_id = {v["id"]: i for i, v in enumerate(keep)}
    new_node = {n["id"]: i for i, n in enumerate(nodes)}
    seg_values = []
    for v in keep:
        old = v["id"]
        v = dict(v, id=new_id[old])
        if old in boundary:  # computed by an earlier segment: an input here
            v.update(name=boundary[old], kind="input", producer=-1,
                     producer_output=0, init="", weak_type=False,
                     differentiable=v["dtype"].startswith(("float", "bfloat")))
        elif v["producer"] >= 0:
            v["producer"] = new_node[v["producer"]]
        seg_values.append(v)
    seg_nodes = []
    for n in nodes:
        n = {k: val for k, val in n.items() if k != "backend"}
        n.update(id=new_node[n["id"]], inputs=[new_id[v] for v in n["inputs"]], outputs=[new_id[v] for v in n["outputs"]])
        seg_nodes.append(n)
    graph = {"format": root["format"], "version": root["version"], "values": seg_values, "nodes": seg_nodes,
             "outputs": [{"name": name, "value": new_id[v]} for name, v in outputs]}
    return json.dumps(graph)


def compile_with_backend_map(model: "_ingot.Model", backend: Any, backend_map: Any,
                             options: Dict[str, Any]) -> PhysicalModel:
    """compile(model, backend, backend_map=..., **options) (see the module docstring)."""
    from ._compile import _compile_model

    backend_map = _check_backend_map(backend, backend_map)
    given = [k for k in UNSUPPORTED_OPTIONS if options.get(k) not in (None, False)]
    if given:
        raise TypeError(f"compile(): {', '.join(given)} cannot be combined with backend_map (each backend compiles its "
                        f"own part of the model); options that cannot: {', '.join(UNSUPPORTED_OPTIONS)}")
    options = {k: v for k, v in options.items() if k not in UNSUPPORTED_OPTIONS}
    root = json.loads(_ingot._inferred_graph_json(model, options))
    nodes = _live_nodes(root)
    marked = sorted({n.get("backend", "") for n in nodes} - {""})
    missing = [k for k in marked if k not in backend_map]
    if missing:
        raise IngotError(f"The model marks blocks with backend {', '.join(repr(k) for k in missing)} but backend_map has "
                         f"no entry for {'it' if len(missing) == 1 else 'them'} (backend_map keys: "
                         f"{', '.join(repr(k) for k in backend_map) or 'none'}; keys the model uses: "
                         f"{', '.join(repr(k) for k in marked)})")
    if not marked:  # nothing marked: one backend, as without backend_map
        return _compile_model(model, backend, options)

    runs: List[Tuple[str, List[Dict[str, Any]]]] = []  # (key, nodes), in topological order
    for node in nodes:
        key = node.get("backend", "")
        if runs and runs[-1][0] == key:
            runs[-1][1].append(node)
        else:
            runs.append((key, [node]))
    segment_of = {n["id"]: i for i, (_, run) in enumerate(runs) for n in run}
    values = root["values"]
    model_outputs = [(o["name"], o["value"]) for o in root["outputs"]]

    # Values read across a segment boundary, each under one wire name: the model output's name
    # when it is one, else its own name (made unique among the terminals).
    crossing = sorted({v for i, (_, run) in enumerate(runs) for n in run for v in n["inputs"]
                       if values[v]["producer"] >= 0 and segment_of[values[v]["producer"]] != i})
    taken = {v["name"] for v in values if v["producer"] < 0} | {name for name, _ in model_outputs}
    wire: Dict[int, str] = {}
    for name, v in model_outputs:
        wire.setdefault(v, name)
    for v in crossing:
        if v not in wire:
            name = values[v]["name"] or f"value_{v}"
            name = name if name not in taken else f"{name}#{v}"
            taken.add(name)
            wire[v] = name

    segments = []
    any_cpu = any((backend_map[key] if key else backend).name == "cpu" for key, _ in runs)
    for i, (key, run) in enumerate(runs):
        produced = {v for n in run for v in n["outputs"]}
        read = {v for n in run for v in n["inputs"]}
        outs = [(name, v) for name, v in model_outputs if v in produced]
        outs += [(wire[v], v) for v in crossing if v in produced and wire[v] not in {n for n, _ in outs}]
        boundary = {v: wire[v] for v in crossing if v in read and v not in produced}
        seg_backend = backend_map[key] if key else backend
        seg_options = _segment_options(options, seg_backend, any_cpu)
        native, emitter = _native_backend(seg_backend, seg_options, {})
        pm = _ingot._compile_graph(_segment_graph(root, run, boundary, outs), native, seg_options)
        segments.append(Segment(key, seg_backend, PhysicalModel(pm, seg_backend, emitter),
                                [boundary[v] for v in sorted(boundary)], [n for n, _ in outs]))

    # The whole model, compiled without lowering on the reference backend: its names, shapes,
    # dtypes, parameters and randomize_params are exactly those of a single-backend compile.
    meta_options = dict(_segment_options(options, _ingot.ReferenceBackend()), jit=False)
    meta = _ingot._compile_graph(json.dumps(root), _ingot.ReferenceBackend(), meta_options)
    leaf_outputs = {name: values[v]["name"] for name, v in model_outputs if values[v]["producer"] < 0}
    known = {kind: {v["name"] for v in values if v["producer"] < 0 and v["kind"] == kind} for kind in ("input", "parameter")}
    return MixedPhysicalModel(meta, backend, backend_map, segments, [name for name, _ in model_outputs], leaf_outputs, known)


def _add(a: Optional[Any], b: Any) -> Any:
    return b if a is None else np.asarray(a) + np.asarray(b)


class MixedPhysicalModel(PhysicalModel):
    """A model compiled with backend_map: segments on different backends run in turn.

    Names, shapes, dtypes, parameters (randomize_params, save_params, load_params) and
    gradient_names are those of the whole model; `segments` lists the parts and their backends.
    """

    def __init__(self, meta: "_ingot.PhysicalModel", backend: Any, backend_map: Dict[str, Any], segments: List[Segment],
                 outputs: List[str], leaf_outputs: Dict[str, str], known: Dict[str, set]):
        super().__init__(meta, backend)
        self._backend_map = backend_map
        self._segments = segments
        self._outputs = outputs
        self._leaf_outputs = leaf_outputs  # model outputs that are an input or a parameter, as given
        self._known = known  # the model's input and parameter names (those optimized away included)

    @property
    def segments(self) -> List[Segment]:
        """The parts of the model in the order they run, each with its backend and PhysicalModel."""
        return list(self._segments)

    @property
    def backend_map(self) -> Dict[str, Any]:
        return dict(self._backend_map)

    def _check_names(self, params: Mapping[str, Any], inputs: Mapping[str, Any]) -> None:
        for what, given, kind in (("parameter", params, "parameter"), ("input", inputs, "input")):
            for name in given:
                if name not in self._known[kind]:
                    listed = ", ".join(sorted(self._known[kind])) or "none"
                    hint = "; it is a parameter: pass it in params" if kind == "input" and name in self._known["parameter"] else ""
                    raise IngotError(f"Unknown {what} '{name}' ({what}s: {listed}{hint})")

    def _forward(self, params: Dict[str, Any], inputs: Dict[str, Any]) -> Dict[str, Any]:
        wires: Dict[str, Any] = dict(inputs)  # user inputs, then every segment's outputs by wire name
        for seg in self._segments:
            wires.update(seg.model.evaluate(seg.params_from(params), seg.inputs_from(wires)))
        return wires

    def _outputs_of(self, wires: Dict[str, Any], params: Dict[str, Any]) -> Dict[str, Any]:
        out = {}
        for name in self._outputs:
            leaf = self._leaf_outputs.get(name)
            out[name] = wires[name] if leaf is None else (params[leaf] if leaf in params else wires[leaf])
        return out

    def evaluate(self, params: Mapping[str, Any], inputs: Optional[Mapping[str, Any]] = None,
                 output_gradients: Optional[Mapping[str, Any]] = None):
        """As PhysicalModel.evaluate: {output: array}, or (outputs, gradients) with output_gradients."""
        params = dict(params)
        inputs = dict(inputs or {})
        self._check_names(params, inputs)
        wires = self._forward(params, inputs)
        outputs = self._outputs_of(wires, params)
        if output_gradients is None:
            return outputs
        return outputs, self._gradients(params, wires, dict(output_gradients))

    def _gradients(self, params: Dict[str, Any], wires: Dict[str, Any], seeds: Dict[str, Any]) -> Dict[str, Any]:
        for name in seeds:
            if name not in self._outputs:
                raise IngotError(f"output_gradients: '{name}' is not an output of the model (outputs: "
                                 f"{', '.join(self._outputs) or 'none'})")
        wanted = self.gradient_names()
        grads: Dict[str, Any] = {}
        cotangents: Dict[str, Any] = {}  # by wire name: seeds, then what later segments send back
        for name, c in seeds.items():
            leaf = self._leaf_outputs.get(name)
            if leaf is not None:  # an output that is an input or parameter: its cotangent is its gradient
                if leaf in wanted:
                    grads[leaf] = _add(grads.get(leaf), c)
                continue
            cotangents[name] = c
        for seg in reversed(self._segments):
            seg_seeds = {n: cotangents[n] for n in seg.outputs if n in cotangents}
            if not seg_seeds:  # nothing downstream depends on it
                continue
            _, seg_grads = seg.model.evaluate(seg.params_from(params), seg.inputs_from(wires), output_gradients=seg_seeds)
            for name, g in seg_grads.items():
                if seg.is_boundary(name):
                    cotangents[name] = _add(cotangents.get(name), g)
                else:
                    grads[name] = _add(grads.get(name), g)
        # A terminal no seeded output depends on gets zeros, as from a single-backend model.
        result = {}
        for name in wanted:
            if name in grads:
                result[name] = grads[name]
            else:
                like = np.asarray(params[name] if name in params else wires[name])
                result[name] = np.zeros(like.shape, like.dtype)
        return result

    def __repr__(self) -> str:
        parts = ", ".join(f"{s.backend.name}" for s in self._segments)
        return f"<ingot.PhysicalModel backend={self._backend.name} backend_map segments=[{parts}] outputs={self.output_names()}>"
