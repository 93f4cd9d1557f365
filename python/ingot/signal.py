"""Signal contexts: named regions of a program whose treatment a configuration file decides.

The file (YAML or JSON, named by ``INGOT_CONFIG`` or passed to :func:`load_config`) names the
contexts, at its top level or under ``signals:``::

    signals:
      training_loop:
        compile: true                          # the block runs as one compiled region
        shard: {axis: 0, workers: [0, 1]}      # data parallel over these ranks of mpirun's group

The program marks the region::

    with ml.signal.context("training_loop") as ctx:
        for x, y in batches:                  # the global batch on every rank
            r = step.run(params, state, {"input": x, "target": y})

- ``compile: true`` makes the block an ``ml.compile_region(name)``: its eager work runs as one
  unit and compiles like a hot path.
- ``shard: {axis, workers}`` makes the block data parallel over ``workers`` (the ranks of the
  group, each listed once): ``ctx.shard(tree)`` returns this rank's equal part of every array of
  a tree along ``axis`` (by the rank's position in ``workers``), and a data-parallel
  ``TrainStep.run`` inside the block is given the global batch and shards it itself.

Errors are clear and early: an unknown context name, a key other than ``compile`` and ``shard``,
a bad ``axis`` or ``workers`` entry, workers that are not the launch's ranks, and a file that is
not valid YAML. YAML is read with PyYAML (``pip install pyyaml``); a ``.json`` file needs nothing.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional

from . import _ingot

__all__ = ["SignalConfig", "context", "current", "load_config", "reset_config"]

_KEYS = ("compile", "shard")
_config: Optional[Dict[str, "SignalConfig"]] = None
_config_path: Optional[str] = None
_active: List["context"] = []


class SignalConfig:
    """One context's settings: ``compile`` (bool), ``axis`` and ``workers`` (None when not sharded)."""

    def __init__(self, name: str, spec: Any, where: str):
        def fail(message: str) -> None:
            raise _ingot.IngotError(f"{where}: signal '{name}': {message}")

        if spec is None:
            spec = {}
        if not isinstance(spec, Mapping):
            fail(f"expected a mapping of {', '.join(_KEYS)}, got {type(spec).__name__}")
        unknown = [k for k in spec if k not in _KEYS]
        if unknown:
            fail(f"unknown key '{unknown[0]}' (valid keys: {', '.join(_KEYS)})")
        self.name = name
        self.compile = spec.get("compile", False)
        if not isinstance(self.compile, bool):
            fail(f"compile must be true or false, got {self.compile!r}")
        self.axis: Optional[int] = None
        self.workers: Optional[List[int]] = None
        shard = spec.get("shard")
        if shard is not None:
            if not isinstance(shard, Mapping):
                fail(f"shard must be a mapping {{axis, workers}}, got {shard!r}")
            bad = [k for k in shard if k not in ("axis", "workers")]
            if bad:
                fail(f"shard has an unknown key '{bad[0]}' (valid keys: axis, workers)")
            axis = shard.get("axis", 0)
            if not isinstance(axis, int) or isinstance(axis, bool) or axis < 0:
                fail(f"shard axis must be a non-negative integer, got {axis!r}")
            workers = shard.get("workers")
            if (not isinstance(workers, list) or not workers
                    or not all(isinstance(w, int) and not isinstance(w, bool) and w >= 0 for w in workers)):
                fail(f"shard workers must be a non-empty list of ranks (non-negative integers), got {workers!r}")
            if len(set(workers)) != len(workers):
                fail(f"shard workers list a rank twice: {workers}")
            self.axis, self.workers = axis, list(workers)

    def __repr__(self) -> str:
        shard = f", shard={{axis: {self.axis}, workers: {self.workers}}}" if self.workers is not None else ""
        return f"SignalConfig('{self.name}', compile={self.compile}{shard})"


def _parse(text: str, path: str) -> Any:
    if path.endswith(".json"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise _ingot.IngotError(f"{path}: not valid JSON: {e}") from None
    try:
        import yaml
    except ImportError:
        raise _ingot.IngotError(f"{path}: reading YAML needs PyYAML (pip install pyyaml), or write the "
                                f"configuration as .json") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise _ingot.IngotError(f"{path}: not valid YAML: {e}") from None


def load_config(path: "str | os.PathLike[str]") -> Dict[str, SignalConfig]:
    """Reads and checks a configuration file; its contexts replace any loaded before."""
    global _config, _config_path
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise _ingot.IngotError(f"INGOT_CONFIG: cannot read '{path}': {e.strerror}") from None
    doc = _parse(text, path)
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise _ingot.IngotError(f"{path}: expected a mapping of signal contexts, got {type(doc).__name__}")
    signals = doc.get("signals", doc) if "signals" in doc else doc
    if not isinstance(signals, Mapping):
        raise _ingot.IngotError(f"{path}: 'signals' must map context names to settings")
    _config = {str(name): SignalConfig(str(name), spec, path) for name, spec in signals.items()}
    _config_path = path
    return dict(_config)


def reset_config() -> None:
    """Forgets the loaded configuration (the next context reads INGOT_CONFIG again)."""
    global _config, _config_path
    _config, _config_path = None, None


def _lookup(name: str) -> SignalConfig:
    if _config is None:
        path = os.environ.get("INGOT_CONFIG")
        if not path:
            raise _ingot.IngotError(f"signal context '{name}': no configuration; set INGOT_CONFIG=config.yaml "
                                    f"or call ml.signal.load_config(path)")
        load_config(path)
    assert _config is not None
    if name not in _config:
        known = ", ".join(sorted(_config)) or "none"
        raise _ingot.IngotError(f"signal context '{name}' is not in {_config_path} (contexts there: {known})")
    return _config[name]


def current() -> Optional["context"]:
    """The innermost open context, or None."""
    return _active[-1] if _active else None


class context:
    """``with ml.signal.context(name) as ctx:`` runs the block as the configuration says (module doc)."""

    def __init__(self, name: str):
        self.name = name
        self.config = _lookup(name)
        self._region: Any = None
        self.rank = 0
        self.size = 1
        if self.config.workers is not None:
            ranks = _ingot.distributed.size()
            if sorted(self.config.workers) != list(range(ranks)):
                raise _ingot.IngotError(
                    f"signal context '{name}': shard workers {self.config.workers} must be the ranks of this "
                    f"launch, 0 to {ranks - 1} (it has {ranks}; start {len(self.config.workers)} with "
                    f"mpirun -np {len(self.config.workers)})")
            self.rank = self.config.workers.index(_ingot.distributed.rank())
            self.size = len(self.config.workers)

    @property
    def sharded(self) -> bool:
        return self.config.workers is not None

    def shard(self, tree: Any) -> Any:
        """This rank's part of every array of `tree` (dicts, lists, tuples) along the context's axis."""
        if not self.sharded:
            raise _ingot.IngotError(f"signal context '{self.name}' has no shard settings in {_config_path}")
        from ._tree import flatten, unflatten

        leaves, spec = flatten(tree, "shard", convert=True)
        keys = [str(i) for i in range(len(leaves))]
        parts = _ingot._shard_arrays(dict(zip(keys, leaves)), self.rank, self.size, self.config.axis)
        return unflatten(spec, [parts[k] for k in keys])

    def __enter__(self) -> "context":
        if self.config.compile:
            self._region = _ingot.compile_region(self.name)
            self._region.__enter__()
        _active.append(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        _active.remove(self)
        if self._region is not None:
            region, self._region = self._region, None
            region.__exit__(exc_type, exc, tb)
