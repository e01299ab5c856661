"""The activity tier (`core.metrics.filtered.ACTIVITY_NAMES`): an idle server is asked only what
moves with anything its engine does, and every scrape still gives the full page's numbers."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import fields
from typing import Any

import pytest

from mtpwatch.core.metrics.filtered import (
    ACTIVITY_NAMES,
    ALL_NAMES,
    FULL_PATH,
    HOT_NAMES,
    SLOW_NAMES,
    ScrapeFilter,
    TieredScraper,
    filter_path,
    sample_names,
)
from mtpwatch.core.metrics.snapshot import MetricsSnapshot, parse_snapshot
from mtpwatch.sim.metrics import SimMetrics
from tests.core.metrics.test_filtered import _registry_fetch

HOT, ACT = filter_path(HOT_NAMES), filter_path(ACTIVITY_NAMES)
BOTH = filter_path(ALL_NAMES)
"""Both tiers in one answer: what a scrape asks when the slow tier is due."""
_SLOW_FIELDS = frozenset({"iteration_tokens", "ttft", "itl", "tpot", "e2e", "cache_config"})


def _figures(snap: MetricsSnapshot, *, slow: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(MetricsSnapshot):
        if not slow and f.name in _SLOW_FIELDS:
            continue
        value = getattr(snap, f.name)
        out[f.name] = dict(value) if f.name in ("request_success", "cache_config") else value
    return out


def _step(m: SimMetrics, *, running: int, waiting: int = 0, tokens: int = 3) -> None:
    """One engine step as vLLM logs it: the step's tokens, its drafts and its scheduler stats."""
    m.observe_draft(3, tokens - 1)
    m.observe_step(prompt_tokens=0, generation_tokens=tokens, itls=[0.02], ttfts=[], read_bytes=1e9)
    m.observe_scheduler(running=running, waiting=waiting, kv_usage=0.1 * running)


def _finish(m: SimMetrics, *, running_after: int, reason: str = "stop") -> None:
    m.observe_finished(
        reason=reason,
        prompt_tokens=7,
        generation_tokens=30,
        max_tokens=64,
        e2e=1.0,
        queue=0.01,
        prefill=0.1,
        decode=0.8,
        inference=0.9,
    )
    m.observe_scheduler(running=running_after, waiting=0, kv_usage=0.1 * running_after)


def _idle_metrics() -> SimMetrics:
    """A server that served a request and went idle."""
    m = SimMetrics(model_name="m", k=3, max_model_len=4096, cache_info={"block_size": "16"})
    m.observe_step(prompt_tokens=7, generation_tokens=1, itls=[], ttfts=[0.1], read_bytes=1e9)
    m.observe_scheduler(running=1, waiting=0, kv_usage=0.1)
    for _ in range(5):
        _step(m, running=1)
    _finish(m, running_after=0)
    return m


def _scraper(m: SimMetrics, calls: list[str], now: list[float], **policy: Any) -> TieredScraper:
    return TieredScraper(_registry_fetch(m.registry, calls), ScrapeFilter(**policy), clock=lambda: now[0])


async def test_an_idle_server_is_asked_the_activity_tier_and_the_hot_tier_every_two_seconds() -> None:
    now, calls = [0.0], list[str]()
    m = _idle_metrics()
    scraper = _scraper(m, calls, now)
    await scraper.scrape()  # the probe
    calls.clear()
    pages = []
    for _ in range(16):  # 4 s at 4 Hz
        now[0] += 0.25
        pages.append(await scraper.scrape())
    # the hot answer of the probe (t=0) serves until it is 2 s old, then one hot answer, and so on
    assert calls == ([ACT] * 7 + [HOT]) * 2
    full = _figures(parse_snapshot(m.render().decode()))
    for page in pages:
        assert _figures(parse_snapshot(page)) == full
    assert sample_names(pages[0]) <= set(HOT_NAMES) | set(SLOW_NAMES)
    assert scraper.state.bytes == scraper.state.hot_bytes  # the last one was a hot answer
    now[0] += 0.25
    await scraper.scrape()
    act_bytes = len(m.render(list(ACTIVITY_NAMES)))
    assert scraper.state.idle_bytes == act_bytes == scraper.state.bytes
    assert scraper.state.text == f"filtered, idle {act_bytes / 1000:.1f} KB"
    assert scraper.state.as_json()["idle_bytes"] == act_bytes
    assert act_bytes < scraper.state.hot_bytes / 2
    assert scraper.probes == 1


async def test_the_source_line_of_an_idle_server_does_not_change_while_nothing_moves() -> None:
    now, calls = [0.0], list[str]()
    m = _idle_metrics()
    scraper = _scraper(m, calls, now)
    await scraper.scrape()
    texts = []
    for _ in range(16):  # 4 s at 4 Hz: activity answers and two hot ones
        now[0] += 0.25
        await scraper.scrape()
        texts.append(scraper.state.text)
    assert HOT in calls[-8:]  # a hot answer came in the last two seconds, and kept the idle line
    act_bytes = len(m.render(list(ACTIVITY_NAMES)))
    assert set(texts) == {f"filtered, idle {act_bytes / 1000:.1f} KB"}
    assert scraper.state.hot_bytes > act_bytes  # the hot answer's own size is still recorded
    EVENTS["a request runs"](m)
    now[0] += 0.25
    await scraper.scrape()
    assert scraper.state.text == f"filtered, {scraper.state.hot_bytes / 1000:.1f} KB"
    assert scraper.state.idle_bytes == 0


