"""One fleet row per (server, model, engine): a page split by engine, and the row built from rates.

A vLLM page sums nothing across data-parallel ranks: every series carries `engine`. The fleet view
shows one row per `engine` value (a node running several engines shows several rows), so this module
splits the parsed samples by (`model_name`, `engine`) and builds one `MetricsSnapshot` per group with
the same `snapshot_from_samples` the single-server monitor uses. Rows are built from `Rates`
(vLLM's formulas in `core.metrics.rates`), whatever the source: direct scrapes or Prometheus.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from mtpwatch.core.jsonout import JsonFields, key
from mtpwatch.core.metrics.parse import Sample, parse_samples
from mtpwatch.core.metrics.rates import Rates
from mtpwatch.core.metrics.snapshot import (
    MetricsSnapshot,
    detect_schema,
    snapshot_from_samples,
)

GroupKey = tuple[str | None, str | None]
"""(model_name, engine) of one row; (None, None) for llama.cpp, whose series carry no labels."""

FLEET_PREFIXES: tuple[str, ...] = (
    "vllm:spec_decode_num_",
    "vllm:generation_tokens_",  # _total, and _created for restart detection
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "llamacpp:",
)
"""The families a fleet row needs: a sixth of the single-server monitor's lines (no latency
histograms), which makes a scrape's parse ~0.3 ms instead of ~1 ms (tests/bench/fleet_scale.py)."""

RowState = Literal["up", "idle", "down", "connecting", "stale", "restarted", "missing"]


@dataclass(frozen=True, slots=True)
class FleetRow(JsonFields):
    """What the fleet view shows for one server (and engine), over one window; `to_json()` is a row
    of every fleet `--json` (rounded for reading; the counts are exact)."""

    JSON_KEYS = (
        "source model engine schema method k state reason_or_none window_s decode_tok_s acceptance "
        "mean_length per_position drafts draft_tokens accepted generation_tokens kv_usage running waiting "
        "outlier outliers why"
    )
    JSON_PROPS = {"reason_or_none": key("reason")}

    source: str
    """Where it was read: the server URL (direct) or the Prometheus `instance` label."""
    model: str | None
    """`model_name` (None: llama.cpp, or a server not reached yet)."""
    engine: str | None
    """`engine` label (data-parallel rank); None when the page has none."""
    engines_on_source: int = 1
    """How many engines this source has (the view names the engine only when there are several)."""
    schema: str = "none"
    method: str = "?"
    """"spec" when spec-decode counters exist (vLLM does not export the method), "off" when not."""
    k: int | None = None
    """num_speculative_tokens (number of `position` series); None when unknown."""
    state: RowState = "connecting"
    """up (tokens in the window), idle (up, no tokens), down, connecting, stale (Prometheus: no fresh
    sample), restarted (counters reset inside the window), missing (Prometheus: seen in the last hour,
    no sample now)."""
    reason: str = ""
    """Why down/stale, one line."""
    window_s: float | None = field(default=None, metadata=key(nd=3))
    """Seconds the numbers span (shorter than asked right after start)."""
    decode_tok_s: float | None = field(default=None, metadata=key(nd=2))
    """The window's `Rates.server_tok_s` (all the engine's requests); it and the rates below: `build_row`."""
    acceptance: float | None = field(default=None, metadata=key("acceptance_rate", nd=4))
    mean_length: float | None = field(default=None, metadata=key("mean_acceptance_length", nd=4))
    per_position: tuple[float, ...] = field(default=(), metadata=key(nd=4))
    drafts: float = 0.0
    """How much evidence the ratios rest on."""
    draft_tokens: float = 0.0
    accepted: float = field(default=0.0, metadata=key("accepted_tokens"))
    generation_tokens: float = 0.0
    kv_usage: float | None = field(default=None, metadata=key("kv_cache_usage", nd=4))
    """KV-cache use, fraction 0..1; it, `running` and `waiting`: the latest scrape's gauges."""
    running: float | None = field(default=None, metadata=key("requests_running"))
    waiting: float | None = field(default=None, metadata=key("requests_waiting"))
    outliers: tuple[str, ...] = ()
    """Which numbers are outliers against the row's group (`core.fleet.outliers`): "acceptance",
    "tok/s", "k"."""
    why: tuple[str, ...] = ()
    """One line per entry of `outliers`: the row's value against its group's (median, MAD, peers)."""
    history: tuple[tuple[float, float], ...] = field(default=(), compare=False)
    """(t, tok/s) points for a sparkline; t in the source's clock (direct: monotonic, Prometheus: Unix)."""

    @property
    def outlier(self) -> bool:
        return bool(self.outliers)

    @property
    def reason_or_none(self) -> str | None:
        return self.reason or None

    @property
    def key(self) -> str:
        """Identity of the row across refreshes: source, model and engine."""
        return f"{self.source}|{self.model or ''}|{self.engine or ''}"

    @property
    def name(self) -> str:
        """Short name for the screen: the source without its scheme, plus the engine when several."""
        base = self.source.split("://", 1)[-1]
        if self.engine is not None and self.engines_on_source > 1:
            return f"{base} e{self.engine}"
        return base


