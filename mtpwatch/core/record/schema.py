"""The recording format: version, record kinds, the /metrics page filter and per-server line deltas.

A recording is gzip-compressed JSON lines. The first line is the header (`kind` "header",
`version`); every other line is one record with `kind`, `t` (the app's monotonic clock, seconds)
and, for per-server records, `s` (the server's index). See docs/recording.md."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from mtpwatch.core.http.generation import RequestSpecMetrics, StreamEvent
from mtpwatch.core.metrics.snapshot import SNAPSHOT_PREFIXES

VERSION = 1
"""Bumped when a reader of the previous version could misread a record."""


def filter_page(text: str) -> list[str]:
    """The lines of a /metrics page that `core.metrics.snapshot` reads (its SNAPSHOT_PREFIXES; the
    rest never reaches a number the app shows: docs/recording.md). An OpenMetrics page (vLLM's Rust
    frontend) keeps its `# EOF`: the replayed page reads as OpenMetrics too (`snapshot.speculating`)."""
    return [line for line in text.splitlines() if line.startswith(SNAPSHOT_PREFIXES) or line == "# EOF"]


def page_delta(before: Sequence[str] | None, after: Sequence[str]) -> dict[str, Any]:
    """`after` as a change to `before`: {'n': lines, 'c': [[index, line], ...]}, or {'page': [...]}."""
    if before is None or len(before) != len(after):
        return {"page": list(after)}
    changed = [[i, line] for i, (old, line) in enumerate(zip(before, after, strict=True)) if old != line]
    return {"n": len(after), "c": changed}


def apply_delta(before: Sequence[str] | None, record: Mapping[str, Any]) -> list[str]:
    """Inverse of `page_delta`; raises `ValueError` for a delta without the page it changes (a corrupt
    file)."""
    if "page" in record:
        return [str(line) for line in record["page"]]
    if before is None or len(before) != int(record["n"]):
        raise ValueError("a page delta without its previous page")
    lines = list(before)
    for i, line in record["c"]:
        lines[int(i)] = str(line)
    return lines


#: StreamEvent field → (record key, default): written only when it differs from its default, and
#: read back with the default's type (token ids as a tuple of ints).
_EVENT_KEYS: dict[str, tuple[str, Any]] = {
    "text": ("x", ""),
    "token_ids": ("ids", None),
    "finish_reason": ("fin", None),
    "reasoning": ("r", ""),
    "output": ("o", True),
    "estimated": ("est", False),
    "exact": ("ex", True),
    "prompt_tokens": ("pt", None),
}


def encode_event(event: StreamEvent) -> dict[str, Any]:
    """A stream event as a compact record body (defaults left out)."""
    out: dict[str, Any] = {"t": event.t, "n": event.tokens, "ct": event.completion_tokens}
    for name, (short, default) in _EVENT_KEYS.items():
        value = getattr(event, name)
        if value != default:
            out[short] = list(value) if name == "token_ids" else value
    if event.spec_metrics is not None:
        out["sm"] = dataclasses.asdict(event.spec_metrics)
    return out


def decode_event(record: Mapping[str, Any]) -> StreamEvent:
    """Inverse of `encode_event`."""
    fields: dict[str, Any] = {}
    for name, (short, default) in _EVENT_KEYS.items():
        value = record.get(short, default)
        fields[name] = value if default is None else type(default)(value)
    if fields["token_ids"] is not None:
        fields["token_ids"] = tuple(int(i) for i in fields["token_ids"])
    sm = record.get("sm")
    return StreamEvent(
        t=float(record["t"]),
        tokens=int(record["n"]),
        completion_tokens=int(record["ct"]),
        spec_metrics=RequestSpecMetrics.from_json(sm) if sm is not None else None,
        **fields,
    )
