"""The bench report as a file: one JSON document, written by `mtpwatch bench --json` and by the app's
saved F6 measurements alike, so `plot` and `compare` read both; the bench's --csv (one row per run);
`write_outputs`, which never loses a report to a path it cannot write."""

from __future__ import annotations

import csv
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mtpwatch.core import jsonout
from mtpwatch.core.ab.records import CSV_FIELDS
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.outfile import write_complete
from mtpwatch.core.provenance import with_meta


def report_document(
    report: BenchReport, meta: Mapping[str, Any] | None, require_identical: bool = False
) -> dict[str, Any]:
    """The report's JSON, starting with the provenance block (a bare one when `meta` is None)."""
    return with_meta(report.to_json(require_identical), meta, temperature=report.config.temperature)


def dumps(document: Mapping[str, Any]) -> str:
    """The document as indented JSON (NaN and infinities become null)."""
    return jsonout.dumps(document, indent=2, ensure_ascii=False) + "\n"


def write_document(path: Path, document: Mapping[str, Any]) -> None:
    """Write complete or not at all (`core.outfile.write_complete`): a reader never sees half a report."""
    text = dumps(document)
    write_complete(path, lambda p: p.write_text(text, encoding="utf-8"))


def write_csv(report: BenchReport, path: Path) -> None:
    """One row per run (warm-ups included, flagged)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in report.records:
            writer.writerow(r.row())


def write_outputs(
    report: BenchReport,
    json_path: Path | None,
    csv_path: Path | None,
    require_identical: bool,
    meta: Mapping[str, Any] | None = None,
    *,
    echo: Callable[[str], None],
) -> list[str]:
    """Write --json/--csv; a file that cannot be written goes to the temp folder instead (nothing lost).
    `echo` gets a "wrote PATH" line per file written; returns one line per problem (none: all went
    where asked)."""
    problems: list[str] = []
    document = dumps(report_document(report, meta, require_identical))

    def write(path: Path, suffix: str, writer: Callable[[Path], object]) -> None:
        try:
            write_complete(path, writer)  # never a half-written file at `path`
            echo(f"wrote {path}")
        except OSError as exc:
            fd, fallback = tempfile.mkstemp(prefix="mtpwatch-bench-", suffix=suffix)
            os.close(fd)
            writer(Path(fallback))
            problems.append(f"cannot write {path} ({exc.strerror or exc}); wrote {fallback} instead")

    if json_path is not None:
        write(json_path, ".json", lambda p: p.write_text(document, encoding="utf-8"))
    if csv_path is not None:
        write(csv_path, ".csv", lambda p: write_csv(report, p))
    return problems
