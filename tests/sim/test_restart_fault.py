"""The restart fault (`/sim/fault` ``restart``, with a ``down_s``, or on a timer: `restart_after_s`,
`mtpwatch sim --fault-restart-after`): counters back to 0 and a new `_created`, seen by the monitor's
feed through `rates.is_restart`'s rule; the log says the server shut down and started again. The feed
test restarts the server after its first scrape by request, so no machine is too slow for the order."""

from __future__ import annotations

import io

import httpx

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.session.watch import ServerFeed
from mtpwatch.sim.harness import running_sim
from tests.waits import until

SHUT_DOWN = "Shutting down FastAPI HTTP server."
UP = "Application startup complete."


async def test_a_restart_is_seen_by_the_feed() -> None:
    log = io.StringIO()
    async with running_sim(speed=50.0, log=log) as url, httpx.AsyncClient(timeout=30) as client:
        feed = ServerFeed(ServerSpec(label="A", url=url), DisplaySettings())
        try:
            await feed.poll()
            first = feed.watch.collector.latest
            assert first is not None and first.created is not None
            # after the first scrape, whenever that came: the order is the test's, not the clock's
            answer = await client.post(url + "/sim/fault", json={"restart": True})
            assert answer.json()["restart"] is True
            await until(lambda: log.getvalue().count(UP) == 2, "the restart's start-up log")
            await feed.poll()
            view = feed.view("10 s")
            latest = feed.watch.collector.latest
        finally:
            await feed.close()
    assert feed.watch.collector.restarts == 1 and view.restarts == 1
    assert latest is not None and latest.created != first.created
    assert latest.generation_tokens == 0
    text = log.getvalue()
    assert text.index(SHUT_DOWN) < text.rindex(UP)  # shut down, then up again


async def test_a_restart_on_a_timer_restarts_the_server() -> None:
    """`restart_after_s` counts from start-up: whenever it fires, the log shows the server shut down
    and up again, and it answers after it (what a feed sees of a restart: the test above)."""
    log = io.StringIO()
    async with (
        running_sim(speed=50.0, restart_after_s=0.2, log=log) as url,
        httpx.AsyncClient(timeout=30) as client,
    ):
        await until(lambda: log.getvalue().count(UP) == 2, "the timed restart's start-up log")
        page = (await client.get(url + "/metrics")).text
    text = log.getvalue()
    assert text.index(SHUT_DOWN) < text.rindex(UP)
    assert "vllm:generation_tokens_total" in page


async def test_a_restart_with_a_down_time_prints_its_start_up_over_it() -> None:
    log = io.StringIO()
    async with running_sim(speed=50.0, log=log) as url, httpx.AsyncClient(timeout=30) as client:
        answer = await client.post(url + "/sim/fault", json={"restart": True, "down_s": 0.5})
        assert answer.json()["restart"] is True
        await until(lambda: log.getvalue().count(UP) == 2, "the restart's start-up log")
    restart_log = log.getvalue().split(SHUT_DOWN, 1)[1]
    # the start-up is spread over the down time: the weights take 60 % of it (`sim.startup`)
    assert "Loading weights took 0.30 seconds" in restart_log


async def test_a_bad_down_time_is_a_400() -> None:
    async with running_sim(speed=50.0) as url, httpx.AsyncClient(timeout=30) as client:
        answer = await client.post(url + "/sim/fault", json={"restart": True, "down_s": "long"})
    assert answer.status_code == 400
    assert "bad fault request" in answer.json()["error"]["message"]
