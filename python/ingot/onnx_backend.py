"""ingot as an ONNX backend (``onnx.backend.base.Backend``), so ONNX's own test runner
(``onnx.backend.test.BackendTest``) and tools written against that interface run models on
ingot::

    from ingot.onnx_backend import IngotBackend, IngotCpuBackend
    rep = IngotBackend.prepare(onnx_model)          # the reference interpreter
    outputs = rep.run([x])                          # or {"input": x}
    IngotCpuBackend.run_model(onnx_model, [x])      # the native CPU backend

Values that decide shapes (a Reshape target, Resize's scales, axes) must be known while
importing. When a model feeds them as graph inputs, ``prepare`` defers the import to the first
``run`` and fixes those inputs to the values given there (the integer inputs, and any the
importer names as needed); a later run with other values for them compiles again. Requires the
``onnx`` package (pip install onnx).
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Sequence

import numpy as np
from onnx.backend.base import Backend, BackendRep, namedtupledict

import ingot as ml

__all__ = ["IngotBackend", "IngotCpuBackend", "IngotRep"]

_NEEDED = re.compile(r"\('([^']+)'\) is only known at run time")


class IngotRep(BackendRep):
    """A prepared model: compiled on ingot, run with ``run(inputs)``."""

    def __init__(self, model_bytes: bytes, input_names: Sequence[str], output_names: Sequence[str], backend: Any):
        self._bytes = model_bytes
        self._inputs = list(input_names)
        self._outputs = list(output_names)
        self._backend = backend
        self._compiled: Dict[Any, Any] = {}  # fixed-input key -> (PhysicalModel, names it reads)
        try:
            self._compiled[()] = self._compile({})
        except ml.IngotError as e:
            if "only known at run time" not in str(e):
                raise

    def _compile(self, constants: Dict[str, np.ndarray]):
        pm = ml.compile(ml.onnx.load(self._bytes, constants=constants), self._backend())
        return pm, set(pm.input_names())

    def _prepared(self, feed: Dict[str, np.ndarray]):
        if () in self._compiled:
            return self._compiled[()]
        # Fix the shape-deciding inputs: the integer ones, then whatever the importer names.
        constants = {n: v for n, v in feed.items() if not np.issubdtype(np.asarray(v).dtype, np.floating)}
        for _ in range(len(feed) + 1):
            key = tuple(sorted((n, np.asarray(v).tobytes(), str(np.asarray(v).dtype)) for n, v in constants.items()))
            if key in self._compiled:
                return self._compiled[key]
            try:
                self._compiled[key] = self._compile(constants)
                return self._compiled[key]
            except ml.IngotError as e:
                named = _NEEDED.search(str(e))
                if named is None or named.group(1) not in feed or named.group(1) in constants:
                    raise
                constants[named.group(1)] = feed[named.group(1)]
        raise ml.IngotError("ONNX backend: the model's shape-deciding inputs could not be fixed")

    def run(self, inputs: Any, **kwargs: Any) -> Any:
        """Runs the model on ``inputs`` (a list in graph-input order, one array, or a dict by
        name); returns the outputs in graph order (a namedtuple-like, as ONNX backends do)."""
        del kwargs
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            feed = dict(zip(self._inputs, inputs))
        pm, reads = self._prepared(feed)
        out = pm.evaluate({}, {n: v for n, v in feed.items() if n in reads})
        return namedtupledict("Outputs", self._outputs)(*[np.asarray(out[n]) for n in self._outputs])


class IngotBackend(Backend):
    """ingot's reference interpreter as an ONNX backend (the oracle: no C++ compiler needed)."""

    _make_backend = staticmethod(ml.ReferenceBackend)

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> IngotRep:
        """Imports and compiles ``model`` (an onnx.ModelProto)."""
        super().prepare(model, device, **kwargs)
        initializers = {t.name for t in model.graph.initializer}
        inputs = [i.name for i in model.graph.input if i.name not in initializers]
        outputs = [o.name for o in model.graph.output]
        return IngotRep(model.SerializeToString(), inputs, outputs, cls._make_backend)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> Any:
        """prepare(model).run(inputs)."""
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Optional[Any] = None,
                 **kwargs: Any) -> Any:
        """Not supported: ingot imports whole models (wrap the node in a graph)."""
        raise NotImplementedError("ingot runs whole ONNX models; wrap the node in a graph")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """ingot runs on the CPU."""
        return device == "CPU"


class IngotCpuBackend(IngotBackend):
    """ingot's native CPU backend (generated C++, cached on disk) as an ONNX backend."""

    _make_backend = staticmethod(ml.CpuBackend)
