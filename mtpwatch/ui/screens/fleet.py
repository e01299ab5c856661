# ruff: noqa: E501
"""FleetScreen: one row per server (and engine); Enter opens that server's monitor, Escape returns.

The rows come from `core.fleet.FleetScraper` (direct scrapes of every URL, concurrent, bounded, with
per-server backoff) or from `core.sources.prometheus.PrometheusSource` (queries over the window).
The screen only sorts and draws; every number and the outlier marks are computed in the core.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Static

from mtpwatch.config import AppConfig, FleetSettings, ServerSpec
from mtpwatch.core.fleet.outliers import OUTLIER_RULE
from mtpwatch.core.fleet.rows import FleetRow
from mtpwatch.core.fleet.scraper import CYCLES_KEPT, FleetScraper, Target
from mtpwatch.core.sources.prometheus import PrometheusError, PrometheusSource, promql_queries
from mtpwatch.session.prometheus import prometheus_feed_factory
from mtpwatch.ui.compositor import make_compositor
from mtpwatch.ui.markup.titles import render_fleet_status, render_fleet_title
from mtpwatch.ui.screens.monitor import MonitorScreen
from mtpwatch.ui.widgets.fleet_table import SORTS, FleetTable

WINDOWS_S = (10.0, 60.0)
"""Windows F3 cycles through (the --window given first when it is another value)."""
REFRESH_S = 1.0
"""Seconds between two table updates of a directly scraped fleet (the numbers span a 10 s or 60 s
window; a faster redraw costs CPU, tests/bench/fleet_scale.py)."""
PROMETHEUS_REFRESH_S = 2.0
"""Seconds between two rounds of Prometheus queries."""


class FleetScreen(Screen[None]):
    """The fleet table, a status line, the footer."""

    BINDINGS = [
        Binding("s", "cycle_sort", "Sort", tooltip="Cycle the sort order."),
        Binding("r", "reverse_sort", "Reverse", tooltip="Reverse the sort order."),
        Binding("f3", "cycle_window", "Window", tooltip="Rates over 10 s or 60 s."),
        Binding(
            "enter", "open_row", "Open", tooltip="Open this server's monitor (Escape returns).", show=True
        ),
    ]

    def __init__(
        self, config: AppConfig, *, autostart: bool = True, clock: Callable[[], float] = time.monotonic
    ):
        super().__init__()
        self._compositor = make_compositor()  # partial updates render only the rows they write
        assert config.fleet is not None
        self.config = config
        self.fleet: FleetSettings = config.fleet
        self.autostart = autostart
        self.clock = clock
        first = self.fleet.window_s
        self.windows = (first, *(w for w in WINDOWS_S if w != first))
        self.window_index = 0
        self.sort_index = 0
        self.reverse = False
        self.rows: list[FleetRow] = []
        self.scraper: FleetScraper | None = None
        self.source: PrometheusSource | None = None
        self.error = ""
        self.refresh_times: list[float] = []
        """Seconds each of the newest table updates took (the benchmark reads them; bounded)."""
        self.refreshes = 0
        """Table updates since the start."""

    @property
    def window_s(self) -> float:
        return self.windows[self.window_index]

    def compose(self) -> ComposeResult:
        yield Static(id="title-bar")
        with VerticalScroll(id="fleet-scroll"):
            yield FleetTable(id="fleet-table")
        yield Static(id="fleet-status")
        yield Footer()

    def on_mount(self) -> None:
        self.update_title()
        self.query_one(FleetTable).focus()
        if not self.autostart:
            return
        if self.fleet.prometheus is not None:
            self.source = PrometheusSource(self.fleet.prometheus, selector=self.fleet.selector)
            self.poll_prometheus()
        else:
            self.scraper = FleetScraper(
                [Target(u, self.fleet.api_key) for u in self.fleet.urls],
                interval_s=self.config.display.scrape_interval_s,
                idle_interval_s=self.config.display.idle_interval_s,
                horizon_s=max(self.windows) + 120.0,
                clock=self.clock,
            )
            self.run_scraper()
            self.set_interval(REFRESH_S, self.refresh_direct)

    def source_words(self) -> str:
        if self.fleet.prometheus is not None:
            sel = f" {self.fleet.selector}" if self.fleet.selector else ""
            return f"Prometheus {self.fleet.prometheus}{sel}"
        return f"{len(self.fleet.urls)} servers, direct /metrics"

    def update_title(self) -> None:
        title = render_fleet_title(
            self.window_s, SORTS[self.sort_index][0], reverse=self.reverse, source=self.source_words()
        )
        self.query_one("#title-bar", Static).update(Content.from_markup(title))

    # -- data ----------------------------------------------------------------------------------

    @work(group="fleet", exit_on_error=False)
    async def run_scraper(self) -> None:
        assert self.scraper is not None
        try:
            await self.scraper.run()
        finally:
            await self.scraper.aclose()

    def refresh_direct(self) -> None:
        if self.scraper is None or getattr(self.app, "paused", False):
            return
        self.show_rows(self.scraper.rows(self.window_s))

    @work(group="fleet", exit_on_error=False)
    async def poll_prometheus(self) -> None:
        assert self.source is not None
        try:
            while True:
                try:
                    rows = await self.source.rows(self.window_s, history_s=60.0)
                    self.error = ""
                except PrometheusError as exc:
                    rows, self.error = self.rows, str(exc)
                self.show_rows(rows)
                await asyncio.sleep(PROMETHEUS_REFRESH_S)
        finally:
            await self.source.aclose()

    def show_rows(self, rows: list[FleetRow]) -> None:
        """Sort and draw `rows`; the status line says how scraping keeps up and what is marked."""
        t0 = time.perf_counter()
        self.rows = rows
        key = SORTS[self.sort_index][1]
        ordered = sorted(rows, key=key, reverse=self.reverse)
        self.query_one(FleetTable).show(ordered)
        self.query_one("#fleet-status", Static).update(Content.from_markup(self.status_line(rows)))
        self.refresh_times.append(time.perf_counter() - t0)
        self.refreshes += 1
        if len(self.refresh_times) > 2 * CYCLES_KEPT:
            del self.refresh_times[:-CYCLES_KEPT]

    def status_line(self, rows: list[FleetRow]) -> str:
        marked = [f"{r.name} ({', '.join(r.outliers)})" for r in rows if r.outliers]
        cycle_ms = None
        if self.scraper is not None and self.scraper.stats.cycles:
            recent = sorted(self.scraper.stats.cycles[-40:])
            cycle_ms = recent[len(recent) // 2] * 1000
        up = sum(1 for r in rows if r.state in ("up", "idle", "restarted"))
        return render_fleet_status(self.error, marked, cycle_ms, up, len(rows))

    # -- actions -------------------------------------------------------------------------------

    def _redraw(self) -> None:
        self.update_title()
        if self.rows:
            self.show_rows(self.rows)

    def action_cycle_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self._redraw()

    def action_reverse_sort(self) -> None:
        self.reverse = not self.reverse
        self._redraw()

    def action_cycle_window(self) -> None:
        self.window_index = (self.window_index + 1) % len(self.windows)
        self.update_title()
        if self.scraper is not None:
            self.refresh_direct()

    def action_open_row(self) -> None:
        row = self.query_one(FleetTable).selected()
        if row is None:
            return
        self.open_monitor(row)

    def open_monitor(self, row: FleetRow) -> None:
        """Push the single-server monitor for `row`: it scrapes the server itself, or, for a row read
        from Prometheus, reads that target's counters (and their recent history) from Prometheus."""
        url = row.source if "://" in row.source else f"http://{row.source}"
        factory = None
        title = f"{self.config.title} · {row.name}"
        if self.fleet.prometheus is not None:
            factory = prometheus_feed_factory(
                self.fleet.prometheus, self.fleet.selector, (row.source, row.model, row.engine)
            )
            title += " (counters from Prometheus; prompts go to the server itself)"
        spec = ServerSpec(label=row.name, url=url, model=row.model, api_key=self.fleet.api_key)
        config = AppConfig(servers=[spec], display=self.config.display, title=title)
        screen = MonitorScreen(config, autostart=self.autostart, clock=self.clock, feed_factory=factory)
        self.app.push_screen(screen)

    async def stop(self) -> None:
        """Stop scraping (the workers close their clients)."""
        with contextlib.suppress(Exception):
            self.workers.cancel_group(self, "fleet")


