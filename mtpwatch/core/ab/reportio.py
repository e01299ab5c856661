"""The bench report as a file: one JSON document, written by `mtpwatch bench --json` and by the app's
saved F6 measurements alike, so `plot` and `compare` read both."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.jsonout import json_safe
from mtpwatch.core.outfile import write_complete


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
    """Write complete or not at all (`core.outfile.write_complete`): a reader never sees half a report."""
    text = dumps(document)
    write_complete(path, lambda p: p.write_text(text, encoding="utf-8"))