def split_page(text: str) -> dict[GroupKey, MetricsSnapshot]:
    """One `/metrics` page → one snapshot per (model, engine), in page order. Series without
    `model_name` join no model group when the page has models (e.g. `cache_config_info`), and form the
    one group when it has none. Raises `MetricsFormatError` as `parse_snapshot` does."""
    schema = detect_schema(text)
    if schema == "none":
        return {}
    groups: dict[GroupKey, list[Sample]] = {}
    for s in parse_samples(text, FLEET_PREFIXES):
        labels = dict(s.labels)
        groups.setdefault((labels.get("model_name"), labels.get("engine")), []).append(s)
    if any(m is not None for m, _ in groups):
        groups = {k: v for k, v in groups.items() if k[0] is not None}
    return {key: snapshot_from_samples(group, key[0], schema) for key, group in groups.items()}


def build_row(
    source: str,
    key: GroupKey,
    latest: MetricsSnapshot,
    rates: Rates | None,
    *,
    engines_on_source: int = 1,
    state: RowState | None = None,
    reason: str = "",
    k: int | None = None,
    history: tuple[tuple[float, float], ...] = (),
) -> FleetRow:
    """A row from the newest snapshot (gauges, k, method) and the window's rates (everything else)."""
    if state is None:
        if rates is None:
            state = "connecting" if latest.schema == "none" else "idle"
        elif rates.restarted:
            state = "restarted"
        else:
            state = "up" if rates.generation_tokens > 0 else "idle"
    if k is None:
        k = latest.num_speculative_tokens or None
    return FleetRow(
        source=source,
        model=key[0] if key[0] is not None else latest.model,
        engine=key[1],
        engines_on_source=engines_on_source,
        schema=latest.schema,
        method="spec" if latest.speculative else ("off" if latest.schema != "none" else "?"),
        k=k if latest.speculative else (0 if latest.schema != "none" else None),
        state=state,
        reason=reason,
        window_s=rates.dt_s if rates is not None else None,
        decode_tok_s=rates.server_tok_s if rates is not None else None,
        acceptance=rates.acceptance_rate if rates is not None else None,
        mean_length=rates.mean_acceptance_length if rates is not None else None,
        per_position=rates.per_position if rates is not None else (),
        drafts=rates.drafts if rates is not None else 0.0,
        draft_tokens=rates.draft_tokens if rates is not None else 0.0,
        accepted=rates.accepted if rates is not None else 0.0,
        generation_tokens=rates.generation_tokens if rates is not None else 0.0,
        kv_usage=latest.kv_cache_usage,
        running=latest.requests_running,
        waiting=latest.requests_waiting,
        history=history,
    )


def down_row(source: str, state: RowState, reason: str, previous: FleetRow | None = None) -> FleetRow:
    """A row for a source that does not answer; keeps the model/k it showed before, clears the rates."""
    kept: dict[str, Any] = {"model": None, "engine": None}
    if previous is not None:
        kept = {
            name: getattr(previous, name)
            for name in ("model", "engine", "engines_on_source", "schema", "method", "k")
        }
    return FleetRow(source=source, state=state, reason=reason, **kept)
