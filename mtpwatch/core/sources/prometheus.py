"""Fleet rows from a Prometheus server (HTTP API), for fleets mtpwatch cannot scrape directly.

Every number is one PromQL query over the chosen window W, grouped by `instance`, `model_name` and
`engine` (and `position` for the per-position counter), for vLLM's and llama.cpp's names at once:

- counters: `sum by (…) (increase(NAME[W]))` for drafts, draft tokens, accepted tokens, generated
  tokens and accepted-per-position. Prometheus' own `increase()` handles counter resets (a restarted
  server) and extrapolates to the window's edges; the ratios shown (acceptance = Δaccepted /
  Δdraft_tokens, mean length = 1 + Δaccepted / Δdrafts, per position = Δper_pos / Δdrafts) are then
  vLLM's formulas, applied by `core.metrics.rates.delta_rates` to these increases exactly as to
  direct deltas. Extrapolation multiplies every counter of one target by the same factor (their
  samples share timestamps), so it cancels in the ratios; tok/s = increase / W carries it.
- gauges: the newest sample of running / waiting requests and KV-cache use.
- freshness: `timestamp()` of the newest generated-tokens sample, and `up` per instance: a series
  whose newest sample is older than `stale_after_s` is "stale"; an instance with `up == 0` is "down".
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from mtpwatch.core.fleet.outliers import mark_outliers
from mtpwatch.core.fleet.rows import FleetRow, build_row
from mtpwatch.core.http.urls import normalize_url
from mtpwatch.core.metrics.rates import delta_rates
from mtpwatch.core.metrics.snapshot import Histogram, MetricsSnapshot, Schema

__all__ = ["GROUP_BY", "PrometheusError", "PrometheusSource", "check_selector", "promql_queries"]

GROUP_BY = ("instance", "model_name", "engine")
"""Labels every query keeps: one row per target, model and engine (data-parallel rank)."""

_NAMES: dict[str, tuple[str, str]] = {
    # field -> (vLLM name, llama.cpp name)
    "drafts": ("vllm:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_drafts_total"),
    "draft_tokens": (
        "vllm:spec_decode_num_draft_tokens_total",
        "llamacpp:spec_decode_num_draft_tokens_total",
    ),
    "accepted": (
        "vllm:spec_decode_num_accepted_tokens_total",
        "llamacpp:spec_decode_num_accepted_tokens_total",
    ),
    "generation_tokens": ("vllm:generation_tokens_total", "llamacpp:tokens_predicted_total"),
    "per_position": (
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
    ),
    "running": ("vllm:num_requests_running", "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "llamacpp:requests_deferred"),
    "kv_usage": ("vllm:kv_cache_usage_perc", "llamacpp:kv_cache_usage_ratio"),
}
_COUNTERS = ("drafts", "draft_tokens", "accepted", "generation_tokens")
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
    inner = text[1:-1].strip().rstrip(",").strip()
    return inner


def _vector(key: str, matchers: str) -> str:
    vllm, llamacpp = _NAMES[key]
    extra = f", {matchers}" if matchers else ""
    return f'{{__name__=~"{re.escape(vllm)}|{re.escape(llamacpp)}"{extra}}}'.replace("\\:", ":")


def promql_queries(window_s: float, selector: str = "") -> dict[str, str]:
    """Every query the source runs, by what it gives (for the help screen: paste them into Grafana)."""
    matchers = check_selector(selector)
    w = f"[{_duration(window_s)}]"
    by = ", ".join(GROUP_BY)
    q: dict[str, str] = {}
    for key in _COUNTERS:
        q[key] = f"sum by ({by}) (increase({_vector(key, matchers)}{w}))"
    q["per_position"] = f"sum by ({by}, position) (increase({_vector('per_position', matchers)}{w}))"
    q["tok_s"] = f"sum by ({by}) (rate({_vector('generation_tokens', matchers)}{w}))"
    q["running"] = f"sum by ({by}) ({_vector('running', matchers)})"
    q["waiting"] = f"sum by ({by}) ({_vector('waiting', matchers)})"
    q["kv_usage"] = f"avg by ({by}) ({_vector('kv_usage', matchers)})"
    names = "|".join(
        re.escape(n).replace("\\:", ":") for key in ("drafts", "generation_tokens") for n in _NAMES[key]
    )
    extra = f", {matchers}" if matchers else ""
    # timestamp() drops the metric name; copy it to a label first so the vLLM and llama.cpp series
    # (and drafts vs tokens) stay apart.
    named = f'label_replace({{__name__=~"{names}"{extra}}}, "name", "$1", "__name__", "(.+)")'
    q["last_sample"] = f"max by ({by}, name) (timestamp({named}))"
    q["up"] = f"up{{{matchers}}}" if matchers else "up"
    return q


def _duration(seconds: float) -> str:
    ms = max(1, round(seconds * 1000))
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


@dataclass
class _Group:
    instance: str
    model: str | None
    engine: str | None
    schema: Schema = "vllm"
    counters: dict[str, float] | None = None
    per_pos: dict[int, float] | None = None
    gauges: dict[str, float] | None = None
    last_sample: float | None = None
    has_drafts_series: bool = False


_Key = tuple[str, str | None, str | None]
"""A row: (instance, model_name, engine)."""


def _key(metric: Mapping[str, str]) -> _Key:
    return metric.get("instance", "?"), metric.get("model_name"), metric.get("engine")


def _value(item: Mapping[str, Any]) -> float | None:
    try:
        v = float(item["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _groups(by_name: Mapping[str, list[dict[str, Any]]]) -> dict[_Key, _Group]:
    """The instant queries' results gathered per (instance, model, engine)."""
    groups: dict[_Key, _Group] = {}

    def group(metric: Mapping[str, str]) -> _Group:
        key = _key(metric)
        g = groups.get(key)
        if g is None:
            g = groups[key] = _Group(*key)
        return g

    for item in by_name["last_sample"]:
        metric = item.get("metric", {})
        g = group(metric)
        name = str(metric.get("name", ""))
        g.schema = "llamacpp" if name.startswith("llamacpp:") else "vllm"
        if name.endswith("spec_decode_num_drafts_total"):
            g.has_drafts_series = True
        v = _value(item)
        if v is not None:
            g.last_sample = v if g.last_sample is None else max(g.last_sample, v)
    for key in _COUNTERS:
        for item in by_name[key]:
            g = group(item.get("metric", {}))
            v = _value(item)
            if v is not None:
                g.counters = g.counters or {}
                g.counters[key] = v
    for item in by_name["per_position"]:
        metric = item.get("metric", {})
        g = group(metric)
        v = _value(item)
        try:
            pos = int(metric.get("position", ""))
        except ValueError:
            continue
        if v is not None:
            g.per_pos = g.per_pos or {}
            g.per_pos[pos] = v
    for key in ("running", "waiting", "kv_usage"):
        for item in by_name[key]:
            g = group(item.get("metric", {}))
            v = _value(item)
            if v is not None:
                g.gauges = g.gauges or {}
                g.gauges[key] = v
    return groups


