"""``ml.compile`` and the PhysicalModel it returns."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import _ingot, _intermediates, _visualize
from ._dtypes import DType
from ._backends import _FrameworkBackend
from ._function_compile import _FN_OPTIONS, compile_function
from ._ingot import IngotError

ArrayMap = Dict[str, np.ndarray]


class PhysicalModel:
    """A compiled model: a flat, typed, shape-checked graph plus the backend's executable.

    Arrays go in and out as NumPy arrays (anything with ``__dlpack__`` or the buffer protocol is
    accepted too) without copies where the layout allows: a C-contiguous array of the expected
    dtype is read in place, and outputs view the memory ingot computed them in.
    """

    def __init__(self, pm: "_ingot.PhysicalModel", backend: Any, emitter: Any = None):
        self._pm = pm
        self._backend = backend
        self._emitter = emitter
        self._intermediates: Optional[Dict[str, Any]] = None  # save_intermediates: where and how

    @property
    def backend(self) -> Any:
        """The backend this model was compiled for."""
        return self._backend

    def randomize_params(self, seed: int = 0) -> ArrayMap:
        """Fresh parameters from each parameter's initializer, deterministic for a seed."""
        return self._pm.randomize_params(seed)

    def evaluate(self, params: Mapping[str, Any], inputs: Optional[Mapping[str, Any]] = None,
                 output_gradients: Optional[Mapping[str, Any]] = None) -> Union[ArrayMap, Tuple[ArrayMap, ArrayMap]]:
        """Runs the model: returns {output name: array}.

        Names, dtypes and shapes are checked first; a mismatch raises IngotError naming the
        terminal. With `output_gradients` ({output name: cotangent}), returns (outputs, grads)
        where grads holds d(sum(output * cotangent))/d(x) for every name of gradient_names()
        (CpuBackend, ReferenceBackend and NumpyBackend: ingot's backward graph; TorchBackend and
        JaxBackend: the framework's autodiff, for the parameters, or ingot's backward graph with
        gradients='ingot').
        """
        params = dict(params)
        inputs = dict(inputs or {})
        if self._intermediates is not None:
            if output_gradients is None:
                return _intermediates.take(self._pm.evaluate(params, inputs), self._intermediates)
            outputs, grads = self._evaluate_with_gradients(params, inputs, output_gradients)
            return _intermediates.take(outputs, self._intermediates), grads
        if output_gradients is None:
            return self._pm.evaluate(params, inputs)
        return self._evaluate_with_gradients(params, inputs, output_gradients)

    def _evaluate_with_gradients(self, params: Dict[str, Any], inputs: Dict[str, Any],
                                 output_gradients: Mapping[str, Any]) -> Tuple[ArrayMap, ArrayMap]:
        if isinstance(self._backend, _FrameworkBackend):
            if self._backend.gradients == "framework":
                return self._framework_gradients(params, inputs, dict(output_gradients))
            with self._emitter.lowering_gradients():  # the joint graph, generated as this framework's source
                return self._pm.evaluate_with_gradients(params, inputs, dict(output_gradients))
        return self._pm.evaluate_with_gradients(params, inputs, dict(output_gradients))

    def gradient_names(self) -> List[str]:
        """What evaluate(..., output_gradients=...) returns gradients for: differentiable
        parameters and inputs named in `trainable_keys`."""
        return self._pm.gradient_names()

    def _framework_gradients(self, params: Dict[str, Any], inputs: Dict[str, Any],
                             cotangents: Dict[str, Any]) -> Tuple[ArrayMap, ArrayMap]:
        graph = json.loads(self._pm.graph_json())
        outputs = [o["name"] for o in graph["outputs"]]
        for name in cotangents:
            if name not in outputs:
                raise IngotError(f"Unknown output '{name}' in output_gradients (outputs: {', '.join(outputs) or 'none'})")
        # Check names, dtypes and shapes exactly as evaluate does.
        self._pm.evaluate(params, inputs)
        if self._emitter.runner is None:
            self._emitter.lower(self._pm.graph_json())
        leaves = [v for v in graph["values"] if v["producer"] < 0 and v["kind"] != "constant"]
        arrays = [params[v["name"]] if v["kind"] == "parameter" else inputs[v["name"]] for v in leaves]
        # What gradient_names() lists: differentiable leaves (parameters, trainable inputs) of a float type.
        wrt = [v["differentiable"] and v["dtype"].startswith(("float", "bfloat")) for v in leaves]
        cts = [None if name not in cotangents else np.asarray(cotangents[name]) for name in outputs]
        outs, grads = self._emitter.runner.vjp(arrays, cts, wrt)
        return ({name: out for name, out in zip(outputs, outs)},
                {v["name"]: g for v, g in zip(leaves, grads) if g is not None})

    def get_shapes(self) -> Dict[str, List[Union[int, str]]]:
        """Shape of every terminal after inference; unknown sizes stay symbols ('N')."""
        return self._pm.get_shapes()

    def get_types(self) -> Dict[str, "DType"]:
        """The dtype of every terminal (ml.float32, ...; each equal to its name, 'float32')."""
        return self._pm.get_types()

    def input_names(self) -> List[str]:
        """The run-time data inputs."""
        return self._pm.input_names()

    def parameter_names(self) -> List[str]:
        """The parameters (what randomize_params returns)."""
        return self._pm.parameter_names()

    def constant_names(self) -> List[str]:
        """The constants fixed at compile time."""
        return self._pm.constant_names()

    def output_names(self) -> List[str]:
        """The outputs evaluate returns."""
        return [n for n in self._pm.output_names() if not n.startswith(_intermediates.PREFIX)]

    def names(self) -> Dict[str, List[str]]:
        """{'inputs', 'parameters', 'constants', 'outputs'}: the four name lists."""
        return {"inputs": self.input_names(), "parameters": self.parameter_names(),
                "constants": self.constant_names(), "outputs": self.output_names()}

    def parameter_count(self) -> int:
        """Total elements of the parameters with static shapes."""
        return self._pm.parameter_count()

    def summary(self) -> str:
        """Inputs, parameters, outputs with their types and shapes, as text."""
        return self._pm.summary()

    def graph_json(self) -> str:
        """The optimized graph as JSON (the format of the `dump_graph` option)."""
        return self._pm.graph_json()

    def graph_text(self) -> str:
        """The optimized graph as readable text."""
        return self._pm.graph_text()

    @property
    def source(self) -> Optional[str]:
        """The generated Python source (framework backends), once lowered; None otherwise."""
        if self._emitter is None or self._emitter.runner is None:
            return None
        return self._emitter.runner.source

    @property
    def gradient_source(self) -> Optional[str]:
        """The generated source of ingot's joint forward + backward graph (framework backends with
        gradients='ingot'), once a gradient evaluation lowered it; None otherwise."""
        if self._emitter is None or self._emitter.gradient_runner is None:
            return None
        return self._emitter.gradient_runner.source

    def save_params(self, path: Union[str, "os.PathLike[str]"], params: Mapping[str, Any]) -> None:
        """Writes the parameters as a safetensors file (atomically)."""
        self._pm.save_params(os.fspath(path), dict(params))

    def load_params(self, path: Union[str, "os.PathLike[str]"]) -> ArrayMap:
        """Reads parameters saved with save_params; names, dtypes and shapes are checked."""
        return self._pm.load_params(os.fspath(path))

    def __repr__(self) -> str:
        return f"<ingot.PhysicalModel backend={self._backend.name} outputs={self.output_names()}>"


