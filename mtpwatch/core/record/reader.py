"""`read_recording`: the records of a recording, also of one a crash cut off mid-write."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtpwatch.core.gzipfile import CorruptFileError, inflate
from mtpwatch.core.record.schema import VERSION, apply_delta


class RecordingError(ValueError):
    """Not a recording, or one of a newer version (one line, for an `Error:` message)."""


@dataclass(slots=True)
class Recording:
    """A whole recording in memory: the header and the records, in the order they were written."""

    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False
    """The file ended mid-stream (the app was killed): the records up to the last flush are here."""

    @property
    def t0(self) -> float:
        return float(self.header["t"])

    def session(self) -> dict[str, Any]:
        """The 'session' mark (mode, title, servers, display settings); empty if missing."""
        marks = (r for r in self.records if r["kind"] == "mark" and r.get("what") == "session")
        return next(marks, {})


def read_recording(path: str | Path) -> Recording:
    """Read `path`; scrape deltas come back as whole pages (`lines`). Raises `RecordingError`
    (unreadable, not a recording, or a newer version) or `OSError` (the file cannot be opened)."""
    data = Path(path).read_bytes()
    if not data:
        raise RecordingError(f"{path} is empty (0 bytes): no header")
    try:
        text, truncated = inflate(data, str(path))
    except CorruptFileError as exc:
        raise RecordingError(str(exc)) from exc
    *lines, rest = text.split(b"\n")
    truncated = truncated or rest != b""  # a record cut in half: drop it
    if not lines and truncated:
        raise RecordingError(f"{path} is a corrupt gzip file: it stops before its first complete record")
    if not lines:
        raise RecordingError(f"{path} holds no records: no header")
    try:
        header = json.loads(lines[0])
    except ValueError as exc:
        raise RecordingError(f"{path} is not an mtpwatch recording (no JSON header)") from exc
    if not isinstance(header, dict) or header.get("kind") != "header":
        raise RecordingError(f"{path} is not an mtpwatch recording (no header record)")
    version = int(header.get("version", 0))
    if version > VERSION:
        raise RecordingError(f"{path} is a version {version} recording; this mtpwatch reads up to {VERSION}")
    recording = Recording(header=header, truncated=truncated)
    pages: dict[int, list[str]] = {}
    via: dict[int, str] = {}
    for raw in lines[1:]:
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise RecordingError(f"{path}: a record is not JSON ({exc})") from exc
        if record.get("kind") == "scrape":
            s = int(record["s"])
            page = apply_delta(pages.get(s), record)
            pages[s] = page
            if "via" in record:  # written when it changed (recordings before it have none: "")
                via[s] = str(record["via"] or "")
            record = {"kind": "scrape", "t": record["t"], "s": s, "lines": page, "via": via.get(s, "")}
        recording.records.append(record)
    return recording