def _down(by_name: Mapping[str, list[dict[str, Any]]]) -> dict[str, bool]:
    """Per instance: whether Prometheus's `up` says its target is down."""
    down: dict[str, bool] = {}
    for item in by_name["up"]:
        inst = item.get("metric", {}).get("instance")
        v = _value(item)
        if inst is not None and v is not None:
            down[inst] = v < 1
    return down


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
        """Args:
        url: Prometheus base URL, e.g. http://127.0.0.1:9090 (normalised like a server URL).
        selector: extra label matchers, e.g. '{job="vllm"}' (checked; ValueError with one line).
        timeout: seconds per query.
        stale_after_s: a series whose newest sample is older than this is shown as stale.
        transport: an httpx transport (tests); None = network.
        clock: wall clock (Unix seconds): queries are evaluated at `clock()` unless `at` is given.
        """
        self.url = normalize_url(url)
        self.selector = selector
        self._matchers = check_selector(selector)
        self.stale_after_s = stale_after_s
        self.clock = clock
        self._timeout = timeout
        self._http = httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(timeout), transport=transport)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    def queries(self, window_s: float) -> dict[str, str]:
        """The PromQL this source runs for `window_s`."""
        return promql_queries(window_s, self.selector)

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
        return result if isinstance(result, list) else []

    async def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query at `at` (Unix seconds; default now); the result vector."""
        t = self.clock() if at is None else at
        return await self._api("/api/v1/query", {"query": promql, "time": f"{t:.3f}"})

    async def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[dict[str, Any]]:
        """A range query; the result matrix."""
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": _duration(step_s)}
        return await self._api("/api/v1/query_range", params)

    async def rows(
        self, window_s: float, at: float | None = None, *, history_s: float = 0.0
    ) -> list[FleetRow]:
        """Fleet rows over the window ending at `at` (default now), outliers marked.

        `history_s` > 0 adds a tok/s history per row from a range query over that many seconds.

        Raises:
            PrometheusError: Prometheus unreachable or a query refused.
        """
        t = self.clock() if at is None else at
        q = self.queries(window_s)
        names = list(q)
        results = await asyncio.gather(*(self.query(q[n], t) for n in names))
        by_name = dict(zip(names, results, strict=True))
        groups = _groups(by_name)
        down = _down(by_name)
        history = await self._history(q["tok_s"], t, history_s) if history_s > 0 else {}
        per_instance: dict[str, int] = {}
        for inst, _, _ in groups:
            per_instance[inst] = per_instance.get(inst, 0) + 1
        rows: list[FleetRow] = []
        for gkey in sorted(groups, key=lambda k: (k[0], k[1] or "", k[2] or "")):
            g = groups[gkey]
            rows.append(self._row(g, window_s, t, per_instance[gkey[0]], down, history.get(gkey, ())))
        return mark_outliers(rows)

    async def _history(
        self, promql: str, t: float, history_s: float
    ) -> dict[_Key, tuple[tuple[float, float], ...]]:
        """A tok/s history per row: a range query over the last `history_s` seconds (about 120 points)."""
        history: dict[_Key, tuple[tuple[float, float], ...]] = {}
        step = max(1.0, history_s / 120)
        for item in await self.query_range(promql, t - history_s, t, step):
            pts = []
            for ts, val in item.get("values", []):
                try:
                    f = float(val)
                except (TypeError, ValueError):
                    continue
                if math.isfinite(f):
                    pts.append((float(ts), f))
            history[_key(item.get("metric", {}))] = tuple(pts)
        return history

    def _row(
        self,
        g: _Group,
        window_s: float,
        t: float,
        engines: int,
        down: Mapping[str, bool],
        history: tuple[tuple[float, float], ...],
    ) -> FleetRow:
        counters = g.counters or {}
        per_pos_map = g.per_pos or {}
        k = (max(per_pos_map) + 1) if per_pos_map else 0
        per_pos = tuple(per_pos_map.get(i, 0.0) for i in range(k))
        gauges = g.gauges or {}
        draft_tokens = counters.get("draft_tokens", 0.0)
        speculative = g.has_drafts_series if g.schema == "vllm" else (bool(per_pos_map) or draft_tokens > 0)
        after = MetricsSnapshot(
            schema=g.schema,
            model=g.model,
            engines=(g.engine,) if g.engine is not None else (),
            speculative=speculative,
            num_speculative_tokens=k,
            drafts=counters.get("drafts", 0.0),
            draft_tokens=draft_tokens,
            accepted=counters.get("accepted", 0.0),
            accepted_per_pos=per_pos,
            generation_tokens=counters.get("generation_tokens", 0.0),
            requests_running=gauges.get("running"),
            requests_waiting=gauges.get("waiting"),
            kv_cache_usage=gauges.get("kv_usage"),
        )
        before = MetricsSnapshot(schema=g.schema, model=g.model, accepted_per_pos=tuple(0.0 for _ in per_pos))
        rates = delta_rates(before, after, window_s, f"{_duration(window_s)} (Prometheus)")
        reason = ""
        state = None
        est_k: int | None = None
        if speculative and not per_pos and after.drafts > 0:
            reason = "no per-position series (older vLLM): k estimated from draft tokens / drafts"
            if g.schema == "vllm":
                est_k = round(draft_tokens / after.drafts)
        if down.get(g.instance):
            state, reason = "down", "Prometheus: up == 0 (its scrapes of this target fail)"
        elif g.last_sample is None or t - g.last_sample > self.stale_after_s:
            age = "no sample" if g.last_sample is None else f"newest sample {t - g.last_sample:.0f} s old"
            state, reason = "stale", f"Prometheus: {age} (target gone or not scraped)"
        elif not counters:
            state = "idle"
        row = build_row(
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
        return row


# -- one target's cumulative counters (the single-server monitor fed from Prometheus) -----------------

_EXTRA_NAMES: dict[str, tuple[str, ...]] = {
    "prompt_tokens": ("vllm:prompt_tokens_total", "llamacpp:prompt_tokens_total"),
    "itl_count": ("vllm:inter_token_latency_seconds_count",),
    "itl_sum": ("vllm:inter_token_latency_seconds_sum",),
    "ttft_count": ("vllm:time_to_first_token_seconds_count",),
    "ttft_sum": ("vllm:time_to_first_token_seconds_sum",),
}


def _label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def target_queries(
    instance: str, model: str | None, engine: str | None, selector: str = ""
) -> dict[str, str]:
    """PromQL for one target's cumulative counters and gauges (the raw series, not increases):
    what a direct scrape of that server would read, so a `Collector` can take windows of it."""
    matchers = [f'instance="{_label_value(instance)}"']
    matchers.append(f'model_name="{_label_value(model or "")}"')  # "" also matches no label (llama.cpp)
    matchers.append(f'engine="{_label_value(engine or "")}"')
    extra = check_selector(selector)
    if extra:
        matchers.append(extra)
    m = ", ".join(matchers)

    def names(key: str) -> str:
        found = _NAMES.get(key) or _EXTRA_NAMES[key]
        return "|".join(found)

    q: dict[str, str] = {}
    for key in (
        *_COUNTERS,
        "prompt_tokens",
        "itl_count",
        "itl_sum",
        "ttft_count",
        "ttft_sum",
        "running",
        "waiting",
    ):
        q[key] = f'sum({{__name__=~"{names(key)}", {m}}})'
    q["kv_usage"] = f'avg({{__name__=~"{names("kv_usage")}", {m}}})'
    q["per_position"] = f'sum by (position) ({{__name__=~"{names("per_position")}", {m}}})'
    q["schema"] = f'count by (__name__) ({{__name__=~"{names("drafts")}|{names("generation_tokens")}", {m}}})'
    return q


def _snapshot(
    model: str | None, values: Mapping[str, float], per_pos: Mapping[int, float], schema: Schema, spec: bool
) -> MetricsSnapshot:
    k = (max(per_pos) + 1) if per_pos else 0

    def hist(name: str) -> Histogram | None:
        if f"{name}_count" not in values:
            return None
        return Histogram(values[f"{name}_count"], values.get(f"{name}_sum", 0.0))

    return MetricsSnapshot(
        schema=schema,
        model=model,
        speculative=spec,
        num_speculative_tokens=k,
        drafts=values.get("drafts", 0.0),
        draft_tokens=values.get("draft_tokens", 0.0),
        accepted=values.get("accepted", 0.0),
        accepted_per_pos=tuple(per_pos.get(i, 0.0) for i in range(k)),
        generation_tokens=values.get("generation_tokens", 0.0),
        prompt_tokens=values.get("prompt_tokens", 0.0),
        itl=hist("itl"),
        ttft=hist("ttft"),
        requests_running=values.get("running"),
        requests_waiting=values.get("waiting"),
        kv_cache_usage=values.get("kv_usage"),
    )


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
    for key in names:
        if key in ("per_position", "schema"):
            continue
        for item in by[key]:
            v = _value(item)
            if v is not None:
                values[key] = v
    per_pos: dict[int, float] = {}
    for item in by["per_position"]:
        v = _value(item)
        try:
            pos = int(item.get("metric", {}).get("position", ""))
        except ValueError:
            continue
        if v is not None:
            per_pos[pos] = v
    present = {str(item.get("metric", {}).get("__name__", "")) for item in by["schema"]}
    if not present:
        return MetricsSnapshot()
    schema: Schema = "llamacpp" if any(n.startswith("llamacpp:") for n in present) else "vllm"
    if schema == "vllm":
        spec = any(n.endswith("spec_decode_num_drafts_total") for n in present)
    else:
        spec = bool(per_pos) or values.get("draft_tokens", 0.0) > 0
    return _snapshot(model, values, per_pos, schema, spec)


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
    present = await source.query(q["schema"], t1)
    names_seen = {str(item.get("metric", {}).get("__name__", "")) for item in present}
    if not names_seen:
        return []
    schema: Schema = "llamacpp" if any(n.startswith("llamacpp:") for n in names_seen) else "vllm"
    at: dict[float, dict[str, float]] = {}
    pos_at: dict[float, dict[int, float]] = {}
    for name, matrix in zip(names, results, strict=True):
        for item in matrix:
            metric = item.get("metric", {})
            for ts, raw in item.get("values", []):
                try:
                    t, v = float(ts), float(raw)
                except (TypeError, ValueError):
                    continue
                if not math.isfinite(v):
                    continue
                if name == "per_position":
                    try:
                        pos_at.setdefault(t, {})[int(metric.get("position", ""))] = v
                    except ValueError:
                        continue
                else:
                    at.setdefault(t, {})[name] = v
    out: list[tuple[float, MetricsSnapshot]] = []
    for t in sorted(at):
        values, per_pos = at[t], pos_at.get(t, {})
        spec = (
            any(n.endswith("spec_decode_num_drafts_total") for n in names_seen)
            if schema == "vllm"
            else bool(per_pos)
        )
        out.append((t, _snapshot(model, values, per_pos, schema, spec)))
    return out
