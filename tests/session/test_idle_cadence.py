"""An idle server is scraped at `idle_interval_s`; tokens moving, or a prompt from the console, bring
back `scrape_interval_s` (`Collector.idle`, `ServerFeed.next_delay`, `ServerFeed.rest`/`wake`)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.metrics.rates import Collector
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.session.watch import ServerFeed
from mtpwatch.sim.harness import running_sim


def snap(**kw: Any) -> MetricsSnapshot:
    base: dict[str, Any] = {"schema": "vllm", "model": "m", "requests_running": 0.0, "requests_waiting": 0.0}
    base.update(kw)
    return MetricsSnapshot(**base)


async def poll_until(feed: ServerFeed, delay: float, failure: str) -> None:
    """Poll until a scrape asks for `delay` seconds to the next (at most 200 scrapes)."""
    for _ in range(200):
        if await feed.poll() == delay:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(failure)


def idle_after(first: MetricsSnapshot, second: MetricsSnapshot) -> bool:
    collector = Collector()
    collector.add(first, 1.0)
    collector.add(second, 2.0)
    return collector.idle


def test_idle_needs_two_equal_scrapes_with_nothing_running_or_waiting() -> None:
    base = snap(generation_tokens=100.0, prompt_tokens=40.0)
    one = Collector()
    one.add(base, 1.0)
    assert not one.idle  # one scrape says nothing about what moved
    assert idle_after(base, base)
    assert not idle_after(base, snap(generation_tokens=101.0, prompt_tokens=40.0))  # a token
    assert not idle_after(base, snap(generation_tokens=100.0, prompt_tokens=52.0))  # a prefill
    assert not idle_after(base, snap(generation_tokens=100.0, prompt_tokens=40.0, requests_running=1.0))
    assert not idle_after(base, snap(generation_tokens=100.0, prompt_tokens=40.0, requests_waiting=2.0))
    no_gauge = snap(generation_tokens=100.0, prompt_tokens=40.0, requests_running=None)
    assert not idle_after(no_gauge, no_gauge)  # nothing says it is idle
    assert idle_after(base, snap(generation_tokens=100.0, prompt_tokens=40.0, requests_waiting=None))


def test_a_restart_is_not_idle() -> None:
    collector = Collector()
    collector.add(snap(generation_tokens=500.0, prompt_tokens=90.0), 1.0)
    assert collector.add(snap(generation_tokens=3.0, prompt_tokens=9.0), 2.0)  # the restart
    assert not collector.idle  # the new counters moved from the zero baseline


async def test_an_idle_server_is_scraped_at_the_idle_interval_and_says_so() -> None:
    display = DisplaySettings(scrape_interval_s=0.1, idle_interval_s=0.5)
    async with running_sim(speed=50) as url:
        feed = ServerFeed(ServerSpec(label="A", url=url), display)
        try:
            assert await feed.poll() == 0.1  # first scrape: nothing to compare with
            assert await feed.poll() == 0.5
            assert feed.watch.status == "up"
            assert feed.view("10 s").scrape.endswith(", every 0.5 s")
            # a request from another client: the first scrape that sees it goes back to 0.1 s
            async with httpx.AsyncClient(base_url=url) as http:
                request = asyncio.create_task(
                    http.post("/v1/completions", json={"prompt": "hi", "max_tokens": 400}, timeout=60)
                )
                await poll_until(feed, 0.1, "the request never showed on the page")
                assert "every" not in feed.view("10 s").scrape  # "filtered, 3.4 KB"
                response = await request
                assert response.status_code == 200
            # idle again once the counters stop
            await poll_until(feed, 0.5, "the server never read as idle again")
        finally:
            await feed.close()


async def test_a_console_prompt_keeps_the_full_rate_and_wakes_the_rest() -> None:
    display = DisplaySettings(scrape_interval_s=0.1, idle_interval_s=30.0, max_tokens=8)
    async with running_sim(speed=50) as url:
        feed = ServerFeed(ServerSpec(label="A", url=url), display)
        try:
            await feed.poll()
            assert await feed.poll() == 30.0
            resting = asyncio.create_task(feed.rest(30.0))
            await asyncio.sleep(0)
            assert not resting.done()
            feed.begin_prompt("hello")  # what `generate` does first
            await asyncio.wait_for(resting, timeout=10)  # woken, not after 30 s
            assert await feed.poll() == 0.1  # the prompt runs: the full rate, idle or not
            feed.end_prompt(feed.clock())
            assert feed.watch.next_delay() == 30.0
        finally:
            await feed.close()


async def test_the_idle_interval_is_never_shorter_than_the_interval() -> None:
    display = DisplaySettings(scrape_interval_s=2.0, idle_interval_s=0.5)
    async with running_sim(speed=50) as url:
        feed = ServerFeed(ServerSpec(label="A", url=url), display)
        try:
            await feed.poll()
            assert await feed.poll() == 2.0
            assert "every" not in feed.view("10 s").scrape
        finally:
            await feed.close()


async def test_rest_waits_its_delay_when_nothing_wakes_it() -> None:
    feed = ServerFeed(ServerSpec(label="A", url="http://127.0.0.1:9"), DisplaySettings())
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await feed.rest(0.05)
    assert loop.time() - t0 >= 0.05
    feed.wake()  # a wake before the rest ends the next rest at once
    await asyncio.wait_for(feed.rest(30.0), timeout=10)
    await feed.close()
