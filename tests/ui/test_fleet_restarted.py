"""The fleet table's "restarted" row: a simulator restarted inside the window shows the state in its
colour, still counted answering in the status line, next to a server that did not restart."""

from __future__ import annotations

import contextlib

import httpx

from mtpwatch.config import AppConfig, DisplaySettings, FleetSettings
from mtpwatch.sim.harness import running_sim
from mtpwatch.ui.app import make_app
from mtpwatch.ui.screens.fleet import FleetScreen
from mtpwatch.ui.widgets.fleet_table import COLUMNS, FleetTable, cells

from .conftest import WaitUntil


async def test_a_restarted_server_shows_restarted_in_the_table(wait_until: WaitUntil) -> None:
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(running_sim(speed=50.0, seed=s)) for s in (1, 2)]
        config = AppConfig(
            servers=[],
            display=DisplaySettings(scrape_interval_s=0.25),
            fleet=FleetSettings(urls=tuple(urls), window_s=60.0),  # the restart stays in the window
        )
        app = make_app(config)
        async with app.run_test(size=(180, 30)) as pilot:
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            table = screen.query_one(FleetTable)

            def states() -> dict[str, str]:
                return {r.source: r.state for r in table.rows_shown}

            await wait_until(pilot, lambda: states() == dict.fromkeys(urls, "idle"))
            async with httpx.AsyncClient(timeout=30) as client:
                (await client.post(urls[0] + "/sim/fault", json={"restart": True})).raise_for_status()
            await wait_until(pilot, lambda: states() == {urls[0]: "restarted", urls[1]: "idle"})
            row = next(r for r in table.rows_shown if r.source == urls[0])
            state_cell = cells(row)[COLUMNS.index("state")]
            assert (state_cell.plain, str(state_cell.style)) == ("restarted", "yellow")
            status = str(screen.query_one("#fleet-status").render())
            assert "2/2 rows answering" in status, status
            await pilot.press("ctrl+q")
