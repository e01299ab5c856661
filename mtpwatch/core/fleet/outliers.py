"""The outlier rule of the fleet view: a row whose acceptance or tok/s is far from its peers'.

Peers are the other rows with the same model and k that have the number (acceptance needs drafts in
the window; tok/s needs tokens in it). With m and MAD the median and the median absolute deviation of
the peers' values, a row is an outlier when |x − m| > max(3 × MAD, 25 % of m). At least two peers are
needed: with one, nothing says which of the two is the odd one. Robust statistics (median, MAD)
keep one collapsed server from hiding itself by dragging the mean down, and leaving the row out of
its own reference keeps it from diluting the evidence against it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace

from mtpwatch.core.fleet.rows import FleetRow

__all__ = ["MAD_FACTOR", "MIN_PEERS", "OUTLIER_RULE", "REL_FLOOR", "is_outlier", "mark_outliers"]

MAD_FACTOR = 3.0
"""x is far when |x − median| exceeds this many MADs of the peers …"""
REL_FLOOR = 0.25
"""… and more than this fraction of the peers' median (so tight, identical peers do not flag noise)."""
MIN_PEERS = 2
"""Rows needed besides the one judged."""

OUTLIER_RULE = (
    "A row is marked ⚠ (outlier) when its acceptance or its tok/s differs from the median m of the "
    "other rows with the same model and k by more than max(3 × MAD, 25 % of m) (MAD: their median "
    "absolute deviation). It needs at least 2 such other rows with the number in the window "
    "(acceptance: drafts in the window; tok/s: tokens in the window)."
)
"""The rule in words, for the help screen and the JSON documents."""


def is_outlier(value: float, peers: Sequence[float]) -> bool:
    """The rule for one value against its peers' values (False with fewer than `MIN_PEERS` peers)."""
    if len(peers) < MIN_PEERS:
        return False
    m = statistics.median(peers)
    mad = statistics.median(abs(p - m) for p in peers)
    return abs(value - m) > max(MAD_FACTOR * mad, REL_FLOOR * abs(m))


def _acceptance(row: FleetRow) -> float | None:
    return row.acceptance if row.drafts > 0 else None


def _tok_s(row: FleetRow) -> float | None:
    return row.decode_tok_s if row.generation_tokens > 0 else None


_METRICS: tuple[tuple[str, Callable[[FleetRow], float | None]], ...] = (
    ("acceptance", _acceptance),
    ("tok/s", _tok_s),
)


def mark_outliers(rows: Sequence[FleetRow]) -> list[FleetRow]:
    """The rows in the same order with `outliers` set by the rule (rows down or without a model: none)."""
    groups: dict[tuple[str | None, int | None], list[int]] = {}
    for i, row in enumerate(rows):
        if row.model is not None and row.state not in ("down", "connecting", "stale"):
            groups.setdefault((row.model, row.k), []).append(i)
    flags: dict[int, list[str]] = {}
    for members in groups.values():
        for name, get in _METRICS:
            values = {i: get(rows[i]) for i in members}
            known = {i: v for i, v in values.items() if v is not None}
            for i, v in known.items():
                peers = [p for j, p in known.items() if j != i]
                if is_outlier(v, peers):
                    flags.setdefault(i, []).append(name)
    return [replace(row, outliers=tuple(flags.get(i, ()))) for i, row in enumerate(rows)]
