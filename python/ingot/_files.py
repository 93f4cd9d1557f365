"""Files ingot's Python layer writes (drawings, intermediate tensors): atomically, so a reader
never sees half a file and an interrupted write leaves the old one."""
from __future__ import annotations

import os
import tempfile


def write_atomically(path: str, data: bytes) -> None:
    """Writes `data` to a temporary file beside `path`, then renames it over `path`."""
    fd, tmp = tempfile.mkstemp(prefix=".ingot-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