def compile(target: Any = None, backend: Any = None, **options: Any) -> Any:  # noqa: A001
    """Compiles a logical model for a backend, or a Python function over ml.arrays.

    **Models**: ``ml.compile(model, backend, **options)`` returns a PhysicalModel. Every option
    of the C++ ``CompileOptions`` is a keyword: shapes ({name: [None, 3, 'N']}: None is unknown,
    strings are symbols), types, constant_keys, data_keys, trainable_keys, discard_keys,
    outputs (wire names kept as extra outputs: the compiled outputs are the exposed wires, or the
    last block's output when none is exposed; other dangling wires are eliminated), static_shapes, inference, jit, file_path, dump_graph, dump_format, verbose,
    optimization_level, optimizations ({pass: bool} or 'cse=off,layout'), custom_passes
    ([(name, after, fn)] with fn(graph_dict) -> graph_dict or None), dump_after_each_pass,
    layout_target, memory_planning, max_memory_gb, mixed_precision, gradient_checkpointing, checkpoint_segments,
    data_parallel, gradient_bucket_bytes, gradient_overlap (training steps: see ml.compile_train_step);
    hints ({"input_batch_size_range": (lo, hi), "inference_priority": "latency" | "throughput"}),
    target_hardware ("cpu"), cpu_options ({"num_threads": n, "vectorize": bool}: CpuBackend only),
    optimize_for ("default" | "latency" | "throughput" | "memory" | "size"); README "Compile options"
    says which decision each makes;
    visualize=True with viz_options={"format": "svg" | "png" | "dot", "show_shapes",
    "show_types", "show_memory", "output_path"} (the optimized graph drawn by Graphviz's ``dot``;
    "dot" writes the DOT text without it); save_intermediates=True with intermediate_dir and
    intermediate_format ("npy" or "safetensors"): every intermediate tensor of each evaluate
    written to intermediate_dir/evaluate_NNNN/, named by its terminal. For JaxBackend and
    TorchBackend, jit=True (the default) runs the generated function under jax.jit /
    torch.compile, jit=False eagerly; jit_options (or jax_options / torch_options) pass their
    keywords through (jax: static_argnums, donate_argnums, ...; torch: backend, mode, ...).
    backend_map ({key: backend}): the blocks marked ``block.set_attribute("backend", key)`` compile
    with that backend, the rest with `backend`, into one model (ingot/_backend_map.py; README
    "backend_map").
    template_path (the emitters): a Jinja2 template of the generated module, rendered with its
    pieces (header, imports, signature, docstring, body, framework, display, ops_module; the
    default is ingot/emitters/templates/module.py.jinja, which renders the usual module).
    ``ml.compile_option_names()`` lists them all.
    An unknown keyword raises TypeError listing the valid ones; a bad value raises IngotError.

    **Functions** (MLX-style): ``ml.compile(fn, shapeless=False, inputs=None, outputs=None)``
    returns a CompiledFunction. Its first call for each signature traces fn with placeholder
    ml.arrays, optimizes the trace and builds it (the CPU backend unless
    ml.set_compile_config(backend=...) says otherwise); later calls reuse it. ``shapeless``
    compiles once for all shapes of the same ranks. ``inputs`` / ``outputs`` are state trees
    (lists and dicts of ml.arrays, and ml.random.state) the function reads or rebinds without
    taking or returning them, so a whole training step compiles as one function. Compiling the
    same function object again shares its cache. Usable as a decorator, with or without options:
    ``@ml.compile`` or ``@ml.compile(shapeless=True)``.
    """
    if target is None:  # @ml.compile(shapeless=True)
        if backend is not None:
            raise TypeError("compile() needs a model or a function first")
        return lambda fn: compile(fn, **options)
    if isinstance(target, _ingot.Model):
        return _compile_model(target, backend, options)
    if callable(target):
        if backend is not None:
            raise TypeError("compile(fn) takes no backend: compiled functions build with the backend of "
                            "ml.set_compile_config(backend=...) (ml.CpuBackend() by default)")
        if "backend_map" in options:
            raise TypeError("compile(fn) takes no backend_map: it maps the blocks of a logical model (ml.Model) marked with "
                            "set_attribute('backend', key) to backends; a compiled function builds with one backend")
        unknown = sorted(set(options) - set(_FN_OPTIONS))
        if unknown:
            raise TypeError(f"compile(fn) got an unknown option '{unknown[0]}' (valid options for functions: "
                            f"{', '.join(_FN_OPTIONS)})")
        return compile_function(target, **options)
    raise TypeError(f"compile() takes a logical model (ml.Model) or a function over ml.arrays, got "
                    f"{type(target).__name__}")


