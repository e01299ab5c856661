"""Files that may be gzip-compressed, read whole; one line when they cannot be: empty, cut off, corrupt.

Recordings are gzip (`core.record`); bench reports and run logs may be gzipped by their users
(`k2.json.gz`). A file that starts with gzip's magic bytes but does not inflate is *corrupt*, one
whose stream stops early is *cut off*: neither is "empty", which only a file without bytes is."""

from __future__ import annotations

import zlib
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"


class CorruptFileError(ValueError):
    """A gzip file that does not inflate (`str()` is one line naming the file)."""


def inflate(data: bytes, name: str) -> tuple[bytes, bool]:
    """Every gzip member of `data`, inflated, and whether the last one was cut off (or a later member is
    corrupt: what came before it is kept). Raises `CorruptFileError`: not gzip, or a corrupt first member."""
    if not data.startswith(GZIP_MAGIC):
        raise CorruptFileError(f"{name} is not a gzip file")
    out: list[bytes] = []
    while data:
        inflater = zlib.decompressobj(wbits=31)
        try:
            out.append(inflater.decompress(data))
        except zlib.error as exc:
            if not out:
                raise CorruptFileError(f"{name} is a corrupt gzip file ({exc})") from exc
            return b"".join(out), True
        if not inflater.eof:
            return b"".join(out), True
        data = inflater.unused_data
    return b"".join(out), False


def read_text(path: Path) -> str:
    """The file's text, inflated first when it is gzip. Raises `CorruptFileError` (a corrupt or cut-off
    gzip file), `UnicodeDecodeError`, `OSError`."""
    data = path.read_bytes()
    if not data.startswith(GZIP_MAGIC):
        return data.decode("utf-8")
    text, truncated = inflate(data, str(path))
    if truncated:
        raise CorruptFileError(f"{path} is a corrupt gzip file (it stops part way)")
    return text.decode("utf-8")
