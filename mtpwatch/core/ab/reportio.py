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
from mtpwatch.core.provenance import with_meta


def report_document(
    report: BenchReport, meta: Mapping[str, Any] | None, require_identical: bool = False
) -> dict[str, Any]:
    """The report's JSON, starting with the provenance block (a bare one when `meta` is None)."""
    return with_meta(report.to_json(require_identical), meta, temperature=report.config.temperature)


def dumps(document: Mapping[str, Any]) -> str:
    """The document as indented JSON (NaN and infinities become null)."""
    return json.dumps(json_safe(document), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def write_document(path: Path, document: Mapping[str, Any]) -> None:
    """Write complete or not at all (`core.outfile.write_complete`): a reader never sees half a report."""
    text = dumps(document)
    write_complete(path, lambda p: p.write_text(text, encoding="utf-8"))
