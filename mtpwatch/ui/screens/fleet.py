# ruff: noqa: E501
"""FleetScreen: one row per server (and engine); Enter opens that server's monitor, Escape returns.

The rows come from `core.fleet.FleetScraper` (direct scrapes of every URL, concurrent, bounded, with
per-server backoff) or from `core.sources.prometheus.PrometheusSource` (queries over the window).
The screen only sorts, filters and draws; every number, group and outlier mark is computed in the
core. A fleet of more than `GROUP_AT` rows opens by group (`core.fleet.groups`): Enter lists a
group's instances, Escape goes back, `g` switches between groups and rows, `/` filters.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Footer, Input, Static

from mtpwatch.config import AppConfig, FleetSettings, ServerSpec
from mtpwatch.core.fleet.groups import FleetGroup, summarise
from mtpwatch.core.fleet.outliers import OUTLIER_RULE, GroupKey, group_key
from mtpwatch.core.fleet.rows import FleetRow
from mtpwatch.core.fleet.scraper import FleetScraper, Target
from mtpwatch.core.sources.prometheus import (
    HISTORY_ONLY,
    FleetRead,
    PrometheusError,
    PrometheusSource,
    probe_queries,
    promql_queries,
)
from mtpwatch.core.sources.prometheus_fit import refresh_period
from mtpwatch.session.drivers import LiveDriver
from mtpwatch.session.prometheus import prometheus_feed_factory
from mtpwatch.ui.fastpaint.frame import FrameScreen
from mtpwatch.ui.markup.titles import render_fleet_status, render_fleet_title
from mtpwatch.ui.screens.keys import HelpRow, app_keys, key_table
from mtpwatch.ui.screens.monitor import MonitorScreen
from mtpwatch.ui.widgets.fleet_table import GROUP_SORTS, SORTS, FleetTable, GroupTable, LineTable

WINDOWS_S = (10.0, 60.0)
"""Windows F3 cycles through (the --window given first when it is another value)."""
REFRESH_S = 1.0
"""Seconds between two table updates of a directly scraped fleet (the numbers span a 10 s or 60 s
window; a faster redraw costs CPU, tests/bench/fleet_scale.py)."""
PROMETHEUS_REFRESH_S = 5.0
"""Seconds between two rounds of Prometheus queries (longer when the store is slow:
`prometheus_fit.refresh_period`)."""
GROUP_AT = 40
"""A fleet of more rows than this opens by group."""
HISTORY_AT = 100
"""Rows up to which a Prometheus refresh also reads each row's tok/s history (a range query)."""

FLEET_HELP: tuple[HelpRow, ...] = (
    (("row-up", "row-down"), "move between rows"),
    (("row-page-up", "row-page-down", "row-first", "row-last"), "a page up / down, the first / last row"),
    (("fleet-open",), "open the row's single-server monitor (prompt console, charts); Escape returns"),
    (("fleet-sort", "fleet-reverse"), "cycle the sort order / reverse it"),
    (
        ("fleet-groups",),
        "the fleet by group (model, method, k: p10/p50/p90, counts) or by instance; more than "
        f"{GROUP_AT} rows open by group",
    ),
    (("fleet-open", "fleet-back"), "on a group: list its instances / back to the groups"),
    (("fleet-filter",), "filter rows by a word (server, model, method, state, reason); empty clears"),
    (("fleet-window",), "window 10 s / 60 s"),
    (("pause",), "pause the display"),
    (("help",), "this help"),
    (("screenshot",), "save a screenshot of the screen (SVG)"),
    (("palette",), "command palette"),
    (("quit", "quit-ctrl-c"), "quit"),
)


