"""The JSON document of a fleet: its groups (`groups`), every row with its outlier marks, the rule, the
window and the source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mtpwatch.core.fleet.groups import group_dict, summarise
from mtpwatch.core.fleet.outliers import OUTLIER_RULE
from mtpwatch.core.fleet.rows import FleetRow


def fleet_report(
    rows: Sequence[FleetRow],
    *,
    window_s: float,
    source: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """{"source", "window_s", "outlier_rule", "groups", "rows", "outliers": [names], ...extra}."""
    return {
        "source": source,
        "window_s": window_s,
        "scope": "engine-wide (all requests on each engine)",
        "outlier_rule": OUTLIER_RULE,
        "groups": [group_dict(g) for g in summarise(rows)],
        "rows": [r.to_json() for r in rows],
        "outliers": [r.name for r in rows if r.outliers],
        **(extra or {}),
    }
