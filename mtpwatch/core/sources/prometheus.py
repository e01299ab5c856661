"""Fleet rows from a Prometheus server (HTTP API), for fleets mtpwatch cannot scrape directly.

Every number is one PromQL query over the chosen window W, grouped by `GROUP_BY` (and `position` for
the per-position counter), for vLLM's and llama.cpp's names at once:

- counters: `sum by (…) (increase(NAME[W]))` for drafts, draft tokens, accepted tokens, generated
  tokens and accepted-per-position. Prometheus' own `increase()` handles counter resets (a restarted
  server) and extrapolates to the window's edges; the ratios shown are then vLLM's formulas, applied
  by `core.metrics.rates.delta_rates` to these increases exactly as to direct deltas. Extrapolation
  multiplies every counter of one target by the same factor (their samples share timestamps), so it
  cancels in the ratios; tok/s = increase / W carries it.
- gauges: the newest sample of running / waiting requests and KV-cache use.
- freshness: `timestamp()` of the newest generated-tokens sample and `up` per instance (`up == 0`:
  "down"); ages at the store's own time, "stale", "missing" (`probe_queries`) and the window's fit
  to its scrape interval and history: `core.sources.prometheus_fit`; `resets()` marks a restart.
- history: `rate()` of generated tokens as a range query (what the fleet view draws as a sparkline),
  which reaches back before mtpwatch started.

Older vLLM without the per-position series still gets acceptance and mean length (k is then
estimated as Δdraft_tokens / Δdrafts, which vLLM keeps equal to k; llama.cpp drafts vary in length).
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from mtpwatch.core import jsonout
from mtpwatch.core.fleet.outliers import mark_outliers
from mtpwatch.core.fleet.rows import FleetRow, build_row
from mtpwatch.core.http.urls import normalize_url
from mtpwatch.core.metrics.rates import delta_rates
from mtpwatch.core.metrics.snapshot import COUNTER_FIELDS, FAMILY_NAMES, Fold, MetricsSnapshot, Schema
from mtpwatch.core.sources.prometheus_fit import (
    INTERVAL_INSTANCES,
    INTERVAL_SPAN_S,
    SEEN_S,
    Key,
    StoreFit,
    finish_row,
    fit_window,
    history_note,
    median_gap,
    missing_rows,
    stale_limit,
)

GROUP_BY = ("instance", "model_name", "engine", "spec_method")
"""Labels every query keeps: one row per target, model and engine (data-parallel rank); `spec_method`
is a target label a scrape config may set (vLLM does not export the method)."""
_BY = ", ".join(GROUP_BY)

COUNTERS = ("drafts", "draft_tokens", "accepted", "generation_tokens")
GAUGES = ("running", "waiting", "kv_usage")
_FIELDS = {
    # query key -> `MetricsSnapshot` field (a counter's key is its field), named by `snapshot.FAMILY_NAMES`
    **{key: key for key in COUNTERS},
    "per_position": "accepted_per_pos",
    "prompt_tokens": "prompt_tokens",
    "running": "requests_running",
    "waiting": "requests_waiting",
    "kv_usage": "kv_cache_usage",
}
NAMES: dict[str, tuple[str, ...]] = {
    key: tuple(
        f"{schema}:{name}" for schema, name in zip(("vllm", "llamacpp"), FAMILY_NAMES[field], strict=True)
    )
    for key, field in _FIELDS.items()
}
"""Query key -> (vLLM name, llama.cpp name)."""
_SELECTOR = re.compile(r'^\{\s*(?:[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*,?\s*)*\}$')


class PrometheusError(Exception):
    """Prometheus cannot be reached or refused a query; `str()` is one line a user can act on."""


def check_selector(selector: str) -> str:
    """'{job="vllm"}' (or '' for none) → the matchers inside the braces; raises ValueError with one line."""
    text = selector.strip()
    if not text:
        return ""
    if not text.startswith("{"):
        text = "{" + text + "}"
    if not _SELECTOR.match(text):
        raise ValueError(f"--selector {selector!r} is not a PromQL label selector such as '{{job=\"vllm\"}}'")
    return text[1:-1].strip().rstrip(",").strip()


def vector(names: Iterable[str], matchers: str) -> str:
    """The series of any of `names` that match `matchers` (a checked selector's inside, or '')."""
    extra = f", {matchers}" if matchers else ""
    return f'{{__name__=~"{"|".join(map(re.escape, names))}"{extra}}}'.replace("\\:", ":")


def promql_queries(window_s: float, selector: str = "") -> dict[str, str]:
    """Every query the source runs, by what it gives (for the help screen: paste them into Grafana)."""
    matchers = check_selector(selector)
    w = f"[{_duration(window_s)}]"
    gen = f"{vector(NAMES['generation_tokens'], matchers)}{w}"
    q = {key: f"sum by ({_BY}) (increase({vector(NAMES[key], matchers)}{w}))" for key in COUNTERS}
    q["per_position"] = f"sum by ({_BY}, position) (increase({vector(NAMES['per_position'], matchers)}{w}))"
    q["tok_s"] = f"sum by ({_BY}) (rate({gen}))"
    for key in GAUGES:
        q[key] = f"{'avg' if key == 'kv_usage' else 'sum'} by ({_BY}) ({vector(NAMES[key], matchers)})"
    extra = f", {matchers}" if matchers else ""
    # One query per name: timestamp() drops the name, so one query over all four would mix them, and
    # timestamp() of anything but a plain selector (label_replace(…) to keep the name) is the
    # evaluation time in Prometheus, not the sample's: every series would look fresh.
    for key in ("generation_tokens", "drafts"):
        for name in NAMES[key]:
            q[f"{LAST_SAMPLE}{name}"] = f'max by ({_BY}) (timestamp({{__name__="{name}"{extra}}}))'
    # only the answers that change a row: targets down, series that reset (not one series per target)
    q["up"] = (f"up{{{matchers}}}" if matchers else "up") + " == 0"
    q["resets"] = f"sum by ({_BY}) (resets({gen})) > 0"
    q["samples"] = f"max(count_over_time({gen}))"
    q["store_time"] = "vector(time())"
    return q


def probe_queries(selector: str = "") -> dict[str, str]:
    """The slower queries run once a minute: what was seen in the last hour (k from the per-position
    series), and (`interval_query`) the raw samples of a few of those instances."""
    matchers = check_selector(selector)
    seen = f"[{_duration(SEEN_S)}]"
    gen = vector(NAMES["generation_tokens"], matchers)
    return {
        "seen": f"count by ({_BY}) (last_over_time({gen}{seen}))",
        "seen_k": f"count by ({_BY}) (last_over_time({vector(NAMES['per_position'], matchers)}{seen}))",
    }


def interval_query(instance: str, selector: str = "") -> str:
    """The raw generated-tokens samples of one instance over the last 10 minutes (a range selector in
    an instant query answers the samples themselves, on Prometheus and VictoriaMetrics alike)."""
    matchers = check_selector(selector)
    one = f'instance="{label_value(instance)}"' + (f", {matchers}" if matchers else "")
    return f"{vector(NAMES['generation_tokens'], one)}[{_duration(INTERVAL_SPAN_S)}]"


def label_value(value: str) -> str:
    """`value` escaped for a PromQL label matcher's double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _duration(seconds: float) -> str:
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


@dataclass
class _Group:
    instance: str
    model: str | None
    engine: str | None
    schema: Schema = "vllm"
    counters: dict[str, float] = field(default_factory=dict)
    per_pos: dict[int, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    last_sample: float | None = None
    has_drafts_series: bool = False
    method: str | None = None


def _key(metric: Mapping[str, str]) -> Key:
    return metric.get("instance", "?"), metric.get("model_name"), metric.get("engine")


def value_of(item: Mapping[str, Any]) -> float | None:
    try:
        v = float(item["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def position_of(metric: Mapping[str, str]) -> int | None:
    """The `position` label of a per-position series; None when it is not a number."""
    try:
        return int(metric.get("position", ""))
    except ValueError:
        return None


def points(item: Mapping[str, Any]) -> Iterator[tuple[float, float]]:
    """The finite (Unix time, value) samples of one series of a range query's matrix."""
    for ts, raw in item.get("values", []):
        try:
            t, v = float(ts), float(raw)
        except (TypeError, ValueError):
            continue
        if math.isfinite(v):
            yield t, v


HISTORY_ONLY = ("tok_s",)
"""Queries `read` runs only as range queries (tok/s is the generated tokens' increase / window)."""
LAST_SAMPLE = "last_sample "
"""Prefix of the freshness queries' names (one per metric name)."""


def _groups(by_name: Mapping[str, list[dict[str, Any]]]) -> dict[Key, _Group]:
    """The instant queries' results gathered per (instance, model, engine)."""
    groups: dict[Key, _Group] = {}

    def group(metric: Mapping[str, str]) -> _Group:
        key = _key(metric)
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(*key)
        g.method = g.method or metric.get("spec_method")
        return g

    for query, result in by_name.items():
        if not query.startswith(LAST_SAMPLE):
            continue
        name = query.removeprefix(LAST_SAMPLE)
        for item in result:
            metric = item.get("metric", {})
            if not metric.get("instance"):
                continue
            g = group(metric)
            g.schema = "llamacpp" if name.startswith("llamacpp:") else "vllm"
            g.has_drafts_series = g.has_drafts_series or name.endswith("spec_decode_num_drafts_total")
            v = value_of(item)
            if v is not None:
                g.last_sample = v if g.last_sample is None else max(g.last_sample, v)
    for key in (*COUNTERS, *GAUGES):
        for item in by_name[key]:
            g = group(item.get("metric", {}))
            v = value_of(item)
            if v is not None:
                (g.counters if key in COUNTERS else g.gauges)[key] = v
    for item in by_name["per_position"]:
        metric = item.get("metric", {})
        g = group(metric)
        v, pos = value_of(item), position_of(metric)
        if v is not None and pos is not None:
            g.per_pos[pos] = v
    return groups


def _down(by_name: Mapping[str, list[dict[str, Any]]]) -> dict[str, bool]:
    """Per instance: whether Prometheus's `up` says its target is down."""
    answers = ((item.get("metric", {}).get("instance"), value_of(item)) for item in by_name["up"])
    return {inst: v < 1 for inst, v in answers if inst is not None and v is not None}


@dataclass
class QueryStats(jsonout.JsonFields):
    """What the store was asked and answered: queries, series returned, response bytes, seconds."""

    queries: int = 0
    series: int = 0
    bytes: int = 0
    seconds: float = field(default=0.0, metadata=jsonout.key(nd=3))


@dataclass(frozen=True)
class FleetRead:
    """One refresh: the rows (outliers marked), how the window fit the store, what it cost."""

    rows: list[FleetRow]
    fit: StoreFit
    stats: QueryStats
    at: float
    """The time asked (Unix s); the store evaluated at `at − fit.lag_s`."""


class PrometheusSource:
    """Reads fleet rows from Prometheus' HTTP API (`/api/v1/query`, `/api/v1/query_range`)."""

    def __init__(
        self,
        url: str,
        *,
        selector: str = "",
        timeout: float = 10.0,
        stale_after_s: float = 15.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`url`: e.g. http://127.0.0.1:9090 (normalised like a server URL); `selector`: extra label
        matchers, e.g. '{job="vllm"}' (checked; ValueError with one line); `timeout`: seconds per
        query; `stale_after_s`: a series whose newest sample is older shows as stale; `transport`:
        httpx's (tests); `clock`: Unix seconds, when queries are evaluated unless `at` is given."""
        self.url = normalize_url(url)
        self.selector = selector
        check_selector(selector)
        self.stale_after_s = stale_after_s
        self.clock = clock
        self._timeout = timeout
        self.stats = QueryStats()
        """What the current refresh asked so far (`read()` starts it afresh and reports it)."""
        self._interval: tuple[float, float | None] | None = None  # (when asked, seconds)
        self._seen: tuple[float, dict[Key, tuple[str | None, int | None]]] | None = None
        self._http = httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(timeout), transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _api(self, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
        try:
            response = await self._http.get(path, params=params)
        except httpx.TimeoutException:
            raise PrometheusError(
                f"Prometheus at {self.url} did not answer within {self._timeout:g} s"
            ) from None
        except httpx.RequestError as exc:
            raise PrometheusError(
                f"cannot reach Prometheus at {self.url}: {exc or type(exc).__name__}"
            ) from None
        try:
            body = response.json()
        except ValueError:
            raise PrometheusError(
                f"{self.url}{path} answered {response.status_code} without JSON"
                " — is this a Prometheus server?"
            ) from None
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise PrometheusError(
                f"Prometheus refused the query ({response.status_code}): {str(error or body)[:200]}"
            )
        data = body.get("data") or {}
        result = data.get("result") if isinstance(data, dict) else None
        self.stats.queries += 1
        self.stats.bytes += len(response.content)
        if not isinstance(result, list):
            return []
        self.stats.series += len(result)
        return result

    async def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query at `at` (Unix seconds; default now); the result vector."""
        t = self.clock() if at is None else at
        return await self._api("/api/v1/query", {"query": promql, "time": f"{t:.3f}"})

    async def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[dict[str, Any]]:
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": _duration(step_s)}
        return await self._api("/api/v1/query_range", params)

    async def read(self, window_s: float, at: float | None = None, *, history_s: float = 0.0) -> FleetRead:
        """One refresh: rows over a window that fits the store (`fit_window`), missing rows listed,
        outliers marked, a tok/s history per row when `history_s` > 0; raises `PrometheusError`."""
        t = self.clock() if at is None else at
        self.stats = spent = QueryStats()
        t0 = time.perf_counter()
        interval, seen = await self._probe(t)
        window, note = fit_window(window_s, interval)
        q = promql_queries(window, self.selector)
        names = [n for n in q if n not in HISTORY_ONLY]
        results = await asyncio.gather(*(self.query(q[n], t) for n in names))
        by_name = dict(zip(names, results, strict=True))
        store_t = _first(by_name["store_time"]) or t
        groups = _groups(by_name)
        down = _down(by_name)
        resets = {_key(i.get("metric", {})) for i in by_name["resets"] if (value_of(i) or 0) > 0}
        history = await self._history(q["tok_s"], t, history_s) if history_s > 0 else {}
        per_instance = Counter(inst for inst, _, _ in groups)
        limit = stale_limit(self.stale_after_s, interval)
        rows: list[FleetRow] = []
        for gkey in sorted(groups, key=lambda k: (k[0], k[1] or "", k[2] or "")):
            g = groups[gkey]
            row = self._row(g, window, store_t, limit, per_instance[gkey[0]], down, history.get(gkey, ()))
            rows.append(finish_row(row, g.method, seen.get(gkey, (None, None))[1], gkey in resets))
        rows += missing_rows(seen, groups)
        notes = [n for n in (note, history_note(window, interval, _first(by_name["samples"]))) if n]
        lag = t - store_t
        if lag > 1:
            notes.append(
                f"the store answers {lag:.0f} s behind (its latency offset): ages are taken at its time"
            )
        fit = StoreFit(window_s, window, interval, lag, tuple(notes))
        spent.seconds = time.perf_counter() - t0
        return FleetRead(mark_outliers(rows), fit, spent, t)

    async def _probe(self, t: float) -> tuple[float | None, dict[Key, tuple[str | None, int | None]]]:
        """The scrape interval (asked every 5 minutes) and the rows seen in the last hour (every minute)."""
        p = probe_queries(self.selector)
        if self._seen is None or t - self._seen[0] > 60:
            gen, ks = await asyncio.gather(self.query(p["seen"], t), self.query(p["seen_k"], t))
            seen: dict[Key, tuple[str | None, int | None]] = {}
            for item in gen:
                metric = item.get("metric", {})
                seen[_key(metric)] = (metric.get("spec_method"), None)
            for item in ks:
                metric = item.get("metric", {})
                v = value_of(item)
                seen[_key(metric)] = (metric.get("spec_method"), int(v) if v else None)
            self._seen = (t, seen)
        if self._interval is None or t - self._interval[0] > 300 or self._interval[1] is None:
            few = sorted({k[0] for k in self._seen[1]})[:INTERVAL_INSTANCES]
            matrices = await asyncio.gather(*(self.query(interval_query(i, self.selector), t) for i in few))
            self._interval = (t, median_gap([item for m in matrices for item in m]))
        return self._interval[1], self._seen[1]

    async def _history(
        self, promql: str, t: float, history_s: float
    ) -> dict[Key, tuple[tuple[float, float], ...]]:
        """A tok/s history per row: a range query over the last `history_s` seconds (about 120 points)."""
        matrix = await self.query_range(promql, t - history_s, t, max(1.0, history_s / 120))
        return {_key(item.get("metric", {})): tuple(points(item)) for item in matrix}

    def _row(
        self,
        g: _Group,
        window_s: float,
        t: float,
        limit_s: float,
        engines: int,
        down: Mapping[str, bool],
        history: tuple[tuple[float, float], ...],
    ) -> FleetRow:
        counters = g.counters
        after = counters_snapshot(g.model, {**counters, **g.gauges}, g.per_pos, g.schema, g.has_drafts_series)
        if g.engine is not None:
            after = replace(after, engines=(g.engine,))
        before = MetricsSnapshot(schema=g.schema, model=g.model)  # positions count from 0 (`delta_rates`)
        rates = delta_rates(before, after, window_s, f"{_duration(window_s)} (Prometheus)")
        reason = ""
        state = None
        est_k: int | None = None
        if after.speculative and not after.accepted_per_pos and after.drafts > 0:
            reason = "no per-position series (older vLLM): k estimated from draft tokens / drafts"
            if g.schema == "vllm":
                est_k = round(after.draft_tokens / after.drafts)
        if down.get(g.instance):
            state, reason = "down", "Prometheus: up == 0 (its scrapes of this target fail)"
        elif g.last_sample is None or t - g.last_sample > limit_s:
            age = "no sample" if g.last_sample is None else f"newest sample {t - g.last_sample:.0f} s old"
            state, reason = "stale", f"Prometheus: {age} (target gone or not scraped)"
        elif not counters:
            state = "idle"
        return build_row(
            g.instance,
            (g.model, g.engine),
            after,
            rates if counters else None,
            engines_on_source=engines,
            state=state,  # type: ignore[arg-type]
            reason=reason,
            k=est_k,
            history=history,
        )


def counters_snapshot(
    model: str | None,
    values: Mapping[str, float],
    per_pos: Mapping[int, float],
    schema: Schema,
    drafts_series: bool,
) -> MetricsSnapshot:
    """A snapshot of counter and gauge values by query name (`COUNTERS`, `GAUGES`, and the target's
    `prompt_tokens`, `itl_count`/`_sum`, `ttft_count`/`_sum`) and accepted tokens by position, folded
    as a page's (`snapshot.Fold`: whether it speculates is the page's rule, a drafts series on vLLM)."""
    fold = Fold(
        sums={name: values[name] for name in COUNTER_FIELDS if name in values},
        gauges={_FIELDS[key]: values[key] for key in GAUGES if key in values},
        per_pos=dict(per_pos),
        hists={
            h: (values[f"{h}_count"], values.get(f"{h}_sum", 0.0))
            for h in ("itl", "ttft")
            if f"{h}_count" in values
        },
        spec_seen=drafts_series,
    )
    return fold.snapshot(schema, model, (), "prometheus")


def _first(result: list[Any]) -> float | None:
    """The value of a one-element vector (`vector(time())`, `max(…)`), None when empty."""
    return value_of(result[0]) if result else None
