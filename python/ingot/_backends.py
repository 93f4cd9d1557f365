"""The framework-emitter backends: generated Python source run in NumPy, PyTorch or JAX."""
from __future__ import annotations

from typing import Optional

from .emitters import Emitter


class _FrameworkBackend:
    framework = ""

    def __init__(self, file_path: Optional[str] = None):
        """`file_path`: also write the generated source there (the compile option `file_path`
        does the same)."""
        self.file_path = file_path

    @property
    def name(self) -> str:
        """The backend's name ('numpy', 'torch' or 'jax')."""
        return self.framework

    def _emitter(self, file_path: Optional[str]) -> Emitter:
        """A fresh emitter for one compile (it keeps that model's generated function)."""
        return Emitter(self.framework, file_path or self.file_path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NumpyBackend(_FrameworkBackend):
    """Generates NumPy source for the optimized graph and runs it (no gradients: NumPy has no autodiff)."""

    framework = "numpy"


class TorchBackend(_FrameworkBackend):
    """Generates PyTorch source for the optimized graph and runs it; gradients through torch.autograd."""

    framework = "torch"


class JaxBackend(_FrameworkBackend):
    """Generates JAX source for the optimized graph and runs it; gradients through jax.vjp."""

    framework = "jax"
