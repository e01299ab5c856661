"""A fleet row whose server restarted inside the window: the simulator's restart fault (counters back to
0, new `_created`) is seen through `rates.is_restart`'s rule, the row says "restarted" and still counts
as live in its group; once the restart is older than the window, the row is an ordinary one again."""

from __future__ import annotations

import asyncio

import httpx

from mtpwatch.core.fleet.groups import summarise
from mtpwatch.core.fleet.scraper import FleetScraper, Target
from mtpwatch.core.metrics.snapshot import parse_snapshot
from mtpwatch.sim.harness import running_sim

WINDOW_S = 10.0


async def restarted(url: str, client: httpx.AsyncClient) -> None:
    """Ask the simulator for a restart; return once its page shows the new server (counters at 0)."""
    before = parse_snapshot((await client.get(url + "/metrics")).text)
    assert before.generation_tokens > 0
    (await client.post(url + "/sim/fault", json={"restart": True})).raise_for_status()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60  # generous: only a failing test waits this long
    while True:
        after = parse_snapshot((await client.get(url + "/metrics")).text)
        if after.created != before.created:
            assert after.generation_tokens == 0
            return
        assert loop.time() < deadline, "timed out waiting for the simulator's restart"
        await asyncio.sleep(0.01)


async def test_a_restart_in_the_window_makes_the_row_restarted() -> None:
    now = [0.0]
    body = {"prompt": "Explain KV caches.", "max_tokens": 16, "temperature": 0, "ignore_eos": True}
    async with running_sim(speed=400.0) as url, httpx.AsyncClient(timeout=30) as client:
        scraper = FleetScraper([Target(url)], interval_s=1.0, idle_interval_s=1.0, clock=lambda: now[0])

        async def tick_at(t: float) -> None:
            now[0] = t
            await scraper.tick()

        try:
            await tick_at(0.0)
            (await client.post(url + "/v1/completions", json=body)).raise_for_status()
            await tick_at(1.0)
            [row] = scraper.rows(WINDOW_S)
            assert (row.state, row.generation_tokens) == ("up", 16)
            await restarted(url, client)
            await tick_at(2.0)
            [row] = scraper.rows(WINDOW_S)
            assert row.state == "restarted"
            [group] = summarise([row])
            assert group.counts["restarted"] == 1 and group.attention == 0  # live, nothing to look at
            # the restart leaves the window: an idle server again
            for t in (2.0 + WINDOW_S + 1, 2.0 + WINDOW_S + 2):
                await tick_at(t)
            [row] = scraper.rows(WINDOW_S)
            assert row.state == "idle"
        finally:
            await scraper.aclose()
    assert scraper.stats.failures == 0