async def test_interval_zero_asks_the_hot_tier_at_every_scrape() -> None:
    now, calls = [0.0], list[str]()
    scraper = _scraper(_idle_metrics(), calls, now, idle_hot_interval_s=0.0)
    await scraper.scrape()
    calls.clear()
    for _ in range(5):
        now[0] += 0.25
        await scraper.scrape()
    assert calls == [HOT] * 5


def _new_server(m: SimMetrics) -> SimMetrics:
    return SimMetrics(model_name="m", k=3, max_model_len=4096, cache_info={"block_size": "16"})


def _whole_request(m: SimMetrics) -> None:
    _step(m, running=1)
    _finish(m, running_after=0)


EVENTS: dict[str, Callable[[SimMetrics], Any]] = {
    "a request waits": lambda m: m.observe_scheduler(running=0, waiting=1, kv_usage=0.0),
    "a request runs": lambda m: m.observe_scheduler(running=1, waiting=0, kv_usage=0.1),
    "prefill only": lambda m: m.observe_step(
        prompt_tokens=5, generation_tokens=0, itls=[], ttfts=[], read_bytes=None
    ),
    "one token": lambda m: m.observe_step(
        prompt_tokens=5, generation_tokens=1, itls=[], ttfts=[0.1], read_bytes=None
    ),
    "aborted before a token": lambda m: m.request_success.labels(
        model_name="m", engine="0", finished_reason="abort"
    ).inc(),
    "a whole request between two scrapes": lambda m: _whole_request(m),
}


@pytest.mark.parametrize("event", list(EVENTS))
async def test_anything_the_engine_does_asks_the_hot_tier_at_once(event: str) -> None:
    now, calls = [0.0], list[str]()
    m = _idle_metrics()
    scraper = _scraper(m, calls, now)
    await scraper.scrape()
    now[0] += 0.25
    await scraper.scrape()
    calls.clear()
    EVENTS[event](m)
    now[0] += 0.25
    page = await scraper.scrape()
    assert calls[:2] == [ACT, HOT]
    whole = BOTH in calls  # the slow tier follows within `slow_interval_s` (1 s) while tokens flow
    full = parse_snapshot(m.render().decode())
    assert _figures(parse_snapshot(page), slow=whole) == _figures(full, slow=whole)


async def test_a_restart_seen_by_the_activity_tier_probes_again() -> None:
    now, calls = [0.0], list[str]()
    holder = {"m": _idle_metrics()}

    async def fetch(path: str) -> str:
        text: str = await _registry_fetch(holder["m"].registry, calls)(path)
        return text

    scraper = TieredScraper(fetch, ScrapeFilter(), clock=lambda: now[0])
    await scraper.scrape()
    holder["m"] = _new_server(holder["m"])  # a new life: counters at 0, a new `_created`
    holder["m"].observe_scheduler(running=0, waiting=0, kv_usage=0.0)
    now[0] += 0.25
    calls.clear()
    page = await scraper.scrape()
    assert calls == [ACT, HOT, FULL_PATH, HOT, filter_path(SLOW_NAMES)]  # the probe asks each tier
    assert scraper.probes == 2
    assert parse_snapshot(page).generation_tokens == 0


async def test_engine_traffic_at_random_gives_the_full_pages_figures_at_every_scrape() -> None:
    """Requests arrive, run, finish and abort at random between 4 Hz scrapes, as vLLM's logger
    records them (a step's tokens, drafts and scheduler stats together; a finish with the stats that
    follow it): every scrape's hot figures are the full page's, and all of them whenever the scrape
    was an idle one or asked the slow tier."""
    rng = random.Random(18)
    now, calls = [0.0], list[str]()
    m = _idle_metrics()
    scraper = _scraper(m, calls, now)
    await scraper.scrape()
    running = waiting = 0
    idle_scrapes = compared_all = 0
    for _ in range(600):
        roll = rng.random()
        if roll < 0.05:
            waiting += 1
            m.observe_scheduler(running=running, waiting=waiting, kv_usage=0.1 * running)
        elif roll < 0.10 and waiting:
            waiting, running = waiting - 1, running + 1
            m.observe_step(prompt_tokens=9, generation_tokens=1, itls=[], ttfts=[0.05], read_bytes=1e9)
            m.observe_scheduler(running=running, waiting=waiting, kv_usage=0.1 * running)
        elif roll < 0.35 and running:
            _step(m, running=running, waiting=waiting, tokens=rng.randint(1, 4))
        elif roll < 0.42 and running:
            running -= 1
            _finish(m, running_after=running, reason=rng.choice(["stop", "length", "abort"]))
        now[0] += 0.25
        before = len(calls)
        page = await scraper.scrape()
        asked = calls[before:]
        full = parse_snapshot(m.render().decode())
        whole = asked == [ACT] or BOTH in asked
        idle_scrapes += asked == [ACT]
        compared_all += whole
        assert _figures(parse_snapshot(page), slow=whole) == _figures(full, slow=whole), asked
    assert scraper.probes == 1
    assert idle_scrapes > 100 and compared_all > 150  # the idle path was exercised, not skipped
