"""Samples → one `MetricsSnapshot`: vLLM's (or llama.cpp's) families for one model, summed over engines.

Owns the knowledge of which exported names mean what (`FAMILY_NAMES`, `_HISTOGRAMS`, `_CREATED`, the
`MetricsSnapshot` fields' docstrings). A page with no `vllm:` or `llamacpp:` family has schema "none"
(vLLM started with `--disable-log-stats` exports none of them).

vLLM 0.33/0.34's Rust frontend serves OpenMetrics (`exposition="openmetrics"`): the same sample names,
but no `_created` (a restart shows only as counters going down, `rates.is_restart`; it exports no
`process_start_time_seconds` either) and the three spec-decode totals from start-up whether or not the
server speculates (`rust/src/engine-core-client/src/metrics.rs:275` of the 0.34.0 sdist), so there
speculation is on when a per-position count exists or a draft token was counted, as on llama.cpp.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from mtpwatch.core.metrics.parse import MetricsFormatError, Sample, is_openmetrics, parse_samples

Schema = Literal["vllm", "llamacpp", "none"]
Exposition = Literal["prometheus", "openmetrics"]

# Histogram family (after `vllm:`) -> field.
_HISTOGRAMS: dict[str, str] = {
    "iteration_tokens_total": "iteration_tokens",
    "time_to_first_token_seconds": "ttft",
    "inter_token_latency_seconds": "itl",
    "request_time_per_output_token_seconds": "tpot",
    "e2e_request_latency_seconds": "e2e",
}
HISTOGRAM_FIELDS: tuple[str, ...] = tuple(_HISTOGRAMS.values())
"""The `MetricsSnapshot` fields that hold a histogram."""
COUNTER_FIELDS: tuple[str, ...] = ("drafts", "draft_tokens", "accepted", "generation_tokens", "prompt_tokens")
"""The `MetricsSnapshot` fields that hold a whole counter (`Rates` holds their deltas by the same names)."""

HISTOGRAM_SAMPLES: tuple[str, ...] = tuple(
    f"vllm:{h}_{part}" for h in _HISTOGRAMS for part in ("sum", "count")
)
"""The histograms the views read, as window means (Δsum / Δcount): their `_sum` and `_count` only.
No view reads a bucket, so neither the parser nor the filtered scrape asks for them (they are most
of a histogram's lines: 23 a family and engine on vLLM 0.32)."""

#: The families `parse_snapshot` reads. Parsing only these lines (not every `vllm:` family) is what keeps
#: a scrape well under a millisecond: vLLM exports a dozen more histograms the monitor does not show.
SNAPSHOT_PREFIXES: tuple[str, ...] = (
    "vllm:spec_decode_num_",
    "vllm:generation_tokens_",
    "vllm:prompt_tokens_total",
    *HISTOGRAM_SAMPLES,
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:request_success_total",
    "vllm:cache_config_info",
    "vllm:estimated_read_bytes_per_gpu_total",
    "llamacpp:",
)

# Field -> its sample name after `vllm:` and after `llamacpp:` (None: not exported there). llama.cpp's
# server uses vLLM's spec_decode names (tools/server/server-task.cpp) but its own names for the rest.
FAMILY_NAMES: dict[str, tuple[str, str | None]] = {
    "drafts": ("spec_decode_num_drafts_total",) * 2,
    "draft_tokens": ("spec_decode_num_draft_tokens_total",) * 2,
    "accepted": ("spec_decode_num_accepted_tokens_total",) * 2,
    "accepted_per_pos": ("spec_decode_num_accepted_tokens_per_pos_total",) * 2,
    "generation_tokens": ("generation_tokens_total", "tokens_predicted_total"),
    "prompt_tokens": ("prompt_tokens_total",) * 2,
    "estimated_read_bytes": ("estimated_read_bytes_per_gpu_total", None),
    "requests_running": ("num_requests_running", "requests_processing"),
    "requests_waiting": ("num_requests_waiting", "requests_deferred"),
    "kv_cache_usage": ("kv_cache_usage_perc", "kv_cache_usage_ratio"),
}
_PER_POS = FAMILY_NAMES["accepted_per_pos"][0]


def _short_names(schema: int, fields: Iterable[str]) -> dict[str, str]:
    """Short name -> field of the `fields` that schema 0 (vLLM) or 1 (llama.cpp) exports."""
    return {name: f for f in fields if (name := FAMILY_NAMES[f][schema]) is not None}


_SUMMED = (*COUNTER_FIELDS, "estimated_read_bytes")
_GAUGE_FIELDS = ("requests_running", "requests_waiting", "kv_cache_usage")
_COUNTERS = {"vllm": _short_names(0, _SUMMED), "llamacpp": _short_names(1, _SUMMED)}
_GAUGES = {"vllm": _short_names(0, _GAUGE_FIELDS), "llamacpp": _short_names(1, _GAUGE_FIELDS)}
# `_created` of a counter the server always exports while logging stats; it changes when vLLM restarts.
_CREATED = ("generation_tokens_created", "spec_decode_num_drafts_created")


class UnknownModelError(ValueError):
    """`model=` names a `model_name` that is not on the page; the message lists those that are."""


@dataclass(frozen=True, slots=True)
class Histogram:
    """A Prometheus histogram's `_count` and `_sum`, summed over engines."""

    count: float
    sum: float


def _empty_mapping() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """One `/metrics` page reduced to the numbers mtpwatch shows, for one model, summed over engines."""

    schema: Schema = "none"
    """Which exporter: "vllm", "llamacpp" (same spec_decode names) or "none" (no such families)."""
    model: str | None = None
    """The `model_name` these numbers are for. llama.cpp's series carry no model label: the name the
    caller asked for (None when it asked for none)."""
    models: tuple[str, ...] = ()
    """Every `model_name` on the page, in page order, so the UI can say which one is shown."""
    engines: tuple[str, ...] = ()
    """`engine` label values (data-parallel ranks) summed into these numbers."""
    speculative: bool = False
    """True when the server exports spec-decode counters (vLLM creates them only when speculating)."""
    num_speculative_tokens: int = 0
    """k: number of distinct `position` labels (0 when off or unknown)."""
    drafts: float = 0.0
    """Cumulative verify steps with drafts (`spec_decode_num_drafts_total`), one per request per step."""
    draft_tokens: float = 0.0
    """Cumulative draft tokens proposed (`spec_decode_num_draft_tokens_total`)."""
    accepted: float = 0.0
    """Cumulative draft tokens accepted (`spec_decode_num_accepted_tokens_total`)."""
    accepted_per_pos: tuple[float, ...] = ()
    """Cumulative accepted tokens per draft position 0..k-1 (drafts that accepted at least i+1 tokens)."""
    generation_tokens: float = 0.0
    """Cumulative tokens emitted (`generation_tokens_total`; llama.cpp `tokens_predicted_total`)."""
    prompt_tokens: float = 0.0
    """Cumulative prompt tokens (`prompt_tokens_total`)."""
    iteration_tokens: Histogram | None = None
    """Tokens per engine step (`iteration_tokens_total`); `_count` ≈ engine steps that emitted tokens."""
    ttft: Histogram | None = None
    """Time to first token, seconds."""
    itl: Histogram | None = None
    """`inter_token_latency_seconds`: one observation per engine step per request (not per token)."""
    tpot: Histogram | None = None
    """`request_time_per_output_token_seconds`: per-token time per finished request."""
    e2e: Histogram | None = None
    """End-to-end request latency, seconds."""
    requests_running: float | None = None
    """Gauges now, as `requests_waiting` and `kv_cache_usage` (a fraction 0..1); None: not on the page."""
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    request_success: Mapping[str, float] = field(default_factory=_empty_mapping)
    """Finished requests by `finished_reason` (stop, length, abort, error, repetition)."""
    created: float | None = None
    """Unix time the server created its counters (`…_created`); a change means the server restarted."""
    estimated_read_bytes: float | None = None
    """`estimated_read_bytes_per_gpu_total` (only with `--enable-mfu-metrics`), summed over engines."""
    cache_config: Mapping[str, str] = field(default_factory=_empty_mapping)
    """Labels of `cache_config_info` (block_size, num_gpu_blocks, gpu_memory_utilization, …) but `engine`."""
    exposition: Exposition = "prometheus"
    """Prometheus text (vLLM's Python API server, llama.cpp) or OpenMetrics (vLLM's Rust frontend)."""

    def speculating(self, configured: bool = False) -> bool | None:
        """Whether it speculates: `speculative`, but on an OpenMetrics page with no draft yet (module
        docstring) False only once tokens were generated, before that `configured` (its start-up log
        named a method) or None (unknown)."""
        if self.speculative or self.exposition != "openmetrics" or self.generation_tokens > 0:
            return self.speculative
        return True if configured else None

    @property
    def restart_signal(self) -> str:
        """How a restart of this server is seen (what the views say with a restart count)."""
        if self.created is not None:
            return "a new _created or counters going down"
        return "counters going down (no _created on this page)"

    def counters(self) -> dict[str, float]:
        """The monotonic counters by name (for restart detection and deltas)."""
        out = {name: getattr(self, name) for name in COUNTER_FIELDS}
        for i, v in enumerate(self.accepted_per_pos):
            out[f"accepted_per_pos[{i}]"] = v
        for name in HISTOGRAM_FIELDS:
            h: Histogram | None = getattr(self, name)
            if h is not None:
                out[f"{name}.count"] = h.count
        for reason, v in self.request_success.items():
            out[f"request_success[{reason}]"] = v
        if self.estimated_read_bytes is not None:
            out["estimated_read_bytes"] = self.estimated_read_bytes
        return out


def detect_schema(text: str) -> Schema:
    """Which exporter wrote `text`: looks for a `vllm:` or `llamacpp:` sample line (C-speed search)."""
    framed = "\n" + text
    if "\nvllm:" in framed:
        return "vllm"
    if "\nllamacpp:" in framed:
        return "llamacpp"
    return "none"


def _choose_model(
    samples: Iterable[Sample], model: str | None, schema: Schema
) -> tuple[str | None, tuple[str, ...]]:
    names = tuple(dict.fromkeys(v for s in samples for k, v in s.labels if k == "model_name"))
    if schema == "llamacpp" and not names:
        # llama-server's series carry no model label: one server, one model, whatever the caller
        # calls it (its --alias from /v1/models). The numbers are that model's.
        return model, names
    if model is not None:
        if model not in names:
            shown = ", ".join(names) if names else "none"
            raise UnknownModelError(f"model {model!r} is not on this metrics page (models: {shown})")
        return model, names
    return (names[0] if names else None), names


def finite_or_none(x: float | None) -> float | None:
    """`x`, or None for None, NaN and ±Inf: a gauge may be NaN (Prometheus allows it) and JSON has no
    NaN/Infinity; the UI and JSON show "unknown" (null) instead."""
    return x if x is not None and math.isfinite(x) else None


def _series_text(s: Sample) -> str:
    labels = ",".join(f'{k}="{v}"' for k, v in s.labels)
    return f"{s.name}{{{labels}}}" if labels else s.name


def _check_finite(s: Sample) -> None:
    # Counters and histogram parts only ever grow from 0: NaN or ±Inf would poison every delta and
    # ratio (and JSON cannot carry them), so such a page is malformed for mtpwatch's purposes.
    if not math.isfinite(s.value) or s.value < 0:
        raise MetricsFormatError(
            f"{_series_text(s)} has the value {s.value}; a counter must be a finite number ≥ 0"
        )


def snapshot_from_samples(
    samples: list[Sample], model: str | None, schema: Schema, exposition: Exposition = "prometheus"
) -> MetricsSnapshot:
    """A snapshot from parsed samples (any superset of `SNAPSHOT_PREFIXES` works) of a page of `schema`
    (`detect_schema`); `exposition`: the page's format (`parse.is_openmetrics`). Raises UnknownModelError
    when no series carries `model`'s `model_name` (the message lists those that are), MetricsFormatError
    when a series appears twice or a counter is negative, NaN or infinite.
    """
    if schema == "none":
        if model is not None:
            raise UnknownModelError(f"model {model!r} is not on this metrics page (no vllm: metrics)")
        return MetricsSnapshot()
    prefix = f"{schema}:"
    chosen, models = _choose_model(samples, model, schema)
    counter_map = _COUNTERS[schema]
    gauge_map = _GAUGES[schema]
    plen = len(prefix)
    acc = Fold()
    sums, gauges, per_pos, engines = acc.sums, acc.gauges, acc.per_pos, acc.engines
    # A series that appears twice would be summed twice (doubled drafts, wrong mean acceptance
    # length); the exposition format forbids it, so say so instead of showing wrong numbers.
    seen_series: set[tuple[str, tuple[tuple[str, str], ...]]] = set()

    # One pass, the common families inline (this runs on every scrape); the rest in _fold_other.
    for s in samples:
        name = s.name
        if not name.startswith(prefix):
            continue
        series = (name, s.labels)
        if series in seen_series:
            raise MetricsFormatError(f"duplicate series {_series_text(s)}: the page repeats it")
        seen_series.add(series)
        labels = dict(s.labels)
        model_label = labels.get("model_name")
        if model_label is not None and model_label != chosen:
            continue
        short = name[plen:]
        engine = labels.get("engine")
        if engine is not None and short != "cache_config_info":
            engines.setdefault(engine, None)
        key = counter_map.get(short)
        if key is not None:
            _check_finite(s)
            sums[key] = sums.get(key, 0.0) + s.value
            if key == "drafts":
                acc.spec_seen = True
            continue
        key = gauge_map.get(short)
        if key is not None:
            gauges[key] = gauges.get(key, 0.0) + s.value
            continue
        if short == _PER_POS:
            try:
                pos = int(labels.get("position", ""))
            except ValueError:
                continue
            _check_finite(s)
            per_pos[pos] = per_pos.get(pos, 0.0) + s.value
            continue
        _fold_other(acc, short, labels, s)
    return acc.snapshot(schema, chosen, models, exposition)


@dataclass(slots=True)
class Fold:
    """What one page (or a Prometheus target's counters) adds up to, per family: `snapshot()` makes it one."""

    sums: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    per_pos: dict[int, float] = field(default_factory=dict)
    hists: dict[str, tuple[float, float]] = field(default_factory=dict)
    """(count, sum) by field."""
    nan_sums: set[str] = field(default_factory=set)
    """Histograms with a non-finite `_sum` (a NaN or infinite observation): unknown, not an error."""
    success: dict[str, float] = field(default_factory=dict)
    engines: dict[str, None] = field(default_factory=dict)
    cache_config: dict[str, str] = field(default_factory=dict)
    created_by: dict[str, float] = field(default_factory=dict)
    spec_seen: bool = False

    def snapshot(
        self, schema: Schema, chosen: str | None, models: tuple[str, ...], exposition: Exposition
    ) -> MetricsSnapshot:
        sums, gauges, per_pos, engines = self.sums, self.gauges, self.per_pos, self.engines
        hists = {k: Histogram(*h) for k, h in self.hists.items() if k not in self.nan_sums}
        k = (max(per_pos) + 1) if per_pos else 0
        # vLLM's Python server exports the drafts counter only when speculating; the others: module docstring
        if schema == "llamacpp" or exposition == "openmetrics":
            speculative = bool(per_pos) or sums.get("draft_tokens", 0.0) > 0
        else:
            speculative = self.spec_seen
        totals: dict[str, Any] = {name: sums.get(name, 0.0) for name in COUNTER_FIELDS}
        totals |= {name: hists.get(name) for name in HISTOGRAM_FIELDS}
        totals |= {name: finite_or_none(gauges.get(name)) for name in _GAUGE_FIELDS}
        if totals["kv_cache_usage"] is not None and len(engines) > 1:
            totals["kv_cache_usage"] /= len(engines)  # a fraction per engine: show the mean, not the sum
        return MetricsSnapshot(
            schema=schema,
            model=chosen,
            models=models,
            engines=tuple(engines),
            speculative=speculative,
            num_speculative_tokens=len(per_pos),
            accepted_per_pos=tuple(per_pos.get(i, 0.0) for i in range(k)),
            **totals,
            request_success=MappingProxyType(self.success),
            created=self.created_by.get(_CREATED[0], self.created_by.get(_CREATED[1])),
            estimated_read_bytes=sums.get("estimated_read_bytes"),
            cache_config=MappingProxyType(self.cache_config),
            exposition=exposition,
        )


def _fold_other(acc: Fold, short: str, labels: dict[str, str], s: Sample) -> None:
    """The families past counters, gauges and per-position counts: `_created` times, finished
    requests, the cache config and the histograms; anything else is ignored."""
    value = s.value
    if short in _CREATED:
        # The oldest engine's creation time; any change between scrapes is a restart.
        acc.created_by[short] = min(acc.created_by.get(short, value), value)
        return
    if short == "request_success_total":
        _check_finite(s)
        reason = labels.get("finished_reason", "")
        acc.success[reason] = acc.success.get(reason, 0.0) + value
        return
    if short == "cache_config_info":
        if not acc.cache_config:
            acc.cache_config.update((k, v) for k, v in labels.items() if k != "engine")
        return
    base, _, part = short.rpartition("_")
    hist_key = _HISTOGRAMS.get(base)
    if hist_key is None or part not in ("count", "sum"):
        return  # another family, or a bucket or `_created` (when the caller kept them): no view reads them
    if part == "sum" and not math.isfinite(value):
        # a NaN or infinite observation makes the sum so, as vLLM's Rust frontend documents
        # (rust/src/metrics/src/histogram.rs:150-165 of the 0.34 sdist): that histogram's mean is
        # unknown, the rest of the page stands
        acc.nan_sums.add(hist_key)
        return
    _check_finite(s)
    count, total = acc.hists.get(hist_key, (0.0, 0.0))
    acc.hists[hist_key] = (count + value, total) if part == "count" else (count, total + value)


def parse_snapshot(text: str, model: str | None = None) -> MetricsSnapshot:
    """A `/metrics` page → its snapshot for `model` (default: the first `model_name` on the page).
    Raises as `snapshot_from_samples`, and MetricsFormatError for a malformed line of a family read."""
    schema = detect_schema(text)
    exposition: Exposition = "openmetrics" if is_openmetrics(text) else "prometheus"
    if schema == "none":
        return snapshot_from_samples([], model, "none", exposition)
    return snapshot_from_samples(parse_samples(text, SNAPSHOT_PREFIXES), model, schema, exposition)
