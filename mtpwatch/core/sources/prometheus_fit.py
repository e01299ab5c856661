"""How a window and a freshness rule fit the store behind `--prometheus` (Prometheus or VictoriaMetrics).

- **Scrape interval, from the data.** The median gap between the raw samples of the last 10 minutes
  (`INTERVAL_SPAN_S`) of a few instances (`INTERVAL_INSTANCES`, `prometheus.interval_query`): the
  store's real scrape interval, whatever its configuration says (Grafana's `$__rate_interval` uses
  the configured one for the same purpose); not samples per span, which reads young series as slow.
- **Window.** A window shorter than `MIN_SAMPLES` scrape intervals holds fewer than two samples of
  some series, and `increase()` then answers nothing (every row reads idle). `fit_window` widens it to
  4 intervals — Grafana's `$__rate_interval` floor (max($__interval + scrape interval,
  4 × scrape interval)) — and says so. A window longer than the store's history (the most samples any
  series has in it) is flagged: "only 42 s of history for a 60 s window".
- **The store's own time.** VictoriaMetrics evaluates an instant query at `now − latencyOffset`
  (`-search.latencyOffset`, 30 s by default; its app/vmselect/prometheus/prometheus.go, QueryHandler:
  `start = ct - queryOffset` unless the query passes `nocache=1`, its issue #241), and its
  `timestamp()` is then the newest raw sample at or before that instant, so a live series reads
  ≥ 30 s old against the wall clock. `vector(time())` evaluated with the other queries answers the
  instant the store really used (Prometheus: the time asked; Debian's VictoriaMetrics 1.79.5,
  measured here: 29.6 s earlier), and ages are taken against it.
- **Stale.** A series is stale when its newest sample is older than max(`stale_after_s`,
  `STALE_INTERVALS` × the scrape interval) at the store's instant: two missed scrapes are not noise.
- **Missing.** An instance with samples in the last `SEEN_S` seconds but none in the store's lookback
  now (Prometheus: 5 minutes) is listed as missing, not dropped.
- **A slow store.** The refresh period grows to `SLOW_FACTOR` × the time one round of queries took.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Container, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mtpwatch.core import jsonout
from mtpwatch.core.fleet.rows import FleetRow

MIN_SAMPLES = 4
STALE_INTERVALS = 3.0
SEEN_S = 3600.0
SLOW_FACTOR = 4.0
INTERVAL_SPAN_S = 600.0
INTERVAL_INSTANCES = 5


Key = tuple[str, str | None, str | None]
"""A row: (instance, model_name, engine)."""


@dataclass(frozen=True, slots=True)
class StoreFit(jsonout.JsonFields):
    """What one refresh read from the store, besides the rows: the window it used and why."""

    asked_s: float = field(metadata=jsonout.key("asked_window_s"))
    """The window asked for (--window, F3)."""
    window_s: float
    """The window the queries used: `asked_s`, or 4 scrape intervals when that is longer."""
    interval_s: float | None = field(metadata=jsonout.key("scrape_interval_s"))
    """The store's scrape interval, measured from its data (None: no data to measure)."""
    lag_s: float = field(metadata=jsonout.key("store_lag_s", nd=3))
    """How far behind the time asked the store evaluated (VictoriaMetrics: its latency offset)."""
    notes: tuple[str, ...] = ()
    """One line each: a widened window, a window longer than the history, a lagging store."""


def fit_window(asked_s: float, interval_s: float | None) -> tuple[float, str]:
    """(window to use, a note when it is not the one asked)."""
    if interval_s is None or asked_s >= MIN_SAMPLES * interval_s:
        return asked_s, ""
    window = MIN_SAMPLES * interval_s
    return window, (
        f"window {window:g} s, not {asked_s:g} s: at least {MIN_SAMPLES} × the store's "
        f"{interval_s:g} s scrape interval"
    )


def history_note(window_s: float, interval_s: float | None, most_samples: float | None) -> str:
    """A note when no series has samples across the whole window (the store's history is shorter)."""
    if interval_s is None or most_samples is None or most_samples < 1:
        return ""
    covered = (most_samples - 1) * interval_s
    if covered >= window_s - 1.5 * interval_s:
        return ""
    return f"only {covered:.0f} s of history for a {window_s:g} s window"


def stale_limit(stale_after_s: float, interval_s: float | None) -> float:
    """Seconds without a sample after which a series is stale."""
    return max(stale_after_s, STALE_INTERVALS * (interval_s or 0.0))


def refresh_period(base_s: float, query_s: float) -> tuple[float, str]:
    """(seconds to the next refresh, a note when a slow store stretched it)."""
    slow = SLOW_FACTOR * query_s
    if slow <= base_s:
        return base_s, ""
    return slow, f"store slow: a refresh's queries took {query_s:.1f} s, so it refreshes every {slow:.0f} s"


def median_gap(matrix: list[dict[str, Any]]) -> float | None:
    """The median gap between consecutive raw samples of the series in `matrix`."""
    gaps: list[float] = []
    for item in matrix:
        ts = sorted(float(t) for t, _ in item.get("values", []))
        gaps += [b - a for a, b in itertools.pairwise(ts) if b > a]
    return round(statistics.median(gaps), 3) if gaps else None


def finish_row(row: FleetRow, method: str | None, seen_k: int | None, reset: bool) -> FleetRow:
    """The row with the scrape config's method label, the k seen in the last hour where the window has
    no per-position counts (a down target), and a restart inside the window said so."""
    changes: dict[str, Any] = {}
    if method:
        changes["method"] = method
    if row.k in (None, 0) and seen_k:
        changes["k"] = seen_k
    if reset and row.state in ("up", "idle"):
        changes["state"] = "restarted"
        changes["reason"] = "counters reset inside the window (a restart); increase() counts across it"
    return replace(row, **changes) if changes else row


def missing_rows(seen: Mapping[Key, tuple[str | None, int | None]], live: Container[Key]) -> list[FleetRow]:
    """Rows seen in the last hour with no series now: listed as missing, never dropped."""
    gone = sorted((k for k in seen if k not in live), key=lambda k: (k[0], k[1] or "", k[2] or ""))
    return [
        FleetRow(
            source=key[0],
            model=key[1],
            engine=key[2],
            schema="vllm",
            method=seen[key][0] or "spec",
            k=seen[key][1],
            state="missing",
            reason=f"seen in the last {SEEN_S / 60:.0f} min, no sample in the store's lookback now",
        )
        for key in gone
    ]
