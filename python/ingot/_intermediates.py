"""``compile(..., save_intermediates=True, intermediate_dir=..., intermediate_format=...)``: every
intermediate tensor of each ``evaluate``, written to disk named by its terminal.

A pass at the end of the pipeline makes every value a node computes an extra output, named
``intermediate:<terminal>`` (the wire's terminal name, e.g. ``linear_0.matmul_0.output``, or
``v<id>`` for a value the passes made); ``PhysicalModel.evaluate`` takes them off the results
and writes them, one directory per call (``evaluate_0000``, ``evaluate_0001``, ...), each file
written atomically. Exposing every value keeps the backend from fusing it away: a debugging mode.
"""
from __future__ import annotations

import json
import os
import re
import struct
from typing import Any, Dict, Mapping

import numpy as np

from ._files import write_atomically
from ._ingot import IngotError

PREFIX = "intermediate:"
FORMATS = ("npy", "safetensors")
_SAFETENSORS_DTYPES = {"bool": "BOOL", "int8": "I8", "int16": "I16", "int32": "I32", "int64": "I64", "uint8": "U8",
                       "float16": "F16", "bfloat16": "BF16", "float32": "F32", "float64": "F64"}


def expose_every_value(graph: Dict[str, Any]) -> Dict[str, Any]:
    """The custom pass: every computed value that is not an output becomes one. (A module
    function, not a closure: the compiled model keeps it, and a closure over the caller's
    variables would be a reference cycle through C++.)"""
    taken = {o["value"] for o in graph["outputs"]}
    names = {o["name"] for o in graph["outputs"]}
    for v in graph["values"]:
        if v["producer"] < 0 or v["id"] in taken:
            continue
        name = PREFIX + (v["name"] or f"v{v['id']}")
        if name in names:
            name = f"{name}#{v['id']}"
        names.add(name)
        graph["outputs"].append({"name": name, "value": v["id"]})
    return graph


def check_options(directory: Any, fmt: Any) -> Dict[str, Any]:
    if fmt not in FORMATS:
        raise IngotError(f"intermediate_format {fmt!r} is not one of {', '.join(FORMATS)}")
    return {"dir": os.fspath(directory if directory is not None else "ingot_intermediates"), "format": fmt, "calls": 0}


def _file_name(terminal: str) -> str:
    """A terminal name as a file name: path separators and anything unusual become '_'."""
    return re.sub(r"[^A-Za-z0-9_.#-]", "_", terminal).lstrip(".") or "_"


def _npy_bytes(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def _safetensors_bytes(tensors: Mapping[str, np.ndarray]) -> bytes:
    header: Dict[str, Any] = {}
    blobs, offset = [], 0
    for name, a in tensors.items():
        data = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": _SAFETENSORS_DTYPES[str(a.dtype)], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def take(results: Dict[str, Any], state: Dict[str, Any]) -> Dict[str, Any]:
    """Takes the intermediates off `results` and writes them for this call; returns the rest."""
    found = {k[len(PREFIX):]: v for k, v in results.items() if k.startswith(PREFIX)}
    rest = {k: v for k, v in results.items() if not k.startswith(PREFIX)}
    call_dir = os.path.join(state["dir"], f"evaluate_{state['calls']:04d}")
    state["calls"] += 1
    os.makedirs(call_dir, exist_ok=True)
    if state["format"] == "npy":
        for terminal, a in found.items():
            write_atomically(os.path.join(call_dir, _file_name(terminal) + ".npy"), _npy_bytes(np.asarray(a)))
    else:
        write_atomically(os.path.join(call_dir, "intermediates.safetensors"),
               _safetensors_bytes({t: np.asarray(a) for t, a in found.items()}))
    return rest
