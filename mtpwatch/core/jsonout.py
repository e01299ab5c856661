"""JSON output that stays JSON: NaN and ±Infinity (invalid JSON) become null."""

from __future__ import annotations

import json
import math
from typing import Any


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float inside dicts, lists and tuples replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def round_or_none(x: float | None, nd: int) -> float | None:
    """`x` rounded to `nd` digits for a JSON field; None for None and NaN."""
    return None if x is None or math.isnan(x) else round(x, nd)


def dumps(value: Any, **kwargs: Any) -> str:
    """`json.dumps` of `json_safe(value)`, refusing NaN (so a slip raises instead of writing bad JSON)."""
    return json.dumps(json_safe(value), allow_nan=False, **kwargs)
