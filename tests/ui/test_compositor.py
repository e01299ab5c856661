"""RowCompositor and the rows it writes: what the terminal shows is what Textual shows, for fewer bytes."""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from rich.console import Console
from textual._compositor import ChopsUpdate, Compositor
from textual.content import Content
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input

from mtpwatch.ui.app import make_app
from mtpwatch.ui.fastpaint.compositor import RowCompositor
from mtpwatch.ui.fastpaint.frame import frame_now
from mtpwatch.ui.widgets.row_static import RowStatic
from mtpwatch.ui.widgets.server_panel import ServerPanel
from mtpwatch.ui.widgets.throughput_chart import ThroughputChart
from tests.ui import samples
from tests.ui.conftest import WaitUntil, needs_fast_paint
from tests.ui.refreshes import record_refreshes

WORDS = [
    "memory",
    "bandwidth",
    "bounds",
    "decoding",
    "because",
    "every",
    "token",
    "reads",
    "the",
    "weights",
    "once",
]


async def _start(pilot: Pilot[Any]) -> ServerPanel:
    for widget in pilot.app.screen.query(Input):
        widget.cursor_blink = False
    await samples.load(pilot.app, "single")
    panel = pilot.app.screen.query_one(ServerPanel)
    panel.begin_answer("Write a very long essay about memory bandwidth.")
    for chart in pilot.app.screen.query(ThroughputChart):
        chart.replot()  # drawn now: its once-a-second timer finds nothing new, however late it fires
    await _settle(pilot)
    return panel


async def _settle(pilot: Any) -> None:
    """Until what the set-up queued has been drawn: a pause in which no frame was composed and
    nothing is left dirty (a slow machine takes more of them, not another outcome)."""
    with _frames() as frames:
        for _ in range(200):
            count = len(frames)
            await pilot.pause(0.05)
            if len(frames) == count and not pilot.app.screen._compositor._dirty_regions:
                return
    raise AssertionError("the screen never settled")


@contextmanager
def _frames() -> Iterator[list[collections.Counter[Widget]]]:
    """Per partial update of the RowCompositor: the lines each widget rendered (`_fill` asks a
    widget's `render_lines` for a run of its rows)."""
    frames: list[collections.Counter[Widget]] = []
    partial, fill = RowCompositor.render_partial_update, RowCompositor._fill

    def counted_partial(self: RowCompositor) -> ChopsUpdate | None:
        frames.append(collections.Counter())
        return partial(self)

    def counted_fill(
        self: RowCompositor,
        chops: list[dict[int, Strip | None]],
        widget: Widget,
        region: Region,
        vx: int,
        vw: int,
        y1: int,
        y2: int,
    ) -> None:
        if frames:
            frames[-1][widget] += y2 - y1
        fill(self, chops, widget, region, vx, vw, y1, y2)

    RowCompositor.render_partial_update = counted_partial  # type: ignore[method-assign]
    RowCompositor._fill = counted_fill  # type: ignore[method-assign]
    try:
        yield frames
    finally:
        RowCompositor.render_partial_update = partial  # type: ignore[method-assign]
        RowCompositor._fill = fill  # type: ignore[method-assign]


def _pending(app: Any) -> bool:
    """Whether a repaint is still on its way to a frame: a widget refreshed and not yet handed to
    its screen, a widget handed and not yet composed, or regions composed and not yet written."""
    screen = app.screen
    return bool(
        screen._dirty_widgets
        or screen._compositor._dirty_regions
        or any(widget._repaint_required for widget in screen.walk_children())
    )


