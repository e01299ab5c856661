"""Pilot tests of the app against the simulator over real loopback sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.sim.server import running_sim
from mtpwatch.ui.app import MtpWatchApp, make_app
from mtpwatch.ui.widgets.server_panel import ServerPanel

FAST = DisplaySettings(scrape_interval_s=0.1, max_tokens=48)


async def wait_until(pilot: Pilot[Any], predicate: Callable[[], bool], limit_s: float = 20.0) -> None:
    """Event-driven wait: re-check after each pause, fail with a clear message at the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not met before the timeout")
        await pilot.pause(0.05)


def _panel(app: MtpWatchApp, i: int = 0) -> ServerPanel:
    return app.monitor.panels[i]


async def test_attach_prompt_streams_and_summarises() -> None:
    async with running_sim(speed=20) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = _panel(app)
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            assert panel.view is not None and panel.view.speculative is True
            await pilot.press(*"hello there", "enter")
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            summary = panel.last_summary
            assert summary is not None and summary.error is None
            assert summary.tokens > 1 and summary.decode_tok_s is not None
            panel.stream.flush()
            assert any(line.strip() and not line.startswith("▶") for line in panel.stream.lines)
            # acceptance over the prompt's window is non-zero on an MTP server
            assert summary.acceptance_rate is not None and summary.acceptance_rate > 0
            await wait_until(pilot, lambda: bool(panel.view and panel.view.acceptance_rate))
            await pilot.press("ctrl+q")


async def test_server_dies_shows_disconnected_then_recovers() -> None:
    async with running_sim(speed=20) as url:
        port = int(url.rsplit(":", 1)[1])
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(120, 40)) as pilot:
            panel = _panel(app)
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await sim_fault(url, {"restart": True})
            await wait_until(pilot, lambda: panel.view is not None and panel.view.restarts == 1)
            await sim_fault(url, {"exit": True})
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "down")
            assert panel.view is not None and "disconnected since" in panel.view.status_detail
            assert "retrying in" in panel.view.status_detail
            async with running_sim(speed=20, port=port):
                await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press("ctrl+q")


async def test_server_exits_mid_stream_no_crash() -> None:
    async with running_sim(speed=1) as url:
        display = DisplaySettings(scrape_interval_s=0.1, max_tokens=2000)
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=display))
        async with app.run_test(size=(120, 40)) as pilot:
            panel = _panel(app)
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press(*"write a long story", "enter")
            await wait_until(pilot, lambda: panel.stream.line_count > 1 or bool(panel.stream.pending_text))
            await sim_fault(url, {"exit": True})
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            assert panel.last_summary is not None and panel.last_summary.error
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "down")
            assert app.is_running
            await pilot.press("ctrl+q")


async def sim_fault(url: str, body: dict[str, Any]) -> None:
    """Switch a simulator fault on (restart, exit, ...)."""
    import httpx

    async with httpx.AsyncClient() as http:
        await http.post(url + "/sim/fault", json=body)
