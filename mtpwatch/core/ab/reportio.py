"""The bench report as a file: one JSON document, written by `mtpwatch bench --json` and by the app's
saved F6 measurements alike, so `plot` and `compare` read both."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.jsonout import json_safe


def report_document(
    report: BenchReport, meta: Mapping[str, Any] | None, require_identical: bool = False
) -> dict[str, Any]:
    """The report's JSON with the provenance block right after `tool`."""
    body = report.to_json(require_identical)
    return {"tool": body.pop("tool"), "meta": dict(meta) if meta is not None else None, **body}


def dumps(document: Mapping[str, Any]) -> str:
    """The document as indented JSON (NaN and infinities become null)."""
    return json.dumps(json_safe(document), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_document(path: Path, document: Mapping[str, Any]) -> None:
    """Write atomically (a temporary file renamed over `path`): a reader never sees half a report."""
    text = dumps(document)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent or Path(".")))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
