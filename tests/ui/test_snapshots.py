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