def fleet_help(fleet: FleetSettings) -> str:
    """The help screen of the fleet view: columns, the outlier rule, and the PromQL it runs."""
    queries = promql_queries(fleet.window_s, fleet.selector)
    query_rows = "\n".join(f"| {name} | `{q}` |" for name, q in queries.items())
    where = (
        f"Prometheus at {fleet.prometheus} (instant queries over the window; history by a range query)"
        if fleet.prometheus
        else "each server's `/metrics`, scraped directly and concurrently (at most 16 at once; a server "
        "that fails backs off from 0.5 s to 10 s and never delays the others)"
    )
    return f"""\
# mtpwatch fleet — one row per server (and per `engine` label)

Source: {where}. Numbers are **engine-wide** (every request on that engine) over the window
(F3: 10 s / 60 s), with vLLM's formulas, as in the single-server view:

| column | meaning |
|---|---|
| tok/s | Δ`generation_tokens_total` / Δt (llama.cpp: `tokens_predicted_total`) |
| accept | Δaccepted / Δdraft_tokens |
| mean len | 1 + Δaccepted / Δdrafts |
| per pos | one bar per draft position: Δper_pos[i] / Δdrafts (marginal), full block = 100 % |
| KV, run/wait | gauges at the newest sample |
| method | `spec` when spec-decode counters exist (vLLM does not export the method), `off` when not |
| state | up (tokens in the window), idle, down (with since when and why), stale (Prometheus: no fresh sample) |

## Outliers (⚠, cell in red)

{OUTLIER_RULE}

## PromQL (paste into Grafana; `--prometheus` runs exactly these)

| number | query |
|---|---|
{query_rows}

`increase()` handles counter resets (a restarted server) and extrapolates to the window's edges,
so counts read through Prometheus are a few % larger than exact deltas over the same window; the
ratios (acceptance, mean length, per position) are unaffected when the counters of a target are
scraped together.

## Keys

| key | action |
|---|---|
| ↑ / ↓ | move between rows |
| Enter | open the row's single-server monitor (prompt console, charts); Escape returns |
| s / r | cycle the sort order / reverse it |
| F3 | window 10 s / 60 s |
| F2 | pause the display |
| F1 / ? | this help |
| Ctrl+Q / Ctrl+C | quit |
"""
