"""Ctrl+C quits, as Ctrl+Q does (servers stopped), on every screen: monitor, A/B, demo, fleet,
replay and over the help screen, even with text selected in the prompt box (Textual binds Ctrl+C
to copy there)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from textual.widgets import Input
from textual.widgets.input import Selection

from mtpwatch.commands.demo import demo_config
from mtpwatch.config import AppConfig, DisplaySettings, FleetSettings
from mtpwatch.session.replay import ReplaySource
from mtpwatch.ui.app import make_app
from mtpwatch.ui.screens.fleet import FleetScreen
from mtpwatch.ui.screens.help import HelpScreen
from mtpwatch.ui.screens.replay import ReplayScreen
from tests.feeds import monitor_of, server_feeds
from tests.ui import samples
from tests.ui.test_demo_and_cli import _alive

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil
    from tests.ui.recorded import Recorded


async def test_ctrl_c_quits_the_demo_and_stops_its_servers(wait_until: WaitUntil) -> None:
    app = make_app(demo_config())
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(
            pilot,
            lambda: all(p.view is not None and p.view.status == "up" for p in monitor_of(app.screen).panels),
            limit_s=60,
        )
        pids = [feed.process.pid for feed in server_feeds(app.screen) if feed.process is not None]
        assert len(pids) == 2 and all(_alive(pid) for pid in pids)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app.return_code is not None, limit_s=30)
    assert app.return_code == 0
    assert not any(_alive(pid) for pid in pids)


async def test_ctrl_c_quits_with_text_selected_in_the_prompt(wait_until: WaitUntil) -> None:
    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        prompt = app.screen.query_one("#prompt", Input)
        prompt.value = "Write a haiku about GPUs"
        prompt.selection = Selection(0, len(prompt.value))
        assert prompt.has_focus and prompt.selected_text
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0


async def test_ctrl_c_quits_over_the_help_screen(wait_until: WaitUntil) -> None:
    app = make_app(samples.config("single"), autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0


async def test_ctrl_c_quits_the_fleet_view(wait_until: WaitUntil) -> None:
    config = AppConfig(
        servers=[],
        display=DisplaySettings(scrape_interval_s=0.25),
        fleet=FleetSettings(urls=("http://127.0.0.1:9",), window_s=3.0),  # discard port: down
    )
    app = make_app(config)
    async with app.run_test(size=(120, 30)) as pilot:
        assert isinstance(app.screen, FleetScreen)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0


async def test_ctrl_c_quits_a_replay(sim_recording: Recorded, wait_until: WaitUntil) -> None:
    source = ReplaySource.open(sim_recording.path)
    app = make_app(dataclasses.replace(source.config, speed=16.0), replay=source)
    async with app.run_test(size=(80, 24)) as pilot:
        assert isinstance(app.screen, ReplayScreen)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0
