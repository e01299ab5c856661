"""Filtered, tiered scraping against a real vLLM 0.32 (CPU build, ngram k=4): the filter is honoured,
and every figure of the snapshots and of the rates between them is the full page's, over the same
traffic. Also prints what each way of asking costs the API server (tests/bench/scrape_cost.py)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import fields
from pathlib import Path

import pytest

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest
from mtpwatch.core.metrics.filtered import HOT_NAMES, SLOW_NAMES, ScrapeFilter, sample_names
from mtpwatch.core.metrics.rates import Rates, delta_rates
from mtpwatch.core.metrics.snapshot import MetricsSnapshot, parse_snapshot
from mtpwatch.session.watch import ServerFeed

from .conftest import ServerPool

pytestmark = pytest.mark.real_vllm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from scrape_cost import measure  # noqa: E402  (the benchmark's own measurement)

PROMPT = (
    "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    + "The quick brown fox jumps over the lazy dog near the river"
)
QUIET_LIMIT_S = 60.0


def _fields(snap: MetricsSnapshot) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in fields(MetricsSnapshot):
        value = getattr(snap, f.name)
        out[f.name] = dict(value) if f.name in ("request_success", "cache_config") else value
    return out


def _rates(r: Rates) -> dict[str, object]:
    return {f.name: getattr(r, f.name) for f in fields(Rates)}


async def _quiet_triple(
    full: VllmClient, tiered: VllmClient, once: VllmClient
) -> tuple[MetricsSnapshot, MetricsSnapshot, MetricsSnapshot]:
    """(full page, tiered, once) snapshots taken between two identical full pages: nothing moved
    in between, so any difference is the scrape's, not the traffic's."""
    deadline = time.monotonic() + QUIET_LIMIT_S
    while True:
        first = parse_snapshot(await full.scrape_text())
        tiered.fresh_next()
        t = parse_snapshot(await tiered.scrape_text())
        o = parse_snapshot(await once.scrape_text())
        last = parse_snapshot(await full.scrape_text())
        if _fields(first) == _fields(last):
            return last, t, o
        assert time.monotonic() < deadline, "the server never went quiet"
        await asyncio.sleep(0.5)


async def test_filtered_scrapes_give_the_full_pages_figures(server_pool: ServerPool) -> None:
    server = server_pool.get("ngram")
    url, model = server.url, server.served_name
    async with (
        VllmClient(url) as full,
        VllmClient(url, scrape_filter=ScrapeFilter()) as tiered,
        VllmClient(url, scrape_filter=ScrapeFilter(once=True)) as once,
        VllmClient(url) as load,
    ):
        page = await tiered.scrape_text()  # the probe
        state = tiered.scrape_state
        assert state is not None and state.mode == "filtered", state  # vLLM 0.32 honours name[]=
        hot_names = sample_names(await tiered.scrape_text())
        assert hot_names <= set(HOT_NAMES) | set(SLOW_NAMES)
        assert "vllm:spec_decode_num_accepted_tokens_per_pos_total" in hot_names
        f0, t0, o0 = await _quiet_triple(full, tiered, once)
        assert once.scrape_state is not None and once.scrape_state.mode == "filtered"

        # the same traffic, watched at 4 Hz through the tiers while it runs
        seen_modes: set[str] = set()

        async def watch() -> None:
            while True:
                await tiered.scrape_text()
                assert tiered.scrape_state is not None
                seen_modes.add(tiered.scrape_state.mode)
                await asyncio.sleep(0.25)

        watcher = asyncio.ensure_future(watch())
        try:
            for i in range(3):
                request = GenerationRequest(f"{PROMPT} {i}", model=model, max_tokens=48, ignore_eos=True)
                result = await load.generate(request)
                assert result.error is None, result.error
        finally:
            watcher.cancel()
            with pytest.raises(asyncio.CancelledError):
                await watcher
        assert seen_modes == {"filtered"}
        assert tiered._tiers is not None and tiered._tiers.probes == 1  # never fell back or re-probed

        f1, t1, o1 = await _quiet_triple(full, tiered, once)
        assert f1.drafts > f0.drafts and f1.generation_tokens >= f0.generation_tokens + 3 * 48
        assert f1.itl is not None and f0.itl is not None and f1.itl.count > f0.itl.count
        for got in (t0, o0):
            assert _fields(got) == _fields(f0)
        for got in (t1, o1):
            assert _fields(got) == _fields(f1)
        expected = _rates(delta_rates(f0, f1, 10.0, "10 s"))
        assert _rates(delta_rates(t0, t1, 10.0, "10 s")) == expected
        assert _rates(delta_rates(o0, o1, 10.0, "10 s")) == expected
        assert expected["acceptance_rate"] is not None and expected["mean_step_s"] is not None

    cost = measure(url, 400, 8)
    cost["page_bytes_probe"] = len(page)
    print("scrape cost on real vLLM:", json.dumps(cost, indent=2))
    sizes = cost["bytes"]
    assert isinstance(sizes, dict) and sizes["hot"] < sizes["full_page"] / 4
    assert 0 < sizes["activity"] < sizes["hot"] and 0 < sizes["slow"] < sizes["slow_with_buckets"]


_SLOW_FIELDS = frozenset({"iteration_tokens", "ttft", "itl", "tpot", "e2e", "cache_config"})


async def test_every_scrape_idle_or_busy_gives_the_full_pages_figures(server_pool: ServerPool) -> None:
    """The activity tier on real vLLM: at 4 Hz through idle spells and requests, each tiered scrape
    bracketed by two identical full pages (nothing moved around it) gives that page's figures: all
    of them when it was an idle (activity) scrape, every hot one otherwise (the slow tier may lag
    up to 1 s while tokens flow). The idle scrapes are the activity tier's, and they happen."""
    server = server_pool.get("ngram")
    url, model = server.url, server.served_name
    compared = {"idle": 0, "hot": 0}
    async with (
        VllmClient(url) as full,
        VllmClient(url, scrape_filter=ScrapeFilter()) as tiered,
        VllmClient(url) as load,
    ):
        await tiered.scrape_text()  # the probe
        stop = asyncio.Event()

        async def watch() -> None:
            while not stop.is_set():
                before = _fields(parse_snapshot(await full.scrape_text()))
                text = await tiered.scrape_text()
                state = tiered.scrape_state
                assert state is not None and state.mode == "filtered", state
                after = _fields(parse_snapshot(await full.scrape_text()))
                if before == after:
                    got = _fields(parse_snapshot(text))
                    idle = state.idle_bytes > 0
                    keys = after.keys() if idle else after.keys() - _SLOW_FIELDS
                    assert {k: got[k] for k in keys} == {k: after[k] for k in keys}, state
                    compared["idle" if idle else "hot"] += 1
                await asyncio.sleep(0.25)

        watcher = asyncio.ensure_future(watch())
        try:
            await asyncio.sleep(3.0)
            for i in range(3):
                request = GenerationRequest(f"{PROMPT} {i}", model=model, max_tokens=32, ignore_eos=True)
                result = await load.generate(request)
                assert result.error is None, result.error
                await asyncio.sleep(3.0)  # idle again: the last stats, the slow tier, then activity only
        finally:
            stop.set()
            await watcher
        assert tiered._tiers is not None and tiered._tiers.probes == 1
    assert compared["idle"] >= 5 and compared["hot"] >= 3, compared


