"""Snapshot tests of the main screens from fixed sample states (no server, no clock)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from mtpwatch.ui.app import make_app
from tests.ui import samples


def _run_before(kind: str, keys: tuple[str, ...] = ()) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        for widget in pilot.app.screen.query(Input):
            widget.cursor_blink = False
        await pilot.pause()
        await samples.load(pilot.app, kind)
        for key in keys:
            await pilot.press(key)
        await pilot.pause(0.2)

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["compact", "wide"])
@pytest.mark.parametrize("mode", ["single", "ab"])
def test_monitor(snap_compare: Any, size: tuple[int, int], mode: str) -> None:
    app = make_app(samples.config(mode), autostart=False)
    assert snap_compare(app, terminal_size=size, run_before=_run_before(mode))


def test_help_screen(snap_compare: Any) -> None:
    app = make_app(samples.config("single"), autostart=False)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_run_before("single", ("f1",)))


def test_startup_log(snap_compare: Any) -> None:
    app = make_app(samples.config("start"), autostart=False)
    assert snap_compare(app, terminal_size=(120, 32), run_before=_run_before("start"))


def test_disconnected(snap_compare: Any) -> None:
    app = make_app(samples.config("single"), autostart=False)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_run_before("down"))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("mode", ["single", "ab"])
async def test_panes_show_the_newest_summary_line(mode: str, size: tuple[int, int]) -> None:
    """After two prompts every pane shows #2 (80×24 showed #1 for ever: the top of three lines)."""
    app = make_app(samples.config(mode), autostart=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await samples.load(app, mode)
        await pilot.pause(0.2)
        svg = app.export_screenshot()
        panels = 2 if mode == "ab" else 1
        assert svg.count("#2&#160;") == panels
        if size == (80, 24) and mode == "ab":  # one summary row per pane: the newest only
            assert "#1&#160;" not in svg
        # The speed-up line keeps its prompt count, the footer its F6 label, the header the status.
        if mode == "ab":  # 80 columns: "median 2.17× of 2", then its source uncut
            assert ("×&#160;of&#160;2" if size == (80, 24) else "over&#160;2&#160;prompt(s)") in svg
            assert "client)" in svg
            assert "Measure" in svg
        assert svg.count("●&#160;up") == panels


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_the_ab_answer_gets_the_rows_and_the_numbers_stay(size: tuple[int, int]) -> None:
    """The answer is what a demo watches: at 160×48 it had 1 to 3 rows under the metrics."""
    from textual.widget import Widget

    from mtpwatch.ui.widgets.server_panel import ServerPanel

    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await samples.load(app, "ab")
        await pilot.pause(0.2)
        for panel in app.screen.query(ServerPanel):
            rows = panel.stream.region.height
            assert rows >= (8 if size == (160, 48) else 4), rows
            shown = [".numbers"] + ([".bars", ".bandwidth", ".chart"] if size == (160, 48) else [])
            for selector in shown:  # displayed, and not clipped by the panel
                widget = panel.query_one(selector, Widget)
                assert widget.display and widget.region.height > 0, selector
                assert widget.region.bottom <= panel.region.bottom - 1, selector