@needs_fast_paint
async def test_a_streamed_token_renders_its_row_only(wait_until: WaitUntil) -> None:
    app = make_app(samples.config("single"), autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        panel = await _start(pilot)
        stream = panel.stream
        assert isinstance(app.screen._compositor, RowCompositor)
        # The stream and the containers around it: every other widget is outside its rows.
        around = {stream, *stream.ancestors_with_self}
        with _frames() as frames:
            stream.feed("memory ")  # a short word on the last line: one row changes, no new line
            stream.flush(final=False)
            await wait_until(pilot, lambda: any(stream in frame for frame in frames))
        frame = next(frame for frame in frames if stream in frame)
        # Widgets outside the panel (the console, the footer) may repaint on their own meanwhile.
        inside = {w: n for w, n in frame.items() if panel in w.ancestors_with_self}
        assert set(inside) <= around, f"the panel rendered outside the answer pane: {set(inside) - around}"
        assert not any(isinstance(w, RowStatic | ThroughputChart) for w in inside)
        # One row changed: the stream renders that row; the containers around it, whose cells
        # there the stream covers, render nothing (on the RowCompositor before the covered rows
        # were skipped the panel, its body and the answer column rendered it too).
        assert inside == {stream: 1}

        # A view whose numbers moved repaints the rows whose text changed, not the answer pane.
        numbers = panel.query_one(".numbers", RowStatic)
        view = samples.view_mtp()
        before = numbers.content_region.height
        with _frames() as frames:
            panel.show(dataclasses.replace(view, server_tok_s=(view.server_tok_s or 0) + 1.0))
            await wait_until(pilot, lambda: any(numbers in frame for frame in frames))
        frame = next(frame for frame in frames if numbers in frame)
        assert stream not in frame
        assert 0 < frame[numbers] < before, (frame[numbers], before)


_ESCAPE = re.compile(r"\x1b\[([0-9;]*)([A-Za-z])")


def _apply(screen: dict[tuple[int, int], tuple[str, str]], data: str) -> None:
    """Write terminal output into `screen` ((x, y) → (character, SGR in effect)), as a terminal
    does for what Textual sends: cursor moves, SGR styles, text (single-width characters here)."""
    x = y = 0
    sgr = ""
    pos = 0
    for match in [*_ESCAPE.finditer(data), None]:
        text = data[pos : match.start() if match else len(data)]
        for char in text:
            if char == "\n":
                continue  # Textual moves the cursor before every chop
            screen[(x, y)] = (char, sgr)
            x += 1
        if match is None:
            break
        pos = match.end()
        params, command = match.groups()
        if command == "H":
            row, col = (int(v) for v in params.split(";"))
            x, y = col - 1, row - 1
        elif command == "m":
            sgr = "" if params in ("", "0") else params


@needs_fast_paint
@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["wide", "compact"])
async def test_partial_updates_show_what_textuals_show(size: tuple[int, int], wait_until: WaitUntil) -> None:
    """Every partial update is rendered both ways on the same state, RowCompositor's and Textual's
    own `Compositor.render_partial_update` (the second render takes the first one's cached lines,
    which are what Textual would render), and both outputs are applied to a screen of cells: the
    screens are the same after every frame, and RowCompositor's output is never longer."""
    frames: list[tuple[bool, int, int]] = []
    console = Console(width=size[0], color_system="truecolor")
    partial = RowCompositor.render_partial_update
    ours_screen: dict[tuple[int, int], tuple[str, str]] = {}
    textuals_screen: dict[tuple[int, int], tuple[str, str]] = {}

    def both(self: RowCompositor) -> ChopsUpdate | None:
        dirty = set(self._dirty_regions)
        ours = partial(self)
        self._dirty_regions.update(dirty)
        textuals = Compositor.render_partial_update(self)
        mine = ours.render_segments(console) if ours is not None else ""
        theirs = textuals.render_segments(console) if textuals is not None else ""
        _apply(ours_screen, mine)
        _apply(textuals_screen, theirs)
        frames.append((ours_screen == textuals_screen, len(mine), len(theirs)))
        return ours

    app = make_app(samples.config("single"), autostart=False)
    RowCompositor.render_partial_update = both  # type: ignore[method-assign]
    try:
        async with app.run_test(size=size) as pilot:
            panel = await _start(pilot)
            base = samples.view_mtp()
            for i in range(120):  # ~25 wrapped lines: new lines, jumps, the position bar moving
                count = len(frames)
                panel.stream.feed(" ".join(WORDS[i % len(WORDS) : i % len(WORDS) + 3]) + " ")
                panel.stream.flush(final=False)  # its frame is composed now (`frame_now`)
                if i % 7 == 0:  # the numbers change too, in a frame of Textual's update timer
                    tok_s = (base.server_tok_s or 40.0) + i / 10
                    panel.show(dataclasses.replace(base, server_tok_s=tok_s, kv_cache_usage=i / 200))
                await wait_until(pilot, lambda count=count: len(frames) > count and not _pending(app))  # type: ignore[misc]
            panel.stream.finish()
            await pilot.pause(0.1)
    finally:
        RowCompositor.render_partial_update = partial  # type: ignore[method-assign]
    assert len(frames) >= 120
    assert all(same for same, _, _ in frames), f"{sum(not s for s, _, _ in frames)} screens differ"
    assert all(mine <= theirs for _, mine, theirs in frames)
    assert sum(mine for _, mine, _ in frames) < sum(theirs for _, _, theirs in frames)


