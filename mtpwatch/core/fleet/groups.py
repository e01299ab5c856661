"""A fleet summarised by group, for fleets too large to read row by row (hundreds to thousands).

A group is the rows with the same engine schema, model, method and k (`outliers.group_key`: the
rows an outlier is judged against). Per group: how many rows are up / idle / restarted / stale /
down / missing, the p10 / p50 / p90 of acceptance, mean acceptance length and tok/s over the rows
that have the number, and its outliers. Groups with outliers or rows not up come first; then the
largest. Quantiles are the "inclusive" method of `statistics.quantiles` (linear between the order
statistics, p0 = min, p100 = max), so p50 is the median the outlier rule uses.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtpwatch.core.fleet.outliers import GroupKey, group_key
from mtpwatch.core.fleet.rows import FleetRow

STATES = ("up", "idle", "restarted", "stale", "down", "missing", "connecting")
"""Row states in the order a group counts them."""

Spread = tuple[float, float, float]
"""(p10, p50, p90)."""


def quantiles(values: Sequence[float]) -> Spread | None:
    """(p10, p50, p90) of `values`; None when empty; one value is its own spread."""
    if not values:
        return None
    if len(values) == 1:
        return values[0], values[0], values[0]
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return deciles[0], statistics.median(values), deciles[8]


@dataclass(frozen=True, slots=True)
class FleetGroup:
    key: GroupKey
    rows: tuple[FleetRow, ...]
    counts: dict[str, int]
    """Rows per state (every state of `STATES`, zeros included)."""
    acceptance: Spread | None
    mean_length: Spread | None
    tok_s: Spread | None
    outliers: tuple[FleetRow, ...]

    @property
    def name(self) -> str:
        _, model, method, k = self.key
        return f"{model} · {method} k={'?' if k is None else k}"

    @property
    def attention(self) -> int:
        """Rows someone should look at: outliers, and rows stale, down or missing."""
        return len(self.outliers) + sum(self.counts[s] for s in ("stale", "down", "missing"))


def summarise(rows: Sequence[FleetRow]) -> list[FleetGroup]:
    """The groups of `rows` (outliers already marked): those needing attention first, then the largest."""
    by: dict[GroupKey, list[FleetRow]] = {}
    for row in rows:
        by.setdefault(group_key(row), []).append(row)
    groups = []
    for key, members in by.items():
        counts = dict.fromkeys(STATES, 0) | Counter(r.state for r in members)
        live = [r for r in members if r.state in ("up", "idle", "restarted")]
        acc = [r.acceptance for r in live if r.acceptance is not None and r.drafts > 0]
        mal = [r.mean_length for r in live if r.mean_length is not None and r.drafts > 0]
        tps = [r.decode_tok_s for r in live if r.decode_tok_s is not None and r.generation_tokens > 0]
        groups.append(
            FleetGroup(
                key=key,
                rows=tuple(members),
                counts=counts,
                acceptance=quantiles(acc),
                mean_length=quantiles(mal),
                tok_s=quantiles(tps),
                outliers=tuple(r for r in members if r.outliers),
            )
        )
    groups.sort(key=lambda g: (-g.attention, -len(g.rows), g.name))
    return groups


def _spread(s: Spread | None, nd: int) -> dict[str, float] | None:
    return None if s is None else {"p10": round(s[0], nd), "p50": round(s[1], nd), "p90": round(s[2], nd)}


def group_dict(g: FleetGroup) -> dict[str, Any]:
    """One group as JSON: its key, counts, spreads and outliers (each with why)."""
    schema, model, method, k = g.key
    return {
        "schema": schema,
        "model": model,
        "method": method,
        "k": k,
        "instances": len(g.rows),
        "counts": g.counts,
        "acceptance_rate": _spread(g.acceptance, 4),
        "mean_acceptance_length": _spread(g.mean_length, 4),
        "decode_tok_s": _spread(g.tok_s, 2),
        "outliers": [{"source": r.name, "flags": list(r.outliers), "why": list(r.why)} for r in g.outliers],
        "not_live": [
            {"source": r.name, "state": r.state, "reason": r.reason or None}
            for r in g.rows
            if r.state in ("stale", "down", "missing")
        ],
    }
