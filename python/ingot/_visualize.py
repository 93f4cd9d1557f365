"""``compile(..., visualize=True, viz_options={...})``: the optimized graph drawn with Graphviz.

The DOT text is written here from the graph's JSON (every label escaped, so no name a user chose
can change the file's structure); ``dot`` renders SVG or PNG. The file is written atomically
(_files.write_atomically).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any, Dict, List, Mapping

from ._dtypes import _ITEMSIZE
from ._files import write_atomically
from ._ingot import IngotError

VIZ_OPTIONS = ("format", "show_shapes", "show_types", "show_memory", "output_path")
FORMATS = ("svg", "png", "dot")


def check_options(options: Any) -> Dict[str, Any]:
    """viz_options with its defaults filled in; TypeError for an unknown key, IngotError for a
    bad value."""
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise TypeError(f"viz_options must be a dict, got {type(options).__name__}")
    unknown = sorted(set(options) - set(VIZ_OPTIONS))
    if unknown:
        raise TypeError(f"viz_options: unknown key '{unknown[0]}' (valid keys: {', '.join(VIZ_OPTIONS)})")
    out = {"format": "svg", "show_shapes": True, "show_types": True, "show_memory": False, "output_path": None}
    out.update(options)
    if out["format"] not in FORMATS:
        raise IngotError(f"viz_options: format {out['format']!r} is not one of {', '.join(FORMATS)}")
    for key in ("show_shapes", "show_types", "show_memory"):
        if not isinstance(out[key], bool):
            raise IngotError(f"viz_options: {key} must be True or False, got {out[key]!r}")
    if out["output_path"] is None:
        out["output_path"] = f"ingot_graph.{out['format']}"
    out["output_path"] = os.fspath(out["output_path"])
    return out


def _escape(text: str) -> str:
    """Text inside a DOT double-quoted string: quotes, backslashes and line breaks escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "")


def _shape(value: Mapping[str, Any]) -> str:
    return "[" + ", ".join(str(d) for d in value.get("shape", [])) + "]"


def _bytes(value: Mapping[str, Any]) -> int:
    """The value's size in bytes (0 when a dimension is symbolic)."""
    n = _ITEMSIZE.get(value.get("dtype", ""), 0)
    for d in value.get("shape", []):
        if not isinstance(d, int):
            return 0
        n *= d
    return n


def _describe(value: Mapping[str, Any], options: Mapping[str, Any]) -> List[str]:
    parts = []
    if options["show_types"]:
        parts.append(str(value.get("dtype", "?")))
    if options["show_shapes"]:
        parts.append(_shape(value))
    if options["show_memory"]:
        size = _bytes(value)
        parts.append(f"{size:,} B" if size else "? B")
    return [" ".join(parts)] if parts else []


def graph_dot(graph: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    """The graph (ingot's graph JSON, as a dict) as DOT: leaves as boxes, ops as ellipses with
    their results' types, shapes and sizes as options ask, outputs as house shapes."""
    values = {v["id"]: v for v in graph["values"]}
    lines = ["digraph ingot {", '  node [fontname="monospace"];', "  rankdir=TB;"]
    total = 0
    for v in graph["values"]:
        if v.get("producer", -1) >= 0:
            continue
        label = [f"{v['kind']} {v['name']}" if v.get("name") else v["kind"]] + _describe(v, options)
        total += _bytes(v)
        lines.append(f'  "v{v["id"]}" [shape=box, label="{_escape(chr(10).join(label))}"];')
    for node in graph["nodes"]:
        outs = [values[o] for o in node["outputs"]]
        label = [node["op"]] + [d for o in outs for d in _describe(o, options)]
        total += sum(_bytes(o) for o in outs)
        lines.append(f'  "n{node["id"]}" [label="{_escape(chr(10).join(label))}"];')
        for i in node["inputs"]:
            src = values[i]
            tail = f"n{src['producer']}" if src.get("producer", -1) >= 0 else f"v{i}"
            lines.append(f'  "{tail}" -> "n{node["id"]}";')
    for k, out in enumerate(graph["outputs"]):
        src = values[out["value"]]
        tail = f"n{src['producer']}" if src.get("producer", -1) >= 0 else f"v{out['value']}"
        lines.append(f'  "out{k}" [shape=invhouse, style=bold, label="{_escape(out["name"])}"];')
        lines.append(f'  "{tail}" -> "out{k}";')
    if options["show_memory"]:
        lines.append(f'  label="{_escape(f"values: {total:,} bytes in all (static sizes)")}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(graph_json: str, options: Mapping[str, Any]) -> str:
    """Writes the drawing viz_options asks for; returns its path."""
    dot_text = graph_dot(json.loads(graph_json), options)
    path = options["output_path"]
    if options["format"] == "dot":
        write_atomically(path, dot_text.encode())
        return path
    dot = shutil.which("dot")
    if dot is None:
        raise IngotError("visualize: Graphviz's `dot` program is not installed (apt-get install graphviz, or "
                         "brew install graphviz); viz_options={'format': 'dot'} writes the DOT text without it")
    done = subprocess.run([dot, f"-T{options['format']}"], input=dot_text.encode(), capture_output=True, check=False)
    if done.returncode != 0:
        raise IngotError(f"visualize: dot failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()}")
    write_atomically(path, done.stdout)
    return path
