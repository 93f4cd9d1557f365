"""Type stubs: shipped with the package (py.typed, _ingot.pyi), current with the extension, and
every public function documented."""
from __future__ import annotations

import importlib.util
import inspect
import os
import subprocess
import sys

import pytest

import ingot as ml

PACKAGE = os.path.dirname(ml.__file__)
SOURCE_STUB = os.path.join(os.path.dirname(__file__), "..", "ingot", "_ingot.pyi")


def test_stubs_are_installed():
    assert os.path.exists(os.path.join(PACKAGE, "py.typed"))
    assert os.path.exists(os.path.join(PACKAGE, "_ingot.pyi"))


@pytest.mark.skipif(importlib.util.find_spec("nanobind") is None, reason="nanobind (stubgen) is not installed")
def test_stub_matches_the_extension(tmp_path):
    out = tmp_path / "_ingot.pyi"
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "ingot._ingot", "-o", str(out)], check=True,
                   cwd=tmp_path)
    with open(SOURCE_STUB, encoding="utf-8") as f:
        assert out.read_text() == f.read(), (
            "python/ingot/_ingot.pyi is stale: regenerate it with "
            "`python -m nanobind.stubgen -m ingot._ingot -o python/ingot/_ingot.pyi`")


def test_every_public_function_has_a_docstring():
    missing = []
    for name in ml.__all__:
        obj = getattr(ml, name)
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not callable(member) and not isinstance(member, property):
                    continue
                if not (inspect.getdoc(getattr(obj, attr)) or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing, f"undocumented: {missing}"
