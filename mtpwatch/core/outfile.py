"""Output files that are either complete or not there: write to a temporary file, then rename.

On a full disk (or any failed write) the half-written file is removed and an existing file at the
path is left as it was, so no truncated JSON or CSV is ever mistaken for a result."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_complete(path: Path, writer: Callable[[Path], object]) -> None:
    """Run `writer(tmp)` on a temporary file beside `path`, then rename it to `path` (a path that is
    not a regular file, ``/dev/stdout`` or a FIFO, is written directly). Raises the writer's `OSError`
    after removing the temporary file."""
    if path.exists() and not path.is_file():
        writer(path)
        return
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer(tmp)
        umask = os.umask(0)  # reading the umask means setting it: set it back at once
        os.umask(umask)
        with contextlib.suppress(OSError):
            tmp.chmod(0o644 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
