"""One target's cumulative counters from Prometheus: what the single-server monitor reads for a
fleet row (`session.prometheus`), as a direct scrape of that server would give them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from mtpwatch.core.metrics.snapshot import MetricsSnapshot, Schema
from mtpwatch.core.sources.prometheus import (
    COUNTERS,
    GAUGES,
    NAMES,
    PrometheusSource,
    check_selector,
    counters_snapshot,
    label_value,
    points,
    position_of,
    value_of,
    vector,
)

_EXTRA_NAMES: dict[str, tuple[str, ...]] = {
    "itl_count": ("vllm:inter_token_latency_seconds_count",),
    "itl_sum": ("vllm:inter_token_latency_seconds_sum",),
    "ttft_count": ("vllm:time_to_first_token_seconds_count",),
    "ttft_sum": ("vllm:time_to_first_token_seconds_sum",),
}


def target_queries(
    instance: str, model: str | None, engine: str | None, selector: str = ""
) -> dict[str, str]:
    """PromQL for one target's cumulative counters and gauges (the raw series, not increases):
    what a direct scrape of that server would read, so a `Collector` can take windows of it."""
    matchers = (
        f'instance="{label_value(instance)}"',
        f'model_name="{label_value(model or "")}"',  # "" also matches no label (llama.cpp)
        f'engine="{label_value(engine or "")}"',
        check_selector(selector),
    )
    m = ", ".join(x for x in matchers if x)
    names = NAMES | _EXTRA_NAMES
    q: dict[str, str] = {}
    for key in (*COUNTERS, "prompt_tokens", *_EXTRA_NAMES, *GAUGES):
        q[key] = f"{'avg' if key == 'kv_usage' else 'sum'}({vector(names[key], m)})"
    q["per_position"] = f"sum by (position) ({vector(names['per_position'], m)})"
    q["schema"] = f"count by (__name__) ({vector(names['drafts'] + names['generation_tokens'], m)})"
    return q


async def target_snapshot(
    source: PrometheusSource, instance: str, model: str | None, engine: str | None, at: float | None = None
) -> MetricsSnapshot:
    """One target's counters as Prometheus last saw them (raises PrometheusError; a target Prometheus
    has no series of gives a snapshot with schema "none")."""
    q = target_queries(instance, model, engine, source.selector)
    names = list(q)
    results = await asyncio.gather(*(source.query(q[n], at) for n in names))
    by = dict(zip(names, results, strict=True))
    values: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for key in (n for n in names if n != "schema"):
        for item in by[key]:
            v = value_of(item)
            if v is None:
                continue
            if key != "per_position":
                values[key] = v
            elif (pos := position_of(item.get("metric", {}))) is not None:
                per_pos[pos] = v
    schema, drafts_series = _schema(by["schema"])
    if schema == "none":
        return MetricsSnapshot()
    return counters_snapshot(model, values, per_pos, schema, drafts_series)


def _schema(present: Iterable[Mapping[str, Any]]) -> tuple[Schema, bool]:
    """(schema, whether a drafts series exists) from the `schema` query's series ("none": no series)."""
    names = {str(item.get("metric", {}).get("__name__", "")) for item in present}
    if not names:
        return "none", False
    schema: Schema = "llamacpp" if any(n.startswith("llamacpp:") for n in names) else "vllm"
    return schema, any(n.endswith("spec_decode_num_drafts_total") for n in names)


async def target_history(
    source: PrometheusSource,
    instance: str,
    model: str | None,
    engine: str | None,
    *,
    span_s: float,
    step_s: float,
    end: float | None = None,
) -> list[tuple[float, MetricsSnapshot]]:
    """(Unix time, snapshot) every `step_s` over the last `span_s` seconds: history from before the
    monitor started, for its windows and charts (range queries of the raw counters)."""
    t1 = source.clock() if end is None else end
    t0 = t1 - span_s
    q = target_queries(instance, model, engine, source.selector)
    names = [n for n in q if n != "schema"]
    results = await asyncio.gather(*(source.query_range(q[n], t0, t1, step_s) for n in names))
    schema, drafts_series = _schema(await source.query(q["schema"], t1))
    if schema == "none":
        return []
    at: dict[float, dict[str, float]] = {}
    pos_at: dict[float, dict[int, float]] = {}
    for name, matrix in zip(names, results, strict=True):
        for item in matrix:
            pos = position_of(item.get("metric", {}))
            for t, v in points(item):
                if name != "per_position":
                    at.setdefault(t, {})[name] = v
                elif pos is not None:
                    pos_at.setdefault(t, {})[pos] = v
    return [
        (t, counters_snapshot(model, at[t], pos_at.get(t, {}), schema, drafts_series)) for t in sorted(at)
    ]
