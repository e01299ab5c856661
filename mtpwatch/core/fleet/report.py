"""The JSON document of a fleet: its groups (`groups`), every row with its outlier marks, the rule, the
window and the source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mtpwatch.core.fleet.groups import group_dict, summarise
from mtpwatch.core.fleet.outliers import OUTLIER_RULE
from mtpwatch.core.fleet.rows import FleetRow
from mtpwatch.core.jsonout import round_or_none


def row_dict(row: FleetRow) -> dict[str, Any]:
    """One row as JSON (rounded for reading; the counts are exact)."""
    return {
        "source": row.source,
        "model": row.model,
        "engine": row.engine,
        "schema": row.schema,
        "method": row.method,
        "k": row.k,
        "state": row.state,
        "reason": row.reason or None,
        "window_s": round_or_none(row.window_s, 3),
        "decode_tok_s": round_or_none(row.decode_tok_s, 2),
        "acceptance_rate": round_or_none(row.acceptance, 4),
        "mean_acceptance_length": round_or_none(row.mean_length, 4),
        "per_position": [round(p, 4) for p in row.per_position],
        "drafts": row.drafts,
        "draft_tokens": row.draft_tokens,
        "accepted_tokens": row.accepted,
        "generation_tokens": row.generation_tokens,
        "kv_cache_usage": round_or_none(row.kv_usage, 4),
        "requests_running": row.running,
        "requests_waiting": row.waiting,
        "outlier": bool(row.outliers),
        "outliers": list(row.outliers),
        "why": list(row.why),
    }


def fleet_report(
    rows: Sequence[FleetRow],
    *,
    window_s: float,
    source: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """{"source", "window_s", "outlier_rule", "groups", "rows", "outliers": [names], ...extra}."""
    doc: dict[str, Any] = {
        "source": source,
        "window_s": window_s,
        "scope": "engine-wide (all requests on each engine)",
        "outlier_rule": OUTLIER_RULE,
        "groups": [group_dict(g) for g in summarise(rows)],
        "rows": [row_dict(r) for r in rows],
        "outliers": [r.name for r in rows if r.outliers],
    }
    if extra:
        doc.update(extra)
    return doc