class FleetScreen(FrameScreen):
    BINDINGS = [
        Binding("s", "cycle_sort", "Sort", tooltip="Cycle the sort order.", id="fleet-sort"),
        Binding("r", "reverse_sort", "Reverse", tooltip="Reverse the sort order.", id="fleet-reverse"),
        Binding("f3", "cycle_window", "Window", tooltip="Rates over 10 s or 60 s.", id="fleet-window"),
        Binding(
            "enter",
            "open_row",
            "Open",
            tooltip="Open this server's monitor (Escape returns).",
            id="fleet-open",
        ),
        Binding(
            "g",
            "toggle_groups",
            "Groups",
            tooltip="Show the fleet by group or by instance.",
            id="fleet-groups",
        ),
        Binding(
            "slash",
            "filter",
            "Filter",
            tooltip="Show only rows whose text contains a word.",
            id="fleet-filter",
        ),
        Binding("escape", "back", "Back", show=False, id="fleet-back"),
    ]

    def __init__(
        self, config: AppConfig, *, autostart: bool = True, clock: Callable[[], float] = time.monotonic
    ):
        super().__init__()  # FrameScreen: partial updates render only the rows they write (fast paint)
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
        self.by_group: bool | None = None
        """Groups (True) or rows (False); None until the first rows decide (more than `GROUP_AT`)."""
        self.group_open: GroupKey | None = None
        """The group whose instances the rows show (Enter on a group)."""
        self.filter_text = ""
        self.last_read: FleetRead | None = None
        """The newest Prometheus refresh (its window fit and what it cost)."""
        self.slow_note = ""

    @property
    def window_s(self) -> float:
        return self.windows[self.window_index]

    def compose(self) -> ComposeResult:
        yield Static(id="title-bar")
        with VerticalScroll(id="fleet-scroll"):
            yield GroupTable(id="group-table")
            yield FleetTable(id="fleet-table")
        yield Input(
            placeholder="filter: model, method, server, state… (Enter applies, empty clears)",
            id="fleet-filter",
        )
        yield Static(id="fleet-status")
        yield Footer()

    def on_mount(self) -> None:
        self.update_title()
        self.query_one("#group-table").display = False
        self.query_one("#fleet-filter").display = False
        self.query_one("#fleet-table", FleetTable).focus()
        scroll = self.query_one("#fleet-scroll", VerticalScroll)
        self.watch(scroll, "scroll_y", lambda _: self._table().redraw(), init=False)
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

    def help_text(self) -> str:
        """The help (`MtpWatchApp.action_help`): the columns, the outlier rule, the PromQL, the keys."""
        keys = key_table(FLEET_HELP, [*FleetScreen.BINDINGS, *LineTable.BINDINGS, *app_keys(self.app)])
        return fleet_help(self.fleet, keys, self.cost_words())

    def update_title(self) -> None:
        sort = self._sorts()[self.sort_index][0]
        if self.by_group:
            sort += " · by group (g: rows)"
        elif self.group_open is not None:
            _, model, method, k = self.group_open
            sort += f" · group {model} {method} k={k} (Escape: groups)"
        window = self.window_s if self.last_read is None else self.last_read.fit.window_s
        source = f"{len(self.fleet.urls)} servers, direct /metrics"
        if self.fleet.prometheus is not None:
            source = f"Prometheus {self.fleet.prometheus} {self.fleet.selector or ''}".rstrip()
        title = render_fleet_title(window, sort, reverse=self.reverse, source=source)
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
                period = PROMETHEUS_REFRESH_S
                try:
                    small = self.by_group is False and len(self.rows) <= HISTORY_AT
                    history = 60.0 if small else 0.0  # (a large fleet: no per-row range query)
                    read = await self.source.read(self.window_s, history_s=history)
                    self.last_read, rows, self.error = read, read.rows, ""
                    period, self.slow_note = refresh_period(PROMETHEUS_REFRESH_S, read.stats.seconds)
                except PrometheusError as exc:
                    rows, self.error = self.rows, str(exc)
                self.show_rows(rows)
                await asyncio.sleep(period)
        finally:
            await self.source.aclose()

    def _table(self) -> LineTable:
        return self.query_one("#group-table" if self.by_group else "#fleet-table", LineTable)

    def _sorts(self) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
        return GROUP_SORTS if self.by_group else SORTS

    def visible_rows(self) -> list[FleetRow]:
        """The rows the filter and an opened group let through."""
        rows = self.rows
        if self.group_open is not None:
            rows = [r for r in rows if group_key(r) == self.group_open]
        if self.filter_text:
            needle = self.filter_text.lower()
            rows = [r for r in rows if needle in _row_text(r)]
        return rows

    def show_rows(self, rows: list[FleetRow]) -> None:
        """Sort and draw `rows` (by group for a large fleet); the status line says how scraping keeps
        up, what the store was asked and what is marked."""
        self.rows = rows
        if self.by_group is None and rows:
            self._set_mode(len(rows) > GROUP_AT)
        shown: list[Any] = summarise(self.visible_rows()) if self.by_group else self.visible_rows()
        self._table().show(sorted(shown, key=self._sorts()[self.sort_index][1], reverse=self.reverse))
        self.query_one("#fleet-status", Static).update(Content.from_markup(self.status_line(rows)))

    def status_line(self, rows: list[FleetRow]) -> str:
        marked = [f"{r.name} ({', '.join(r.outliers)})" for r in rows if r.outliers]
        cycle_ms = None
        if self.scraper is not None and self.scraper.stats.cycles:
            cycle_ms = statistics.median_high(self.scraper.stats.cycles[-40:]) * 1000
        up = sum(1 for r in rows if r.state in ("up", "idle", "restarted"))
        notes = list(self.last_read.fit.notes) if self.last_read is not None else []
        if self.slow_note:
            notes.append(self.slow_note)
        if self.last_read is not None:
            notes.append(self.cost_words())
        if self.filter_text:
            notes.append(f"filter {self.filter_text!r}: {len(self.visible_rows())} rows")
        if len(marked) > 8:
            marked = [*marked[:8], f"… {len(marked) - 8} more"]
        return render_fleet_status(self.error, marked, cycle_ms, up, len(rows), notes=notes)

    def cost_words(self) -> str:
        """What the newest Prometheus refresh asked: queries, series returned, bytes, seconds."""
        if self.last_read is None:
            return ""
        st = self.last_read.stats
        return (
            f"last refresh: {st.queries} queries, {st.series} series, {st.bytes / 1024:.0f} KiB "
            f"in {st.seconds:.2f} s"
        )

    def _set_mode(self, by_group: bool) -> None:
        self.by_group = by_group
        self.sort_index = 0
        self.query_one("#group-table").display = by_group
        self.query_one("#fleet-table").display = not by_group
        self._table().focus()
        self.query_one("#fleet-scroll", VerticalScroll).scroll_home(animate=False)
        self.update_title()

    # -- actions -------------------------------------------------------------------------------

    def _redraw(self) -> None:
        self.update_title()
        self.show_rows(self.rows)

    def action_cycle_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(self._sorts())
        self._redraw()

    def action_toggle_groups(self) -> None:
        self.group_open = None
        self._set_mode(not self.by_group)
        self._redraw()

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.display = True
        box.value = self.filter_text
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.filter_text = event.value.strip()
        event.input.display = False
        self._table().focus()
        self._redraw()

    def action_back(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        if box.display:
            box.display = False
            self._table().focus()
        elif self.group_open is not None:
            self.group_open = None
            self._set_mode(True)
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
        row = self._table().selected()
        if row is None:
            return
        if isinstance(row, FleetGroup):
            self.group_open = row.key
            self._set_mode(False)
            self._redraw()
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
        driver = LiveDriver(config, clock=self.clock, factory=factory)
        screen = MonitorScreen(
            config, autostart=self.autostart, clock=self.clock, driver=driver, returns=True
        )
        self.app.push_screen(screen)


def fleet_help(fleet: FleetSettings, keys: str, cost: str = "") -> str:
    """The help screen of the fleet view: columns, the outlier rule, the PromQL it runs, (`cost`)
    what the newest refresh asked, and its `keys` (`FLEET_HELP`)."""
    queries = promql_queries(fleet.window_s, fleet.selector)
    query_rows = "\n".join(f"| {name} | `{q}` |" for name, q in queries.items())
    probes = "\n".join(f"| {name} | `{q}` |" for name, q in probe_queries(fleet.selector).items())
    asked = (
        f"{sum(1 for n in queries if n not in HISTORY_ONLY)} instant queries a refresh (every {PROMETHEUS_REFRESH_S:g} s, longer when the "
        f"store is slow: 4 × the time a refresh took); {cost or 'no refresh yet'}."
    )
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
| state | up (tokens in the window), idle, restarted (counters reset in the window), down (with since when and why), stale (Prometheus: no sample for 3 scrape intervals), missing (seen in the last hour, silent now) |

## Outliers (⚠, cell in red)

{OUTLIER_RULE}

## PromQL (paste into Grafana; `--prometheus` runs exactly these)

{asked}

| number | query |
|---|---|
{query_rows}

Once a minute (what was seen in the last hour: rows silent now are listed as **missing**), and the
raw samples of 5 instances every 5 minutes (the scrape interval: the window is never shorter than 4
of them, and a window longer than the store's history is flagged):

| number | query |
|---|---|
{probes}

Ages (stale) are taken at the instant the store evaluated (`vector(time())`): VictoriaMetrics answers
instant queries 30 s in the past (its `-search.latencyOffset`).

`increase()` handles counter resets (a restarted server) and extrapolates to the window's edges,
so counts read through Prometheus are a few % larger than exact deltas over the same window; the
ratios (acceptance, mean length, per position) are unaffected when the counters of a target are
scraped together.

## Keys

{keys}
"""


def _row_text(row: FleetRow) -> str:
    """What `/` searches in a row, lower case."""
    k = "" if row.k is None else f"k={row.k}"
    return " ".join((row.name, row.model or "", row.method, k, row.state, row.reason, *row.why)).lower()
