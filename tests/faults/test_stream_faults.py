"""Faults while a prompt streams: the server SIGKILLed, restarted, or the stream cut mid-event.

Each case: the prompt ends with one error line in its summary (the partial answer kept), the panel
says what happened, the app keeps running, and once the server is back the numbers of the next
prompt equal a freshly attached feed's.
"""

from __future__ import annotations

import asyncio

import pytest

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.sim.harness import running_sim
from mtpwatch.ui.app import MtpWatchApp, make_app
from tests.feeds import monitor_of, opened_feeds, server_feeds
from tests.waits import wait_for

from .conftest import (
    SimProcess,
    assert_numbers_match_fresh_attach,
    bad_numbers,
    sim_fault,
    status_of,
)

LONG = DisplaySettings(scrape_interval_s=0.1, max_tokens=400)


def streaming(app: MtpWatchApp) -> bool:
    """Some of the answer's text has arrived."""
    return bool(monitor_of(app.screen).panels[0].stream.pending_text.strip() or answer_lines(app))


def answer_lines(app: MtpWatchApp) -> list[str]:
    stream = monitor_of(app.screen).panels[0].stream
    stream.flush()
    return [line for line in stream.lines if line.strip() and not line.startswith("▶")]


def assert_one_line_error(app: MtpWatchApp) -> str:
    summary = monitor_of(app.screen).panels[0].last_summary
    assert summary is not None and summary.error, summary
    assert "\n" not in summary.error and "Traceback" not in summary.error, summary.error
    return summary.error


async def test_server_sigkilled_mid_stream(sim_process: object) -> None:
    sim: SimProcess = sim_process("--speed", "2")  # type: ignore[operator]
    app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=sim.url)], display=LONG))
    async with app.run_test(size=(160, 48)) as pilot:
        panel = monitor_of(app.screen).panels[0]
        await wait_for(pilot, lambda: status_of(app)[0] == "up", "the panel to be up")
        monitor_of(app.screen).send("write a long story")
        await wait_for(pilot, lambda: streaming(app), "tokens on screen")
        sim.kill()
        await wait_for(pilot, lambda: panel.prompt_count == 1, "the prompt to end")
        assert_one_line_error(app)
        assert answer_lines(app), "the partial answer is kept"
        # the scrape in flight at the kill may say 'disconnected without a response'; the retries
        # that follow meet a closed port
        await wait_for(pilot, lambda: "connection refused" in status_of(app)[1], "connection refused")
        status, line = status_of(app)
        assert status == "down" and line.startswith("disconnected since") and "retrying in" in line, line
        sim.start()  # the same port, a new process: counters from zero, a new _created
        await wait_for(pilot, lambda: status_of(app)[0] == "up", "recovery", 20)
        await wait_for(
            pilot,
            lambda: server_feeds(app.screen)[0].watch.collector.restarts == 1,
            "the restart to be seen",
        )
        await assert_numbers_match_fresh_attach(pilot, app, sim.url)
        await pilot.press("ctrl+q")
    sim.kill()


async def test_server_restarts_mid_prompt() -> None:
    async with running_sim(speed=2) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=LONG))
        async with app.run_test(size=(160, 48)) as pilot:
            panel, feed = monitor_of(app.screen).panels[0], (await opened_feeds(pilot))[0]
            await wait_for(pilot, lambda: status_of(app)[0] == "up", "the panel to be up")
            monitor_of(app.screen).send("write a long story")
            await wait_for(pilot, lambda: streaming(app), "tokens on screen")
            generated = feed.watch.collector.latest.generation_tokens if feed.watch.collector.latest else 0.0
            await wait_for(
                pilot,
                lambda: (
                    feed.watch.collector.latest is not None
                    and feed.watch.collector.latest.generation_tokens > generated
                ),
                "a scrape during the stream",
            )
            before = feed.watch.collector.latest
            assert before is not None
            await sim_fault(url, {"restart": True})
            await wait_for(pilot, lambda: panel.prompt_count == 1, "the prompt to end")
            assert_one_line_error(app)
            await wait_for(pilot, lambda: feed.watch.collector.restarts == 1, "the restart to be seen")
            after = feed.watch.collector.latest
            assert after is not None and after.created != before.created
            assert after.generation_tokens < before.generation_tokens
            for window in ("10 s", "60 s", "prompt"):
                assert bad_numbers(feed.view(window)) == [], window
            assert status_of(app)[0] == "up"
            await assert_numbers_match_fresh_attach(pilot, app, url)
            await pilot.press("ctrl+q")


@pytest.mark.parametrize("mid_chunk", [True, False], ids=["mid-event", "between-events"])
async def test_stream_cut(mid_chunk: bool) -> None:
    async with running_sim(speed=20) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=LONG))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = monitor_of(app.screen).panels[0]
            await wait_for(pilot, lambda: status_of(app)[0] == "up", "the panel to be up")
            await sim_fault(url, {"cut_stream_after": 12, "cut_mid_chunk": mid_chunk})
            monitor_of(app.screen).send("write a long story")
            await wait_for(pilot, lambda: panel.prompt_count == 1, "the prompt to end")
            error = assert_one_line_error(app)
            assert "connection" in error or "ended" in error or "incomplete" in error, error
            assert answer_lines(app), "the partial answer is kept"
            summary = panel.last_summary
            assert summary is not None and 0 < summary.tokens <= 12
            await asyncio.sleep(0.3)
            assert status_of(app)[0] == "up"  # the server is fine; only the stream broke
            await sim_fault(url, {"clear": True})
            await assert_numbers_match_fresh_attach(pilot, app, url)
            await pilot.press("ctrl+q")