async def test_an_idle_real_server_is_scraped_at_the_idle_interval(server_pool: ServerPool) -> None:
    """The monitor's feed on real vLLM: an idle server (its own gauges at 0, its counters still)
    gets the idle cadence and says so; a request from another client brings back the interval at
    the first scrape that sees it, and the idle cadence comes back after it."""
    server = server_pool.get("ngram")
    display = DisplaySettings(scrape_interval_s=0.25, idle_interval_s=0.5)  # `--interval 0.25`
    feed = ServerFeed(ServerSpec(label="A", url=server.url, model=server.served_name), display)

    async def poll_until(delay: float) -> None:
        deadline = time.monotonic() + QUIET_LIMIT_S
        while await feed.poll() != delay:
            watch = feed.watch
            assert time.monotonic() < deadline, (delay, watch.status, watch.reason, watch.scrape_via)
            await asyncio.sleep(0.05)

    try:
        await poll_until(display.idle_interval_s)
        via = feed.watch.scrape_via
        assert feed.watch.status == "up" and via.endswith(", every 0.5 s"), via
        async with VllmClient(server.url) as load:
            request = GenerationRequest(PROMPT, model=server.served_name, max_tokens=48, ignore_eos=True)
            running = asyncio.ensure_future(load.generate(request))
            await poll_until(display.scrape_interval_s)
            assert "every" not in feed.watch.scrape_via
            result = await running
            assert result.error is None, result.error
        await poll_until(display.idle_interval_s)
    finally:
        await feed.close()
