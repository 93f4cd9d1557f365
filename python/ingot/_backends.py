"""The framework-emitter backends: generated Python source run in NumPy, PyTorch, JAX or MLX."""
from __future__ import annotations

from typing import Optional

from .emitters import Emitter


class _FrameworkBackend:
    framework = ""
    # Where evaluate(..., output_gradients=...) gets gradients: the framework's autodiff over the
    # generated forward function, or ingot's backward graph generated as source like the forward.
    gradient_modes = ("framework", "ingot")
    default_gradients = "framework"

    def __init__(self, file_path: Optional[str] = None, gradients: Optional[str] = None):
        """`file_path`: also write the generated source there (the compile option `file_path`
        does the same; the backward graph's goes to <name>_grad.py). `gradients`: 'framework'
        (the framework's autodiff) or 'ingot' (ingot's backward graph, run in the framework)."""
        self.file_path = file_path
        self.gradients = self.default_gradients if gradients is None else gradients
        if self.gradients not in self.gradient_modes:
            from ._ingot import IngotError

            raise IngotError(f"{type(self).__name__}(gradients={self.gradients!r}): expected one of "
                             f"{', '.join(repr(m) for m in self.gradient_modes)}")

    @property
    def name(self) -> str:
        """The backend's name ('numpy', 'torch', 'jax' or 'mlx')."""
        return self.framework

    def _emitter(self, file_path: Optional[str]) -> Emitter:
        """A fresh emitter for one compile (it keeps that model's generated function)."""
        return Emitter(self.framework, file_path or self.file_path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(gradients={self.gradients!r})"


class NumpyBackend(_FrameworkBackend):
    """Generates NumPy source for the optimized graph and runs it; gradients through ingot's
    backward graph, generated as NumPy source too (NumPy has no autodiff)."""

    framework = "numpy"
    gradient_modes = ("ingot",)
    default_gradients = "ingot"


class TorchBackend(_FrameworkBackend):
    """Generates PyTorch source for the optimized graph and runs it; gradients through torch.autograd
    (or ingot's backward graph with gradients='ingot')."""

    framework = "torch"


class JaxBackend(_FrameworkBackend):
    """Generates JAX source for the optimized graph and runs it; gradients through jax.vjp (or ingot's
    backward graph with gradients='ingot')."""

    framework = "jax"


class MlxBackend(_FrameworkBackend):
    """Generates MLX source (mlx.core; its CPU build runs on Linux) for the optimized graph and runs
    it, under mx.compile with jit=True (the default); gradients through mx.vjp (or ingot's backward
    graph with gradients='ingot')."""

    framework = "mlx"
