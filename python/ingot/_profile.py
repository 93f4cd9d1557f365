"""``with ml.profile() as prof:`` — per-kernel times of evaluations (include/ingot/profile.h)."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Union

from ._ingot import ProfileSession


class Profile:
    """A profile session as a context manager. Every evaluation of a compiled model inside the
    `with` block reports its kernels (CpuBackend: each generated kernel; ReferenceBackend: each
    node)."""

    def __init__(self) -> None:
        self._session: Optional[ProfileSession] = None

    def __enter__(self) -> "Profile":
        self._session = ProfileSession()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops recording (leaving the `with` block does this)."""
        if self._session is not None:
            self._session.stop()

    def _s(self) -> ProfileSession:
        if self._session is None:
            raise RuntimeError("the profile has not started: use `with ml.profile() as prof:`")
        return self._session

    def rows(self) -> List[Dict[str, Any]]:
        """Per kernel: name, backend, count, total_s, mean_s, share; largest total first."""
        return self._s().rows()

    def events(self) -> List[Dict[str, Any]]:
        """Every kernel run: name, backend, detail, start_s, duration_s, thread."""
        return self._s().events()

    def summary(self) -> str:
        """A table of kernels: count, total ms, mean us and share of the profiled time."""
        return self._s().summary()

    def chrome_trace(self) -> str:
        """The Chrome/Perfetto trace JSON text."""
        return self._s().chrome_trace()

    def write_chrome_trace(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the trace to `path`; open it in ui.perfetto.dev or chrome://tracing."""
        self._s().write_chrome_trace(os.fspath(path))


def profile() -> Profile:
    """Starts a profile: ``with ml.profile() as prof: pm.evaluate(...)``; then ``prof.summary()``."""
    return Profile()
