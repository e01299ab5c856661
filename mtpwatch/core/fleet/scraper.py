"""Scrape many servers concurrently: bounded, with per-server backoff, one slow server delaying none.

A ticker fires every `interval_s`. At each tick every server that is due (not backing off, not
idle: an idle server is scraped every `idle_interval_s`, as the monitor scrapes one) and not still
busy with its previous scrape gets a new scrape task; at most `max_concurrency` requests are in
flight at once. A server that times out or fails backs off (0.5 s doubling to 10 s) and shows
"down since …"; the others keep their pace, because no tick ever waits for a scrape. Each answer is
split by (model, engine) and added to that row's `Collector` (restart detection, windows), so a row's
numbers are computed exactly as the single-server monitor computes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from mtpwatch.core.fleet.outliers import mark_outliers
from mtpwatch.core.fleet.rows import FleetRow, GroupKey, RowState, build_row, down_row, split_page
from mtpwatch.core.http.backoff import Backoff, ConnectionState
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import ServerError
from mtpwatch.core.metrics.filtered import ScrapeFilter
from mtpwatch.core.metrics.parse import MetricsFormatError
from mtpwatch.core.metrics.rates import Collector
from mtpwatch.core.timeouts import within

Fetch = Callable[[], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    """Base URL (normalised)."""
    api_key: str | None = None


CYCLES_KEPT = 2400
"""Ticks of cycle times kept: 10 minutes at 4 Hz."""


@dataclass
class ScrapeStats:
    """How the scraping keeps up: per-tick cycle times and per-scrape durations (seconds)."""

    cycles: list[float] = field(default_factory=list)
    """Tick start → the last scrape started at that tick finished (slow servers inflate it). The
    newest `CYCLES_KEPT` to `2 × CYCLES_KEPT` ticks: a view left open for days must not grow."""
    ticks: int = 0
    """Ticks since the start (`cycles` holds the newest of them)."""
    scrapes: int = 0
    failures: int = 0
    skipped_busy: int = 0
    """Ticks at which a server was skipped because its previous scrape was still running."""

    def summary(self) -> dict[str, float | int | None]:
        """p50/p95/max cycle time in ms over the kept ticks, scrape counts."""
        c = sorted(self.cycles)

        def q(p: float) -> float | None:
            return round(c[min(len(c) - 1, int(p * len(c)))] * 1000, 2) if c else None

        return {
            "cycles": len(c),
            "cycle_ms_p50": round(statistics.median(c) * 1000, 2) if c else None,
            "cycle_ms_p95": q(0.95),
            "cycle_ms_max": round(c[-1] * 1000, 2) if c else None,
            "scrapes": self.scrapes,
            "failures": self.failures,
            "skipped_busy": self.skipped_busy,
        }


@dataclass(eq=False)
class Track:
    """One server's state: connection, backoff, one collector per (model, engine)."""

    target: Target
    fetch: Fetch
    horizon_s: float
    connection: ConnectionState = field(default_factory=ConnectionState)
    backoff: Backoff = field(default_factory=Backoff)
    collectors: dict[GroupKey, Collector] = field(default_factory=dict)
    next_due: float = 0.0
    busy: bool = False
    reason: str = ""
    last_rows: list[FleetRow] = field(default_factory=list)

    def record(self, text: str, now: float) -> None:
        """Add one page (raises MetricsFormatError for a malformed one)."""
        groups = split_page(text)
        for key, snap in groups.items():
            collector = self.collectors.get(key)
            if collector is None:
                collector = self.collectors[key] = Collector(horizon_s=self.horizon_s)
            collector.add(snap, now)
        for key in [k for k in self.collectors if k not in groups]:
            del self.collectors[key]  # a model or engine that went away
        self.connection.success()
        self.backoff.reset()
        self.next_due = 0.0
        self.reason = "" if groups else "no vllm: or llamacpp: metrics on the page (--disable-log-stats?)"

    @property
    def idle(self) -> bool:
        """Every engine on this server is idle (`Collector.idle`, the monitor's rule)."""
        return bool(self.collectors) and all(c.idle for c in self.collectors.values())

    def fail(self, reason: str, now: float) -> None:
        self.connection.failure(reason)
        self.reason = reason
        self.next_due = now + self.backoff.next()

    def rows(self, window_s: float, now: float) -> list[FleetRow]:
        """This server's rows now (a 'down' row per previous row while it does not answer)."""
        url = self.target.url
        status = self.connection.status
        if status.state in ("down", "unknown") and (status.state == "down" or not self.collectors):
            state: RowState = "down" if status.state == "down" else "connecting"
            reason = self.reason
            if state == "down" and status.since is not None:
                reason = f"since {time.strftime('%H:%M:%S', time.localtime(status.since))}: {reason}"
            previous = self.last_rows or [None]  # type: ignore[list-item]
            return [down_row(url, state, reason, p) for p in previous]
        n = len(self.collectors)
        out: list[FleetRow] = []
        for key, collector in self.collectors.items():
            latest = collector.latest
            if latest is None:
                continue
            # `since`, not `window`: its rates say `restarted` when a restart fell inside the window
            rates = collector.since(now - window_s, now, f"{window_s:g} s")
            history = _buckets(collector.tok_s_series(since=now - HISTORY_S), now)
            out.append(
                build_row(url, key, latest, rates, engines_on_source=n, reason=self.reason, history=history)
            )
        if not out:
            out = [down_row(url, "connecting", self.reason or "no metrics yet")]
        else:
            self.last_rows = out
        return out


