"""JSON output that stays JSON: NaN and ±Infinity (invalid JSON) become null; the one dataclass
encoder (`JsonFields`; tuples become lists, mappings dicts, a value with its own `to_json` itself)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple


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


class _Key(NamedTuple):
    name: str | None
    nd: int | None
    times: float
    per: float
    omit: bool
    str_keys: bool = False


_PLAIN = _Key(None, None, 1.0, 1.0, False)


def key(
    name: str | None = None,
    *,
    nd: int | None = None,
    times: float = 1.0,
    per: float = 1.0,
    omit: bool = False,
    str_keys: bool = False,
) -> dict[str, Any]:
    """A field's (or, in `JSON_PROPS`, a property's) metadata for `JsonFields`: written as `name`, as
    round(value × times / per, nd) (NaN: null), a mapping's keys as sorted strings, or not at all."""
    return {"json": _Key(name, nd, times, per, omit, str_keys)}


def _encode(value: Any, how: _Key) -> Any:
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int | float):
        scaled = value * how.times / how.per if (how.times, how.per) != (1.0, 1.0) else value
        return scaled if how.nd is None else round_or_none(scaled, how.nd)
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Mapping) and how.str_keys:
        return {str(k): _encode(v, how) for k, v in sorted(value.items())}
    if isinstance(value, Mapping):
        return {k: _encode(v, how) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v, how) for v in value]
    return value


class JsonFields:
    """A dataclass's `to_json()`: every field in order, as its `key(...)` metadata says (none: as is);
    a class whose document also holds properties names them all, in order, in `JSON_KEYS` (one string,
    names apart by spaces, as `namedtuple` takes them), and gives a property its `key(...)` in
    `JSON_PROPS`."""

    __slots__ = ()
    JSON_KEYS: ClassVar[str] = ""
    JSON_PROPS: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    def to_json(self) -> dict[str, Any]:
        how = {name: m["json"] for name, m in self.JSON_PROPS.items()}
        how |= {f.name: f.metadata.get("json", _PLAIN) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        out: dict[str, Any] = {}
        for name in self.JSON_KEYS.split() or how:
            spec = how.get(name, _PLAIN)
            if not spec.omit:
                out[spec.name or name] = _encode(getattr(self, name), spec)
        return out