# Options ingot's Python layer handles itself (the rest are C++ CompileOptions).
_PY_MODEL_OPTIONS = ("visualize", "viz_options", "save_intermediates", "intermediate_dir", "intermediate_format",
                     "jit_options", "jax_options", "torch_options", "mlx_options", "template_path", "backend_map")


def _framework_jit_options(backend: Any, options: Dict[str, Any]) -> Dict[str, Any]:
    """jit_options / jax_options / torch_options, taken off `options` and checked against the
    backend's framework: its compiler's keyword arguments (emitters.JIT_OPTIONS)."""
    from .emitters import JIT_OPTIONS

    keys = ("jit_options", "jax_options", "torch_options", "mlx_options")
    given = {k: options.pop(k) for k in keys if options.get(k) is not None}
    for k in keys:
        options.pop(k, None)
    framework = backend.framework if isinstance(backend, _FrameworkBackend) else None
    merged: Dict[str, Any] = {}
    for key, value in given.items():
        if not isinstance(value, Mapping):
            raise TypeError(f"compile(): {key} must be a dict, got {type(value).__name__}")
        if key != "jit_options" and key != f"{framework}_options":
            names = {"jax_options": "JaxBackend", "torch_options": "TorchBackend", "mlx_options": "MlxBackend"}
            raise TypeError(f"compile(): {key} is for {names[key]}, not {type(backend).__name__}")
        if framework is None:
            raise TypeError(f"compile(): {key} is for the JAX, PyTorch and MLX backends (jax.jit, torch.compile, mx.compile), "
                            f"not {type(backend).__name__}")
        valid = JIT_OPTIONS[framework]
        for name in value:
            if name not in valid:
                raise TypeError(f"compile(): {key} has an unknown key '{name}' (valid for {framework}: "
                                f"{', '.join(valid) or 'none: NumPy has no compiler'})")
        merged.update(value)
    return merged


