"""The recording format: version, record kinds, the /metrics page filter and per-server line deltas.

A recording is gzip-compressed JSON lines. The first line is the header (`kind` "header",
`version`); every other line is one record with `kind`, `t` (the app's monotonic clock, seconds)
and, for per-server records, `s` (the server's index). See docs/recording.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mtpwatch.core.http.generation import RequestSpecMetrics, StreamEvent
from mtpwatch.core.metrics.snapshot import SNAPSHOT_PREFIXES

VERSION = 1
"""Bumped when a reader of the previous version could misread a record."""


def filter_page(text: str) -> list[str]:
    """The lines of a /metrics page that `core.metrics.snapshot` reads (its SNAPSHOT_PREFIXES).

    The rest of a vLLM page (HELP/TYPE comments, request-size histograms, Python process gauges) is
    three quarters of its bytes and never reaches a number the app shows. An OpenMetrics page (vLLM's
    Rust frontend) keeps its `# EOF`: the replayed page reads as OpenMetrics too (`snapshot.speculating`).
    """
    return [line for line in text.splitlines() if line.startswith(SNAPSHOT_PREFIXES) or line == "# EOF"]


def page_delta(before: Sequence[str] | None, after: Sequence[str]) -> dict[str, Any]:
    """`after` as a change to `before`: {'n': lines, 'c': [[index, line], ...]}, or {'page': [...]}."""
    if before is None or len(before) != len(after):
        return {"page": list(after)}
    changed = [[i, line] for i, (old, line) in enumerate(zip(before, after, strict=True)) if old != line]
    return {"n": len(after), "c": changed}


def apply_delta(before: Sequence[str] | None, record: Mapping[str, Any]) -> list[str]:
    """Inverse of `page_delta`.

    Raises:
        ValueError: a delta without the page it changes (a corrupt file).
    """
    if "page" in record:
        return [str(line) for line in record["page"]]
    if before is None or len(before) != int(record["n"]):
        raise ValueError("a page delta without its previous page")
    lines = list(before)
    for i, line in record["c"]:
        lines[int(i)] = str(line)
    return lines


def encode_event(event: StreamEvent) -> dict[str, Any]:
    """A stream event as a compact record body (defaults left out)."""
    out: dict[str, Any] = {"t": event.t, "n": event.tokens, "ct": event.completion_tokens}
    if event.text:
        out["x"] = event.text
    if event.token_ids is not None:
        out["ids"] = list(event.token_ids)
    if event.finish_reason is not None:
        out["fin"] = event.finish_reason
    if event.reasoning:
        out["r"] = event.reasoning
    if not event.output:
        out["o"] = False
    if event.estimated:
        out["est"] = True
    if not event.exact:
        out["ex"] = False
    if event.prompt_tokens is not None:
        out["pt"] = event.prompt_tokens
    if event.spec_metrics is not None:
        m = event.spec_metrics
        out["sm"] = {
            "num_spec_steps": m.num_spec_steps,
            "num_draft_tokens": m.num_draft_tokens,
            "num_accepted_draft_tokens": m.num_accepted_draft_tokens,
            "num_spec_tokens": m.num_spec_tokens,
            "acceptance_histogram": list(m.acceptance_histogram),
        }
    return out


def decode_event(record: Mapping[str, Any]) -> StreamEvent:
    """Inverse of `encode_event`."""
    sm = record.get("sm")
    spec = RequestSpecMetrics.from_json(sm) if sm is not None else None
    ids = record.get("ids")
    return StreamEvent(
        t=float(record["t"]),
        text=str(record.get("x", "")),
        tokens=int(record["n"]),
        completion_tokens=int(record["ct"]),
        token_ids=tuple(int(i) for i in ids) if ids is not None else None,
        finish_reason=record.get("fin"),
        reasoning=str(record.get("r", "")),
        output=bool(record.get("o", True)),
        estimated=bool(record.get("est", False)),
        exact=bool(record.get("ex", True)),
        prompt_tokens=record.get("pt"),
        spec_metrics=spec,
    )