@pytest.mark.parametrize(
    ("kind", "size"), [("single", (160, 48)), ("single", (200, 50)), ("ab", (80, 24)), ("down", (80, 24))]
)
async def test_rows_drawn_line_by_line_look_as_the_static_draws_them(
    kind: str, size: tuple[int, int]
) -> None:
    """A RowStatic draws each row from its own line; the terminal output of every row is the one
    Textual's Static renders from the whole block."""
    app = make_app(samples.config("ab" if kind == "ab" else "single"), autostart=False)
    console = Console(width=size[0], color_system="truecolor")
    async with app.run_test(size=size) as pilot:
        await samples.load(app, kind)
        await pilot.pause(0.2)
        checked = 0
        for widget in app.screen.query(RowStatic):
            if not widget.display or widget._row_lines is None:
                continue
            ours = [widget.render_line(y).render(console) for y in range(widget.size.height)]
            lines = widget._row_lines
            block = Content.from_markup("\n".join(lines))
            # The block a RowStatic holds is its lines parsed one by one and joined: the same
            # text and spans as the whole block parsed at once.
            assert isinstance(widget.visual, Content)
            assert (widget.visual.plain, widget.visual.spans) == (block.plain, block.spans)
            widget.update(block, layout=False)  # the Static renders the block parsed at once
            widget._dirty_regions.add(widget.size.region)
            textuals = [Widget.render_line(widget, y).render(console) for y in range(widget.size.height)]
            widget._row_lines = lines
            assert ours == textuals, sorted(widget.classes)
            checked += 1
        assert checked >= 2


