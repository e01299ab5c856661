"""ServerPanel: the view of one server (numbers, bars, chart, roofline, answer pane); it only draws."""

from __future__ import annotations

import asyncio
from typing import TypeVar

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.geometry import Region
from textual.reactive import var
from textual.widget import Widget
from textual.widgets import Log, Static

from mtpwatch.session.views import PromptSummary, ServerView, StartupView, mixed_lengths
from mtpwatch.ui.fastpaint.rows import RowRefresh
from mtpwatch.ui.markup.panel import (
    ANSWERS_HINT,
    compact_numbers,
    render_bars,
    render_gauges,
    render_header,
    render_numbers,
    render_startup,
    render_summary,
    render_verdict,
)
from mtpwatch.ui.markup.roofline import render_bandwidth, render_roofline_hidden
from mtpwatch.ui.markup.titles import render_pane_title
from mtpwatch.ui.widgets.row_static import RowStatic
from mtpwatch.ui.widgets.throughput_chart import ThroughputChart
from mtpwatch.ui.widgets.token_stream import TokenStream

W = TypeVar("W", bound=Widget)

MIN_ANSWER_ROWS = 6
"""Rows an A/B pane's answer keeps before its blocks give it theirs, one tier at a time (`_roomless`)."""

CHART_ROWS_AB = 6
"""The chart's rows in an A/B pane (`#panels.-ab ServerPanel .chart` in the CSS): counted, not read,
since a hidden chart has none."""