HISTORY_S = 60.0
"""Span of a row's tok/s history (the sparkline), in `HISTORY_BUCKETS` equal buckets."""
HISTORY_BUCKETS = 12


def _buckets(series: Sequence[tuple[float, float]], now: float) -> tuple[tuple[float, float], ...]:
    """(end of bucket, mean tok/s) for each 5 s bucket of the last minute that has scrapes."""
    width = HISTORY_S / HISTORY_BUCKETS
    sums = [0.0] * HISTORY_BUCKETS
    counts = [0] * HISTORY_BUCKETS
    start = now - HISTORY_S
    for t, v in series:
        i = int((t - start) / width)
        if 0 <= i < HISTORY_BUCKETS:
            sums[i] += v
            counts[i] += 1
    return tuple((start + (i + 1) * width, sums[i] / counts[i]) for i in range(HISTORY_BUCKETS) if counts[i])


FLEET_FILTER = ScrapeFilter(slow=False)
"""A row reads the hot tier's families only (`rows.FLEET_PREFIXES` ⊆ `filtered.HOT_NAMES`)."""


class FleetScraper:
    """Scrape `targets` at `interval_s` until cancelled; `rows()` answers at any moment."""

    def __init__(
        self,
        targets: Sequence[Target],
        *,
        interval_s: float = 0.25,
        idle_interval_s: float = 0.5,
        timeout_s: float = 2.0,
        max_concurrency: int = 16,
        horizon_s: float = 180.0,
        clock: Callable[[], float] = time.monotonic,
        fetch_factory: Callable[[Target], Fetch] | None = None,
    ) -> None:
        """`targets` in display order; `idle_interval_s` ≥ `interval_s` (the first tick this long
        after the tick of the scrape that showed it idle); `timeout_s`: a longer scrape fails;
        `horizon_s`: history kept per row (the longest window asked for must fit); `fetch_factory`:
        a target's `/metrics` getter (tests; default `VllmClient`); the others: module docstring."""
        if interval_s <= 0 or timeout_s <= 0 or max_concurrency < 1:
            raise ValueError("interval_s and timeout_s must be > 0 and max_concurrency ≥ 1")
        self.interval_s = interval_s
        self.idle_interval_s = max(interval_s, idle_interval_s)
        self.timeout_s = timeout_s
        self.clock = clock
        self.stats = ScrapeStats()
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._clients: list[tuple[str, VllmClient]] = []
        self.tracks: list[Track] = []
        for target in targets:
            if fetch_factory is not None:
                fetch = fetch_factory(target)
            else:
                client = VllmClient(
                    target.url, api_key=target.api_key, timeout=timeout_s, scrape_filter=FLEET_FILTER
                )
                fetch = client.scrape_text
                self._clients.append((target.url, client))
            self.tracks.append(Track(target, fetch, horizon_s=horizon_s))
        self._tasks: set[asyncio.Task[None]] = set()

    async def _scrape(self, track: Track, tick_t: float) -> None:
        try:
            async with self._semaphore:  # the timeout starts once a slot is free
                text = await within(self.timeout_s, track.fetch())
            track.record(text, self.clock())
            self.stats.scrapes += 1
            if track.idle and self.idle_interval_s > self.interval_s:
                # half a tick of slack: the tick `idle_interval_s` after this one is due, not the next
                track.next_due = tick_t + self.idle_interval_s - self.interval_s / 2
        except TimeoutError:
            self.stats.failures += 1
            track.fail(f"no answer within {self.timeout_s:g} s", self.clock())
        except (ServerError, OSError, MetricsFormatError, ValueError) as exc:
            self.stats.failures += 1
            track.fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, self.clock())
        finally:
            track.busy = False

    def _start(self, track: Track, tick_t: float) -> asyncio.Task[None]:
        track.busy = True
        task = asyncio.ensure_future(self._scrape(track, tick_t))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def tick(self) -> None:
        """One tick: start a scrape for every due, idle server, wait for them (`stats.cycles`)."""
        t0 = self.clock()
        started: list[asyncio.Task[None]] = []
        for track in self.tracks:
            if track.busy:
                self.stats.skipped_busy += 1
            elif track.next_due <= t0:
                started.append(self._start(track, t0))
        if started:
            await asyncio.wait(started)
        self.stats.cycles.append(self.clock() - t0)
        self.stats.ticks += 1
        if len(self.stats.cycles) > 2 * CYCLES_KEPT:
            del self.stats.cycles[:-CYCLES_KEPT]

    async def run(self) -> None:
        """Tick every `interval_s` until cancelled; each tick runs in its own task, so the next one
        starts on time."""
        loop = asyncio.get_running_loop()
        next_t = loop.time()
        pending: set[asyncio.Task[None]] = set()
        try:
            while True:
                task = asyncio.ensure_future(self.tick())
                pending.add(task)
                task.add_done_callback(pending.discard)
                next_t += self.interval_s
                delay = next_t - loop.time()
                if delay < 0:  # fell behind (a stalled loop): skip the missed ticks
                    next_t = loop.time()
                    delay = 0.0
                await asyncio.sleep(delay)
        finally:
            for task in list(pending) + list(self._tasks):
                task.cancel()
            for task in list(pending) + list(self._tasks):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    def scrape_modes(self) -> dict[str, str]:
        """How each server's /metrics is read now ('filtered, 3.3 KB', 'full page (filter ignored)';
        '' before its first scrape), by URL; servers of a `fetch_factory` are not listed."""
        return {url: client.scrape_state.text if client.scrape_state else "" for url, client in self._clients}

    def rows(self, window_s: float, now: float | None = None) -> list[FleetRow]:
        """Every row now, in target order, outliers marked."""
        now = self.clock() if now is None else now
        return mark_outliers([row for track in self.tracks for row in track.rows(window_s, now)])

    async def aclose(self) -> None:
        """Cancel scrapes in flight and close the HTTP clients."""
        for task in list(self._tasks):
            task.cancel()
        for _, client in self._clients:
            with contextlib.suppress(Exception):
                await client.aclose()
