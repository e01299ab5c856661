"""The fleet view against real simulators: rows, outlier mark, sort, Enter → monitor, Escape → back."""

from __future__ import annotations

import contextlib

from mtpwatch.config import AppConfig, DisplaySettings, FleetSettings
from mtpwatch.sim.harness import running_sim
from mtpwatch.ui.app import make_app
from mtpwatch.ui.screens.fleet import FleetScreen
from mtpwatch.ui.screens.help import HelpScreen
from mtpwatch.ui.screens.monitor import MonitorScreen
from mtpwatch.ui.widgets.fleet_table import FleetTable

from .conftest import WaitUntil


async def test_fleet_view_marks_the_collapsed_server_and_opens_its_monitor(wait_until: WaitUntil) -> None:
    async with contextlib.AsyncExitStack() as stack:
        urls = [
            await stack.enter_async_context(running_sim(load=2, speed=4, seed=1)),
            await stack.enter_async_context(running_sim(load=2, speed=4, seed=2)),
            await stack.enter_async_context(running_sim(load=2, speed=4, seed=3, acceptance_scale=0.05)),
        ]
        dead = "http://127.0.0.1:9"  # discard port: nothing listens
        config = AppConfig(
            servers=[],
            display=DisplaySettings(scrape_interval_s=0.25),
            fleet=FleetSettings(urls=(*urls, dead), window_s=3.0),
        )
        app = make_app(config)
        async with app.run_test(size=(180, 30)) as pilot:
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            table = app.screen.query_one(FleetTable)
            collapsed = urls[2].split("://")[1]

            def marked() -> bool:
                flagged = {r.name for r in table.rows_shown if "acceptance" in r.outliers}
                return len(table.rows_shown) == 4 and flagged == {collapsed}

            await wait_until(pilot, marked, limit_s=30)
            by_name = {r.name: r for r in table.rows_shown}
            assert by_name["127.0.0.1:9"].state == "down"
            assert "connection refused" in by_name["127.0.0.1:9"].reason
            assert all(by_name[u.split("://")[1]].k == 2 for u in urls)
            status = str(app.screen.query_one("#fleet-status").render())
            assert "outliers" in status and collapsed in status

            # sort by acceptance: the collapsed server comes first (missing values last)
            while app.screen.sort_index != 2:  # type: ignore[attr-defined]
                await pilot.press("s")
            await wait_until(pilot, lambda: table.rows_shown[0].name == collapsed, limit_s=30)

            # the prompt console's keys are off in the table
            actions = [active.binding.action for active in app.screen.active_bindings.values()]
            assert "sample_prompt" not in actions and "cycle_window" in actions  # the fleet's own F3

            await pilot.press("f1")
            assert isinstance(app.screen, HelpScreen)
            assert "median absolute deviation" in app.screen.text
            assert "increase(" in app.screen.text
            await pilot.press("escape")
            assert isinstance(app.screen, FleetScreen)

            table.move_cursor(row=0)
            await pilot.press("enter")
            assert isinstance(app.screen, MonitorScreen)
            monitor = app.screen
            assert monitor.config.servers[0].url == urls[2]
            await wait_until(pilot, lambda: bool(monitor.feeds) and monitor.feeds[0].state().status == "up")
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, FleetScreen))
            await pilot.press("ctrl+q")
