"""PlainLines: a plain widget's rows are the strips Textual's StylesCache renders for them.

Every PlainLines widget of the sample screens (the answer pane, the panel's number blocks, the
chart), live and in both themes and under line filters, is rendered both ways for crops of every
row and of column ranges: the segments (text and style) and cell lengths are the same. A widget
given anything to style (padding, a border, opacity, a border title) renders as Textual does."""

from __future__ import annotations

import random
from typing import Any

import pytest
from textual.filter import Monochrome
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Input

from mtpwatch.ui.app import make_app
from mtpwatch.ui.fastpaint.plain import PlainLines
from mtpwatch.ui.widgets.server_panel import ServerPanel
from tests.ui import samples
from tests.ui.conftest import needs_fast_paint


def _textuals(widget: PlainLines, crop: Region) -> list[Strip]:
    """What Textual renders for `crop`, every row drawn afresh (no row from its cache)."""
    widget._styles_cache.clear()
    return widget._styles_cache.render_widget(widget, crop)


def _same(ours: list[Strip], theirs: list[Strip]) -> bool:
    return [(list(s), s.cell_length) for s in ours] == [(list(s), s.cell_length) for s in theirs]


async def _compare_all(app: Any, rng: random.Random) -> int:
    """Compare every PlainLines widget on the screen, whole and in random crops; the rows compared."""
    rows = 0
    widgets = [w for w in app.screen.walk_children() if isinstance(w, PlainLines) and w.region.area]
    assert widgets
    for widget in widgets:
        assert widget.is_plain(), widget
        width, height = widget.region.size
        crops = [Region(0, 0, width, height)]
        for _ in range(6):
            y = rng.randrange(height)
            x = rng.randrange(width)
            crops.append(Region(x, y, rng.randint(1, width - x), rng.randint(1, height - y)))
        for crop in crops:
            theirs = _textuals(widget, crop)
            ours = widget.render_plain(crop)
            assert _same(ours, theirs), (widget, crop)
            rows += crop.height
    return rows


@needs_fast_paint
@pytest.mark.parametrize("kind", ["single", "ab"])
async def test_plain_rows_are_textuals_rows(kind: str) -> None:
    rng = random.Random(7)
    app = make_app(samples.config(kind), autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        for widget in pilot.app.screen.query(Input):
            widget.cursor_blink = False
        await samples.load(pilot.app, kind)
        for panel in pilot.app.screen.query(ServerPanel):
            panel.begin_answer("Write a very long essay about memory bandwidth.")
            panel.stream.feed(samples.ANSWER * 3)  # a prompt line, wrapped text, the position bar
            panel.stream.flush()
        await pilot.pause(0.1)
        rows = await _compare_all(pilot.app, rng)
        pilot.app.theme = "textual-light"  # other backgrounds and colours
        await pilot.pause(0.1)
        rows += await _compare_all(pilot.app, rng)
        pilot.app._filters.append(Monochrome())  # a line filter (as under NO_COLOR or a 'dim' screen)
        rows += await _compare_all(pilot.app, rng)
        assert rows > 300


@needs_fast_paint
async def test_a_styled_widget_renders_as_textual_does() -> None:
    app = make_app(samples.config("single"), autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await samples.load(pilot.app, "single")
        stream = pilot.app.screen.query_one(ServerPanel).stream
        assert stream.is_plain()
        for style in ("padding: 0 1;", "border: round red;", "opacity: 0.5;", "tint: red 20%;"):
            stream.set_styles(style)
            await pilot.pause(0.05)
            assert not stream.is_plain(), style
            crop = Region(0, 0, stream.region.width, stream.region.height)
            assert _same(stream.render_lines(crop), _textuals(stream, crop))
            stream.set_styles("padding: 0; border: none; opacity: 1; tint: transparent;")
            await pilot.pause(0.05)
            assert stream.is_plain(), style
        stream.border_title = "answer"
        assert not stream.is_plain()
