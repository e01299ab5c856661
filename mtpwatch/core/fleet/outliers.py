"""The outlier rule of the fleet view, in words in `OUTLIER_RULE`: a row whose acceptance, tok/s or k
is far from its group's (`group_key`), judged against its peers: the other rows of the group that
have the number.

Why so: with one peer nothing says which of the two is the odd one, hence `MIN_PEERS`; robust
statistics (median, MAD) keep one collapsed server from hiding itself by dragging the mean down, and
leaving the row out of its own reference keeps it from diluting the evidence against it. A row with
an uncommon k is flagged ("k") because its own group is then too small to judge its numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from mtpwatch.core.fleet.rows import FleetRow

MAD_FACTOR = 3.0
"""x is far when |x − median| exceeds this many MADs of the peers …"""
REL_FLOOR = 0.25
"""… and more than this fraction of the peers' median (so tight, identical peers do not flag noise)."""
MIN_PEERS = 2
"""Rows needed besides the one judged."""

OUTLIER_RULE = (
    "A row is marked ⚠ (outlier) when its acceptance or its tok/s differs from the median m of the "
    "other rows of its group (same engine schema, model, method and k) by more than "
    "max(3 × MAD, 25 % of m) (MAD: their median absolute deviation). It needs at least 2 such other "
    "rows with the number in the window (acceptance: drafts in the window; tok/s: tokens in the "
    "window). A row whose k differs from the k that most rows of its model and method run (more "
    "than half, at least 2 others) is marked too."
)
"""The rule in words, for the help screen and the JSON documents."""


GroupKey = tuple[str, str, str, int | None]
"""(schema, model, method, k) of a row's group."""


def group_key(row: FleetRow) -> GroupKey:
    """The group a row is judged in and summarised with."""
    return row.schema, row.model or "?", row.method, row.k


def _acceptance(row: FleetRow) -> float | None:
    return row.acceptance if row.drafts > 0 else None


def _tok_s(row: FleetRow) -> float | None:
    return row.decode_tok_s if row.generation_tokens > 0 else None


_METRICS: tuple[tuple[str, Callable[[FleetRow], float | None], str], ...] = (
    ("acceptance", _acceptance, ".3f"),
    ("tok/s", _tok_s, ".0f"),
)

_JUDGED_OUT = ("down", "connecting", "stale", "missing")


def _k_flags(rows: Sequence[FleetRow], flags: dict[int, list[tuple[str, str]]]) -> None:
    """Rows whose k is not the k most of their (schema, model, method) run."""
    families: dict[tuple[str, str, str], list[int]] = {}
    for i, row in enumerate(rows):
        if row.model is not None and row.k is not None and row.state not in _JUDGED_OUT:
            families.setdefault(group_key(row)[:3], []).append(i)
    for members in families.values():
        common, n_common = Counter(rows[i].k for i in members).most_common(1)[0]
        if n_common * 2 <= len(members) or n_common < MIN_PEERS:
            continue
        for i in members:
            if rows[i].k != common:
                why = f"k={rows[i].k} where {n_common} of {len(members)} of {rows[i].model} run k={common}"
                flags.setdefault(i, []).append(("k", why))


def _loo_medians(values: Sequence[float]) -> list[float]:
    """For every i, the median of all values but the i-th (exact, one sort: a group of 200 costs
    what one median of it costs, not 200)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranked = [values[i] for i in order]
    rank = [0] * len(values)
    for r, i in enumerate(order):
        rank[i] = r
    n = len(values) - 1  # values left
    out = []
    for i in range(len(values)):
        r = rank[i]

        def at(k: int, r: int = r) -> float:
            return ranked[k] if k < r else ranked[k + 1]

        out.append(at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2)
    return out


def _leave_one_out(values: Sequence[float]) -> list[tuple[float, float]]:
    """For every value, (median, MAD) of the others, for a whole group at once (the leave-one-out
    median takes at most three values, so the deviations are sorted at most thrice)."""
    medians = _loo_medians(values)
    mads = [0.0] * len(values)
    for m in set(medians):
        loo = _loo_medians([abs(x - m) for x in values])
        for j, mj in enumerate(medians):
            if mj == m:
                mads[j] = loo[j]
    return list(zip(medians, mads, strict=True))


def mark_outliers(rows: Sequence[FleetRow]) -> list[FleetRow]:
    """The rows in the same order with `outliers` and `why` set by the rule (rows down, stale,
    missing or without a model: none)."""
    groups: dict[GroupKey, list[int]] = {}
    for i, row in enumerate(rows):
        if row.model is not None and row.state not in _JUDGED_OUT:
            groups.setdefault(group_key(row), []).append(i)
    flags: dict[int, list[tuple[str, str]]] = {}
    for members in groups.values():
        for name, get, fmt in _METRICS:
            known = [(i, v) for i in members if (v := get(rows[i])) is not None]
            if len(known) - 1 < MIN_PEERS:
                continue
            values = [v for _, v in known]
            for (i, v), (m, mad) in zip(known, _leave_one_out(values), strict=True):
                if abs(v - m) > max(MAD_FACTOR * mad, REL_FLOOR * abs(m)):
                    why = f"{name} {v:{fmt}} vs its group's median {m:{fmt}}"
                    why += f" (MAD {mad:{fmt}}, {len(values) - 1} peers)"
                    flags.setdefault(i, []).append((name, why))
    _k_flags(rows, flags)
    return [
        replace(
            row,
            outliers=tuple(n for n, _ in flags.get(i, ())),
            why=tuple(w for _, w in flags.get(i, ())),
        )
        for i, row in enumerate(rows)
    ]