class ServerPanel(RowRefresh, Vertical):
    """Live view of one server. Data comes in one way: `show(view)` with a complete `ServerView`,
    from the screen's view tick (`PanelFeeds.tick_views`); the panel never fetches or builds one."""

    view: var[ServerView | None] = var(None, always_update=True)
    """The newest view shown; `watch_view` pushes it into the children (a `var`: no panel repaint)."""

    def __init__(
        self,
        initial: ServerView,
        *,
        index: int,
        starts_server: bool = False,
        max_fps: int = 25,
    ) -> None:
        super().__init__(id=f"panel-{index}", classes="server-panel")
        self._max_fps = max_fps
        self._initial = initial
        self._starts_server = starts_server
        self._summaries: list[tuple[int, PromptSummary]] = []
        """The last three finished prompts (number, summary), oldest first."""
        self._shown: dict[str, str] = {}
        self._drawn: dict[str, str] = {}
        """What each RowStatic shows: its markup and the blank rows it keeps (`_set`)."""
        self._held_rows: dict[str, tuple[tuple[int, int], int]] = {}
        """((panel width, height), rows) each RowStatic keeps at least while the panel's size holds."""
        self._found: dict[str, Widget] = {}
        self.prompt_count = 0
        self.last_summary: PromptSummary | None = None

    def compose(self) -> ComposeResult:
        yield RowStatic(classes="panel-header")
        # Two panes, one shown (a plain display toggle: a ContentSwitcher would be one more container
        # that Textual composes on every frame of a streaming answer).
        startup = Vertical(id="startup", classes="startup")
        startup.display = self._starts_server
        monitor = Horizontal(id="monitor", classes="body")
        monitor.display = not self._starts_server
        with startup:
            yield Static("starting…", classes="startup-phase")
            yield Log(max_lines=5_000, classes="server-log")
        with monitor:
            with Vertical(classes="metrics"):
                yield RowStatic(classes="verdict")
                yield RowStatic(classes="numbers")
                yield RowStatic(classes="bars")
                yield ThroughputChart(classes="chart")
                yield RowStatic(classes="bandwidth")
            with Vertical(classes="answer"):
                yield TokenStream(classes="stream", min_paint_interval_s=1 / self._max_fps)
                yield Static(ANSWERS_HINT, classes="summary")

    def on_mount(self) -> None:
        self._set_title(self._initial.label)
        self.show(self._initial)

    # -- data in -------------------------------------------------------------------------------

    def show(self, view: ServerView) -> None:
        self.view = view

    @property
    def bandwidth_visible(self) -> bool:
        """The roofline panel is shown (wide layouts, monitor pane, this screen on top)."""
        bandwidth = self._one(".bandwidth", Static)
        monitor = self._one("#monitor", Horizontal)
        return bool(bandwidth.display) and bool(monitor.display) and self.screen.is_current

    def watch_view(self, view: ServerView | None) -> None:
        if view is None or not self.is_mounted:
            return
        short = self.screen.has_class("-short")
        compact = short or self.screen.has_class("-narrow")
        ab = self.parent is not None and self.parent.has_class("-ab")
        header = self._one(".panel-header", Static)
        # the label, its method part following what a started server ran
        title = render_pane_title(self._initial.label, view, starts_server=self._starts_server)
        text = render_header(view, compact=compact, width=None if short else _width(header))
        if short:  # 80×24: model, method and status go in the border; the detail keeps a row
            head, _, text = text.partition("\n")
            title += f" · {head}"
        self._set_title(title)
        header.display = bool(text) or not short
        self._set(".panel-header", text)
        width = _width(self._one(".numbers", Static))
        # Compact: the baseline's "no speculation" line is not worth a row; in the short A/B view
        # the verdict gives its row to the answer (the numbers stay).
        hide_verdict = compact and (view.speculative is False or (short and ab))
        verdict = "" if hide_verdict else render_verdict(view, width)
        bandwidth = render_bandwidth(view.bandwidth, view.window, width, method=view.method)
        bars = render_bars(
            view.per_position,
            view.per_position_conditional,
            window=view.window,
            columns=width,
            mixed=mixed_lengths(view),
        )
        # compact: the gauges take the bottom border at 80×24, where an A/B pane has no row to spare
        numbers = compact_numbers(view, width, gauges=not short) if compact else render_numbers(view, width)
        head = self._shown.get(".panel-header", "")
        # An A/B pane whose answer would keep fewer than MIN_ANSWER_ROWS gives rows to it, block by
        # block, each tier asked only when the one before was not enough (`_roomless`):
        # the roofline (160×40; its one phrase stays in the numbers, and says so), the chart (120×40;
        # the tok/s stay in the numbers), then the bars with the wide numbers, for the compact ones
        # (as at 80 columns: they keep the positions and BW). Stacked (110×36): the verdict.
        roomless = ab and not compact and self._roomless(head, verdict, numbers, bars, bandwidth)
        if roomless:
            numbers += "\n" + render_roofline_hidden(view.bandwidth, width)
        chartless = roomless and self._roomless(head, verdict, numbers, bars)
        cramped = chartless and self._roomless(head, verdict, numbers, bars, chart=False)
        if cramped:
            numbers = compact_numbers(view, width)
            verdict = "" if view.speculative is False else verdict
        if ab and compact and not short and verdict and self._roomless(head, verdict, numbers, chart=False):
            verdict = ""
        self.set_class(roomless, "-roomless")
        self.set_class(chartless, "-chartless")
        self.set_class(cramped, "-cramped")
        self._one(".verdict", Static).display = bool(verdict)
        self._set(".verdict", verdict)
        self._set(".numbers", numbers)
        self._set_subtitle(render_gauges(view) if short else "")
        self._set(".bars", bars)
        self._set(".bandwidth", bandwidth)
        chart = self._one(".chart", ThroughputChart)
        chart.show(view.server_series, view.client_series)
        for status in ("up", "down", "failed", "starting", "connecting", "stopped"):
            self.set_class(view.status == status, f"-{status}")

    def _roomless(self, *blocks: str, chart: bool = True) -> bool:
        """A/B: whether the answer would keep fewer than `MIN_ANSWER_ROWS` beside `blocks` (the
        rows' texts) and the chart (unless `chart=False`). A function of the view and the panel's
        size alone, not of what was shown before: a replay that seeks draws what a panel of its size
        drew live (the replay screen, without a console, has taller panels)."""
        chart_rows = CHART_ROWS_AB if chart else 0
        height, chrome = self._room()
        if not (height and chrome):  # before the first layout
            return False
        rows = sum(block.count("\n") + 1 for block in blocks if block)
        return height - rows - chart_rows - chrome < MIN_ANSWER_ROWS

    def on_resize(self) -> None:
        # Wrapped lines (verdict, roofline summary) follow the new width, and the summary lines the
        # new height. The view drawn is the newest at that time, not the one when the resize arrived.
        self.call_after_refresh(self._redraw)

    def _room(self) -> tuple[int, int]:
        """The panel's rows, and the answer's rows that are not its stream (summary, borders)."""
        answer = self._one(".answer", Vertical)
        return self.content_region.height, answer.outer_size.height - self.stream.outer_size.height

    def _redraw(self, room: tuple[int, int] | None = None) -> None:
        """Draw the view and the summaries again, and once more if the rows the tiers counted
        (`room`) moved by then: a resize that stacks the panes (120 → 110 columns) can arrive before
        the answer's new rows are laid out."""
        if room is not None and self._room() == room:
            return
        drawn_at = self._room()
        self.watch_view(self.view)
        self.draw_summaries()
        if room is None:
            self.call_after_refresh(self._redraw, drawn_at)

    def _one(self, selector: str, kind: type[W]) -> W:
        """`query_one`, remembered: the panel's widgets live as long as the panel, and a DOM query
        (CSS matching over the subtree) on every scrape and every token adds up."""
        found = self._found.get(selector)
        if found is None:
            found = self._found[selector] = self.query_one(selector, kind)
        assert isinstance(found, kind)
        return found

    def _set_title(self, title: str) -> None:
        """Set the border title only when it changed: Textual repaints the whole panel on every
        assignment, even of the same title (over SSH, ~24 KB a time at 160×48)."""
        if self._shown.get("border-title") != title:
            self._shown["border-title"] = title
            self.border_title = title

    def _set_subtitle(self, markup: str) -> None:
        """The bottom border's text (80×24: the gauges), set only when it changed; it repaints the
        bottom border's row alone, where a title's assignment repaints the whole panel."""
        if self._shown.get("border-subtitle", "") == markup:
            return
        self._shown["border-subtitle"] = markup
        offset, outer = self.content_offset, self.outer_size
        # `refresh` takes regions in content coordinates: the border's row is below the content.
        row = (Region(-offset.x, outer.height - 1 - offset.y, outer.width, 1),) if outer.area else None
        with self.refreshing_rows(row):
            self.border_subtitle = markup  # Textual calls `refresh()` with no regions

    def _set(self, selector: str, markup: str) -> None:
        """Update a Static only when its text changed; relayout only when it needs more rows.

        A layout refresh recomposes the whole screen (~20 ms at 200×50), so scrapes twice a second
        must not trigger one when only the digits moved, nor when a block's text gets shorter: a
        block keeps the rows it had at this panel size (blank rows at its end), so a verdict that
        wraps to two lines or three, or bars that come and go, do not move the blocks below them.
        """
        self._shown[selector] = markup
        rows = markup.count("\n") + 1
        size = (self.size.width, self.size.height)
        held_size, held_rows = self._held_rows.get(selector, (size, 0))
        if held_size == size and rows < held_rows:
            drawn = markup + "\n" * (held_rows - rows)
        else:
            drawn = markup
            self._held_rows[selector] = (size, rows)
        previous = self._drawn.get(selector)
        if previous == drawn:
            return
        self._drawn[selector] = drawn
        # Same line count: no relayout, and only the rows whose line changed are repainted.
        self._one(selector, RowStatic).update_lines(previous, drawn)

    # -- startup -------------------------------------------------------------------------------

    def show_startup(self, phase: str, lines: list[str]) -> None:
        self._one(".startup-phase", Static).update(Content.from_markup(phase))
        if lines:
            self._one(".server-log", Log).write_lines(lines)

    def startup_progress(self, view: StartupView, lines: list[str]) -> None:
        """A launch's progress (`session.launching.StartupProgress`): its phase and new log lines."""
        self.show_startup(render_startup(view), lines)

    def show_pane(self, pane: str) -> None:
        """Show the "monitor" or the "startup" log (a launch that failed: its last lines)."""
        self._one("#startup", Vertical).display = pane == "startup"
        self._one("#monitor", Horizontal).display = pane == "monitor"

    # -- answers -------------------------------------------------------------------------------

    @property
    def stream(self) -> TokenStream:
        return self._one(".stream", TokenStream)

    def begin_answer(self, prompt: str, *, summary_follows: bool = True) -> None:
        """Start a new answer: a blank line, the prompt marker, then tokens; the hint goes. An answer
        whose summary line follows (`add_summary`) has the summary's row while it streams where the
        CSS says so (the 80×24 A/B view: `-answering`)."""
        self.stream.start_block(f"▶ {prompt}")
        if not self._summaries:
            self._set_summary("")
        self._one(".summary", Static).set_class(summary_follows, "-answering")

    def add_summary(self, summary: PromptSummary, number: int | None = None) -> None:
        """Show the summary line of a finished prompt; `number`: its `#N` where the caller knows it
        (a replay: from the recording), else the next one."""
        self.keep_summary(summary, number)
        self.stream.finish(cancelled=summary.cancelled)
        self._one(".summary", Static).remove_class("-answering")
        self.draw_summaries()

    def keep_summary(self, summary: PromptSummary, number: int | None = None) -> None:
        """Keep a finished prompt's summary line without touching the answer pane (a replay's seek
        passes the prompts before the one it shows); drawn by the next `add_summary` or `draw_summaries`."""
        self.prompt_count = self.prompt_count + 1 if number is None else number
        self.last_summary = summary
        self._summaries = [*self._summaries[-2:], (self.prompt_count, summary)]

    def clear_summaries(self) -> None:
        """No prompt finished yet (a replay's seek back starts again from the recording's start)."""
        self.prompt_count = 0
        self.last_summary = None
        self._summaries = []
        self._set_summary(ANSWERS_HINT)

    def draw_summaries(self) -> None:
        """Draw the summary lines kept (`keep_summary`): the newest that fit the summary's rows (1 to
        3, set by the CSS), newest at the bottom (lines that do not fit are not sent at all)."""
        if not self._summaries:
            return
        summary = self._one(".summary", Static)
        rows = summary.content_region.height or len(self._summaries)
        compact = self.screen.has_class("-narrow") or self.screen.has_class("-short")
        width = _width(summary)
        # A summary wrapped in a narrow pane takes two rows; the newest is shown even where its lines
        # do not fit, on one line (cut at the edge).
        shown: list[str] = []
        for n, s in reversed(self._summaries):
            text = render_summary(n, s, compact=compact, width=width)
            if sum(line.count("\n") + 1 for line in shown) + text.count("\n") + 1 > rows:
                if not shown:
                    shown.append(render_summary(n, s, compact=True))
                break
            shown.append(text)
        # Fixed height, no wrapping (CSS): no relayout.
        self._set_summary("\n".join(reversed(shown)))

    def _set_summary(self, markup: str) -> None:
        if self._shown.get(".summary") != markup:
            self._shown[".summary"] = markup
            self._one(".summary", Static).update(Content.from_markup(markup), layout=False)

    async def settle(self) -> None:
        """Flush the stream and redraw the chart now (tests and screenshots)."""
        self.stream.flush()
        self._one(".chart", ThroughputChart).replot()
        await asyncio.sleep(0)


def _width(widget: Widget) -> int | None:
    """The cells a row of `widget` has (None before its first layout: nothing is fitted then)."""
    return widget.content_region.width or None