def compile_option_names() -> List[str]:
    """Every keyword ``ml.compile(model, backend, ...)`` accepts besides the backend."""
    return list(_ingot.compile_option_names()) + list(_PY_MODEL_OPTIONS)


def _compile_model(model: "_ingot.Model", backend: Any, options: Dict[str, Any]) -> PhysicalModel:
    valid = compile_option_names()
    for key in options:
        if key not in valid:
            raise TypeError(f"compile() got an unknown option '{key}' (valid options: {', '.join(valid)})")
    options = dict(options)
    if options.get("backend_map") is not None:  # blocks marked set_attribute("backend", key) on other backends
        from ._backend_map import compile_with_backend_map

        return compile_with_backend_map(model, backend, options.pop("backend_map"), options)
    options.pop("backend_map", None)
    jit_options = _framework_jit_options(backend, options)
    template_path = options.pop("template_path", None)
    if template_path is not None and not isinstance(backend, _FrameworkBackend):
        raise TypeError(f"compile(): template_path is for the Python emitters (NumpyBackend, JaxBackend, TorchBackend, "
                        f"MlxBackend), not {type(backend).__name__} (its generated C++ takes code_transformers)")
    visualize = options.pop("visualize", False)
    if not isinstance(visualize, bool):
        raise TypeError(f"compile(): visualize must be True or False, got {visualize!r}")
    viz_options = _visualize.check_options(options.pop("viz_options", None))
    save = options.pop("save_intermediates", False)
    if not isinstance(save, bool):
        raise TypeError(f"compile(): save_intermediates must be True or False, got {save!r}")
    saving = _intermediates.check_options(options.pop("intermediate_dir", None), options.pop("intermediate_format", "npy"))
    if save:
        options["custom_passes"] = list(options.get("custom_passes") or []) + [
            ("save_intermediates", "end", _intermediates.expose_every_value)]
    pm = _compile_model_natively(model, backend, options, jit_options, template_path)
    if save:
        pm._intermediates = saving
    if visualize:
        _visualize.render(pm.graph_json(), viz_options)
    return pm


def _code_transformers(value: Any) -> List[Any]:
    """The code_transformers option as a list of callables (a clear TypeError otherwise)."""
    if value is None:
        return []
    if callable(value) or isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"compile(): code_transformers must be a list of functions (source: str) -> str, "
                        f"got {type(value).__name__}")
    for i, fn in enumerate(value):
        if not callable(fn):
            raise TypeError(f"compile(): code_transformers[{i}] is {type(fn).__name__}, not a function (source: str) -> str")
    return list(value)


def _native_backend(backend: Any, options: Dict[str, Any], jit_options: Dict[str, Any],
                    template_path: Any = None) -> Tuple[Any, Any]:
    """(the C++ backend to compile with, the emitter or None) for a backend object; a framework
    backend's emitter takes jit, jit_options, code_transformers (popped off `options`) and the template."""
    if isinstance(backend, _FrameworkBackend):
        if backend.file_path and options.get("file_path") is None:
            options["file_path"] = os.fspath(backend.file_path)
        emitter = backend._emitter(None)
        # jit (True by default): the generated function runs under jax.jit / torch.compile.
        emitter.jit = bool(options.get("jit", True))
        emitter.jit_options = jit_options
        # code_transformers rewrite the generated module (the C++ side's rewrite the CPU backend's C++).
        emitter.code_transformers = _code_transformers(options.pop("code_transformers", None))
        # template_path: a Jinja2 template of the generated module, read and parsed now.
        from .emitters import load_template

        emitter.template = None if template_path is None else load_template(template_path)
        return _ingot.PythonBackend(backend.framework, emitter), emitter
    if not isinstance(backend, _ingot.Backend):
        raise TypeError(f"compile() needs a backend (ml.CpuBackend(), ml.ReferenceBackend(), ml.NumpyBackend(), ...), "
                        f"got {type(backend).__name__}")
    return backend, None


def _compile_model_natively(model: "_ingot.Model", backend: Any, options: Dict[str, Any],
                            jit_options: Dict[str, Any], template_path: Any = None) -> PhysicalModel:
    for key in ("file_path", "dump_graph"):
        if options.get(key) is not None:
            options[key] = os.fspath(options[key])
    native, emitter = _native_backend(backend, options, jit_options, template_path)
    return PhysicalModel(_ingot.compile(model, native, options), backend, emitter)