async def test_the_position_bar_repaints_the_cells_that_changed() -> None:
    """When the thumb moves as the text grows, the bar's cells that joined or left it are
    repainted, not its column (every repainted row is composed by the containers around)."""
    app = make_app(samples.config("single"), autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        panel = await _start(pilot)
        stream = panel.stream
        height = stream.content_region.height
        stream.feed("".join(f"line {i}\n" for i in range(3 * height)))
        stream.flush()
        bar_x = stream.content_region.width - 1
        refreshed = record_refreshes(stream)
        moved = 0
        for i in range(3 * height):  # until the thumb has moved a few times
            before = stream._bar()
            refreshed.clear()
            stream.feed(f"more {i}\n")
            stream.flush(final=False)
            if stream._bar() == before or not refreshed or not refreshed[-1]:
                continue  # no move, or a jump (the whole pane repaints)
            bar_cells = [r for r in refreshed[-1] if r.x == bar_x and r.width == 1]
            assert bar_cells and sum(r.height for r in bar_cells) <= 2, bar_cells
            moved += 1
        assert moved >= 2


@needs_fast_paint
async def test_a_burst_is_composed_at_once_with_what_waits_for_the_timer() -> None:
    """`frame_now`: a streamed burst is composed in the call that fed it (no pause, no message
    loop), together with a widget already waiting for the screen's update timer, which is then not
    waiting any more (composed, not dropped). It declines while anything is the timer's to do in
    order (here a relayout, a batch update), and while another screen (the help) is shown; then
    the pane's repaint goes through Textual's `refresh`, done when the help is closed."""
    app = make_app(samples.config("single"), autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        panel = await _start(pilot)
        stream, numbers = panel.stream, panel.query_one(".numbers", RowStatic)
        screen = app.screen
        # The numbers' first row, refreshed and handed to the screen: what Textual's timer would
        # compose at its next tick.
        numbers._set_dirty(Region(0, 0, numbers.size.width, 1))
        screen._dirty_widgets.add(numbers)
        with _frames() as frames:
            stream.feed("memory ")
            stream.flush(final=False)
            composed = list(frames)  # before any await: the call itself composed the frame
        assert len(composed) == 1 and composed[0][stream] == 1 and composed[0][numbers] == 1, composed
        assert not screen._dirty_widgets and not screen._compositor._dirty_regions

        screen._layout_required = True
        assert not frame_now({stream: ()})
        screen._layout_required = False
        with app.batch_update():  # Textual holds frames for the batch: none is composed inside it
            assert not frame_now({stream: ()})
        await _settle(pilot)

        await pilot.press("f1")
        assert app.screen is not screen
        assert not frame_now({stream: ()})
        with _frames() as frames:
            stream.feed("bandwidth ")
            stream.flush(final=False)
            assert not frames  # not composed behind the help
            assert stream._repaint_required  # left to Textual's refresh
            await pilot.press("escape")
            await _settle(pilot)
        assert app.screen is screen
        # Back on the monitor, Textual repaints it whole (a full update, not counted above).
        assert not stream._repaint_required and "bandwidth" in stream.lines[-1]
        assert frame_now({stream: ()})


@needs_fast_paint
async def test_two_answers_streaming_side_by_side_share_one_frame(wait_until: WaitUntil) -> None:
    """The painter paints every pane with new text at once, and their rows go out in one frame."""
    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await samples.load(pilot.app, "ab")
        a, b = (panel.stream for panel in app.screen.query(ServerPanel))
        await _settle(pilot)
        with _frames() as frames:
            a.feed("memory ")
            b.feed("bandwidth ")
            await wait_until(pilot, lambda: any(frame[a] or frame[b] for frame in frames))
        first = next(frame for frame in frames if frame[a] or frame[b])
        assert first[a] and first[b], first


@needs_fast_paint
def test_the_fast_paint_only_on_a_verified_textual_and_not_when_switched_off(monkeypatch: Any) -> None:
    """Another Textual release, or `MTPWATCH_FASTPAINT=0`, gets Textual's own compositor and paint
    (the fast paint uses private internals); the suite runs on the pinned, verified one."""
    from mtpwatch.ui.fastpaint.frame import FrameScreen
    from mtpwatch.ui.fastpaint.gate import ENV, VERIFIED_TEXTUAL, gate

    monkeypatch.delenv(ENV, raising=False)
    assert gate(next(iter(VERIFIED_TEXTUAL))).on
    assert gate().words() == f"fast paint: on (Textual {next(iter(VERIFIED_TEXTUAL))})"
    stock = gate("8.3.0")
    assert not stock.on and stock.words() == "fast paint: off (Textual 8.3.0 is not a checked release)"
    assert isinstance(FrameScreen()._compositor, RowCompositor)
    monkeypatch.setenv(ENV, "0")
    assert gate().words() == "fast paint: off (MTPWATCH_FASTPAINT=0)"
    screen = FrameScreen()
    assert not screen.fast_paint and type(screen._compositor) is Compositor


async def test_an_error_while_painting_ends_the_app_as_textuals_own_frames_do() -> None:
    """A failure inside a paint (its frame is composed outside Textual's timer) goes to the app's
    exception handler, as one in Textual's own frames does: the app ends and shows it."""
    app = make_app(samples.config("single"), autostart=False)
    with pytest.raises(RuntimeError, match="boom"):
        async with app.run_test(size=(160, 48)) as pilot:
            panel = await _start(pilot)

            def fail(text: str) -> None:
                raise RuntimeError("boom")

            panel.stream._append = fail  # type: ignore[method-assign]
            panel.stream.feed("memory ")
            for _ in range(200):  # until the app ends (a slow machine takes more pauses)
                if app.return_code is not None:
                    break
                await pilot.pause(0.05)
    assert app.return_code == 1
