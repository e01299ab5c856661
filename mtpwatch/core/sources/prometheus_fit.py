"""How a window and a freshness rule fit the store behind `--prometheus` (Prometheus or VictoriaMetrics).

- **Scrape interval, from the data.** The median gap between the raw samples of the last 10 minutes
  of a few instances (`prometheus.interval_query`): the store's real scrape interval, whatever its
  configuration says (Grafana's `$__rate_interval` uses the configured one for the same purpose).
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

from dataclasses import dataclass

__all__ = [
    "INTERVAL_INSTANCES",
    "INTERVAL_SPAN_S",
    "MIN_SAMPLES",
    "SEEN_S",
    "SLOW_FACTOR",
    "STALE_INTERVALS",
    "StoreFit",
    "fit_window",
    "history_note",
    "refresh_period",
    "stale_limit",
]

MIN_SAMPLES = 4
"""A window spans at least this many scrape intervals."""
STALE_INTERVALS = 3.0
"""A series is stale after this many scrape intervals without a sample."""
SEEN_S = 3600.0
"""An instance with samples this recently that gives none now is listed as missing."""
SLOW_FACTOR = 4.0
"""The refresh period is at least this many times one round of queries."""
INTERVAL_SPAN_S = 600.0
"""The scrape interval is measured over this many seconds of data …"""
INTERVAL_INSTANCES = 5
"""… of this many instances."""


@dataclass(frozen=True, slots=True)
class StoreFit:
    """What one refresh read from the store, besides the rows: the window it used and why."""

    asked_s: float
    """The window asked for (--window, F3)."""
    window_s: float
    """The window the queries used: `asked_s`, or 4 scrape intervals when that is longer."""
    interval_s: float | None
    """The store's scrape interval, measured from its data (None: no data to measure)."""
    lag_s: float
    """How far behind the time asked the store evaluated (VictoriaMetrics: its latency offset)."""
    notes: tuple[str, ...] = ()
    """One line each: a widened window, a window longer than the history, a lagging store."""

    def as_dict(self) -> dict[str, object]:
        return {
            "asked_window_s": self.asked_s,
            "window_s": self.window_s,
            "scrape_interval_s": self.interval_s,
            "store_lag_s": round(self.lag_s, 3),
            "notes": list(self.notes),
        }


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
