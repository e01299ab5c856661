"""Filtered, tiered scraping (`core.metrics.filtered`): the same numbers as the full page, and the
fallback to the full page wherever the filter is not honoured."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import fields
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest
from mtpwatch.core.metrics.filtered import (
    ALL_NAMES,
    FULL_PATH,
    HOT_NAMES,
    SLOW_NAMES,
    Fetch,
    FilterRefused,
    ScrapeFilter,
    TieredScraper,
    _split,
    filter_path,
    sample_names,
)
from mtpwatch.core.metrics.rates import Rates, delta_rates
from mtpwatch.core.metrics.snapshot import SNAPSHOT_PREFIXES, MetricsSnapshot, parse_snapshot
from mtpwatch.core.record.schema import apply_delta, filter_page, page_delta
from mtpwatch.sim.harness import running_sim
from mtpwatch.sim.metrics import SimMetrics
from tests.datadir import DataDir
from tests.reference_metrics import parse_samples_reference

# -- helpers -------------------------------------------------------------------------------------


class _PageCollector(Collector):
    """A recorded page's families, so that prometheus_client's own restricted registry filters them."""

    def __init__(self, text: str) -> None:
        self.families = list(text_string_to_metric_families(text))

    def collect(self) -> Iterator[Any]:
        yield from self.families


def _registry_of(text: str) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_PageCollector(text))
    return registry


def _restricted(registry: CollectorRegistry, names: Iterable[str]) -> str:
    return generate_latest(registry.restricted_registry(list(names))).decode()


def _registry_fetch(registry: CollectorRegistry, calls: list[str]) -> Fetch:
    """A `Fetch` over a registry, answering as vLLM's two routes do."""

    async def fetch(path: str) -> str:
        calls.append(path)
        if path == FULL_PATH:
            return generate_latest(registry).decode()
        names = parse_qs(urlsplit(path).query)["name[]"]
        return _restricted(registry, names)

    return fetch


def _assert_same_snapshot(a: MetricsSnapshot, b: MetricsSnapshot) -> None:
    for f in fields(MetricsSnapshot):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name in ("request_success", "cache_config"):
            x, y = dict(x), dict(y)
        assert x == y, f"{f.name}: {x!r} != {y!r}"


def _assert_same_rates(a: Rates, b: Rates) -> None:
    for f in fields(Rates):
        assert getattr(a, f.name) == getattr(b, f.name), f.name


def _busy_metrics(k: int = 3) -> SimMetrics:
    """The simulator's registry with traffic in every family the snapshot reads."""
    m = SimMetrics(model_name="m", k=k, max_model_len=4096, cache_info={"block_size": "16"})
    for i in range(20):
        m.observe_draft(k, i % (k + 1))
        m.observe_step(prompt_tokens=7, generation_tokens=3, itls=[0.02, 0.03], ttfts=[0.1], read_bytes=1e9)
    m.observe_scheduler(running=2, waiting=1, kv_usage=0.25)
    m.observe_finished(
        reason="stop",
        prompt_tokens=7,
        generation_tokens=60,
        max_tokens=64,
        e2e=1.5,
        queue=0.01,
        prefill=0.1,
        decode=1.3,
        inference=1.4,
    )
    return m


# -- the name lists ------------------------------------------------------------------------------


def test_the_lists_cover_every_sample_the_snapshot_reads(data: DataDir) -> None:
    """Only the HOT ∪ SLOW samples of each real page (prometheus_client's restricted registry) give
    that page's snapshot, and every sample the snapshot's prefixes keep but the lists do not ask
    for is one it ignores (the other counters' and the histograms' `_created`)."""
    for path in data.glob("metrics-*.txt"):
        text = path.read_text()
        restricted = _restricted(_registry_of(text), ALL_NAMES)
        assert sample_names(restricted) <= set(ALL_NAMES)
        _assert_same_snapshot(parse_snapshot(restricted), parse_snapshot(text))
        left = {s.name for s in parse_samples_reference(text, SNAPSHOT_PREFIXES)} - set(ALL_NAMES)
        ignored = {n for n in left if n.endswith("_created") or n == "vllm:num_requests_waiting_by_reason"}
        assert left and left == ignored, left - ignored
    assert not set(HOT_NAMES) & set(SLOW_NAMES)


def test_one_answer_to_both_tiers_splits_into_each_tiers_answer(data: DataDir) -> None:
    """`_split` of the answer to ALL_NAMES gives, family for family, the answers to HOT_NAMES and to
    SLOW_NAMES (line order aside: the restricted registry collects in set order), on every real page,
    and on the simulator's page busy and before any request."""
    pages = [path.read_text() for path in data.glob("metrics-*.txt")]
    fresh = SimMetrics(model_name="m", k=2, max_model_len=2048, cache_info={})
    pages += [_busy_metrics().render().decode(), fresh.render().decode()]
    for text in pages:
        registry = _registry_of(text)
        hot, slow = _split(_restricted(registry, ALL_NAMES), frozenset(SLOW_NAMES))
        assert sorted(hot.splitlines()) == sorted(_restricted(registry, HOT_NAMES).splitlines())
        assert sorted(slow.splitlines()) == sorted(_restricted(registry, SLOW_NAMES).splitlines())
        assert hot.strip() and sample_names(hot) <= set(HOT_NAMES)
    assert _split("", frozenset(SLOW_NAMES)) == ("", "")


def test_filter_path_and_sample_names() -> None:
    path = filter_path(["vllm:num_requests_running", "vllm:x_total"])
    assert path == "/metrics/?name%5B%5D=vllm%3Anum_requests_running&name%5B%5D=vllm%3Ax_total"
    assert parse_qs(urlsplit(path).query)["name[]"] == ["vllm:num_requests_running", "vllm:x_total"]
    text = '# HELP a b\n# TYPE a counter\na_total{x="1 2"} 3\nb 4\n  c{} 5\n\n'
    assert sample_names(text) == {"a_total", "b", "c"}


# -- the same numbers ----------------------------------------------------------------------------


@pytest.mark.parametrize("pair", ["ngram-k4", "baseline"])
async def test_recorded_pages_give_the_same_snapshots_and_rates(data: DataDir, pair: str) -> None:
    """Real vLLM 0.32 pages, filtered by prometheus_client's restricted registry: every figure of the
    snapshot and of the rates between the two pages is the full page's."""
    snaps: dict[str, tuple[MetricsSnapshot, MetricsSnapshot]] = {}
    for when in ("before", "after"):
        page = data.text(f"metrics-{pair}-{when}.txt")
        calls: list[str] = []
        scraper = TieredScraper(_registry_fetch(_registry_of(page), calls), ScrapeFilter())
        probe = await scraper.scrape()  # the probe returns the full page itself
        assert scraper.state.mode == "filtered", scraper.state
        tiered = await scraper.scrape(fresh=True)
        assert calls[-1:] == [filter_path(ALL_NAMES)]  # both tiers in one answer
        assert len(tiered) < len(probe) / 2
        snaps[when] = (parse_snapshot(probe), parse_snapshot(tiered))
        _assert_same_snapshot(*snaps[when])
    _assert_same_rates(
        delta_rates(snaps["before"][0], snaps["after"][0], 10.0, "10 s"),
        delta_rates(snaps["before"][1], snaps["after"][1], 10.0, "10 s"),
    )


async def _traffic(url: str, n: int = 2) -> None:
    async with VllmClient(url) as client:
        for i in range(n):
            result = await client.generate(GenerationRequest(prompt=f"count to {i}", max_tokens=24))
            assert result.error is None


async def test_simulator_filtered_numbers_equal_the_full_page() -> None:
    """Over HTTP to the simulator, between the same traffic: the tiered page and the full page give
    the same snapshot, and the same rates between the scrapes before and after."""
    async with running_sim(speed=400, k=3, seed=5) as url:
        tiered = VllmClient(url, scrape_filter=ScrapeFilter())
        full = VllmClient(url)
        try:
            await tiered.scrape_text()  # probe
            t_before = await tiered.scrape_text()
            f_before = await full.scrape_text()
            assert tiered.scrape_state is not None and tiered.scrape_state.mode == "filtered"
            await _traffic(url)
            tiered.fresh_next()
            t_after = await tiered.scrape_text()
            f_after = await full.scrape_text()
            assert tiered.scrape_state.mode == "filtered"
            assert len(t_after) < len(f_after) / 2
        finally:
            await tiered.aclose()
            await full.aclose()
    before, after = parse_snapshot(t_before), parse_snapshot(t_after)
    fb, fa = parse_snapshot(f_before), parse_snapshot(f_after)
    assert fa.generation_tokens > fb.generation_tokens and fa.drafts > fb.drafts  # traffic happened
    assert fa.itl is not None and fb.itl is not None and fa.itl.count > fb.itl.count
    _assert_same_snapshot(before, fb)
    _assert_same_snapshot(after, fa)
    _assert_same_rates(delta_rates(before, after, 5.0, "5 s"), delta_rates(fb, fa, 5.0, "5 s"))


def test_simulator_registry_rendered_both_ways_at_one_instant() -> None:
    """The simulator's `/metrics/` is prometheus_client's restricted registry: at one instant, the two
    tiers together are the full page's numbers."""
    m = _busy_metrics()
    full = m.render().decode()
    hot = m.render(list(HOT_NAMES)).decode()
    slow = m.render(list(SLOW_NAMES)).decode()
    assert sample_names(hot) <= set(HOT_NAMES) and sample_names(slow) <= set(SLOW_NAMES)
    _assert_same_snapshot(parse_snapshot(hot + slow), parse_snapshot(full))
    assert m.render([]).decode() == ""


# -- tiers ---------------------------------------------------------------------------------------


async def test_slow_tier_at_most_once_a_second_and_fresh_on_demand() -> None:
    now = [100.0]
    calls: list[str] = []
    m = _busy_metrics()
    scraper = TieredScraper(_registry_fetch(m.registry, calls), ScrapeFilter(), clock=lambda: now[0])
    await scraper.scrape()
    assert calls == [FULL_PATH, filter_path(HOT_NAMES), filter_path(SLOW_NAMES)]
    calls.clear()
    for _ in range(3):  # 4 Hz for 0.75 s while tokens flow: hot only
        now[0] += 0.25
        m.observe_step(prompt_tokens=0, generation_tokens=2, itls=[0.01], ttfts=[], read_bytes=None)
        text = await scraper.scrape()
    assert calls == [filter_path(HOT_NAMES)] * 3
    stale = parse_snapshot(text)
    assert stale.itl is not None and stale.itl.count == 40  # the slow tier of 0.75 s ago
    now[0] += 0.25  # 1 s since the slow tier
    text = await scraper.scrape()
    assert calls[-1] == filter_path(ALL_NAMES)  # both tiers in one answer when the slow one is due
    _assert_same_snapshot(parse_snapshot(text), parse_snapshot(m.render().decode()))
    calls.clear()
    now[0] += 0.1
    await scraper.scrape(fresh=True)
    assert calls == [filter_path(ALL_NAMES)]
    assert scraper.state.mode == "filtered" and scraper.state.text.startswith("filtered, ")
    assert scraper.probes == 1


@pytest.mark.parametrize(
    "activity",
    [
        None,
        lambda m: m.observe_step(prompt_tokens=5, generation_tokens=0, itls=[], ttfts=[], read_bytes=None),
        lambda m: m.request_success.labels(model_name="m", engine="0", finished_reason="abort").inc(),
    ],
    ids=["idle", "prefill only", "aborted before a token"],
)
async def test_the_slow_tier_is_asked_again_only_after_activity(activity: Any) -> None:
    """An idle server's histograms cannot change: no slow answer for it, however long it idles;
    any tokens processed or request finished (even without a generated token) ask it again."""
    now = [0.0]
    calls: list[str] = []
    m = _busy_metrics()
    scraper = TieredScraper(_registry_fetch(m.registry, calls), ScrapeFilter(), clock=lambda: now[0])
    await scraper.scrape()
    calls.clear()
    for _ in range(20):
        now[0] += 0.25
        await scraper.scrape()
    assert calls == [filter_path(HOT_NAMES)] * 20
    if activity is not None:
        activity(m)
        now[0] += 0.25
        text = await scraper.scrape()
        # the hot answer showed the activity: the slow tier at once, in a second request
        assert calls[-2:] == [filter_path(HOT_NAMES), filter_path(SLOW_NAMES)]
        _assert_same_snapshot(parse_snapshot(text), parse_snapshot(m.render().decode()))
        for _ in range(4):  # still busy: hot answers, then both tiers in one answer a second later
            m.observe_step(prompt_tokens=0, generation_tokens=1, itls=[0.01], ttfts=[], read_bytes=None)
            now[0] += 0.25
            text = await scraper.scrape()
        assert calls[-4:-1] == [filter_path(HOT_NAMES)] * 3
        assert calls[-1] == filter_path(ALL_NAMES)
        _assert_same_snapshot(parse_snapshot(text), parse_snapshot(m.render().decode()))


async def test_fleet_filter_asks_the_hot_tier_only() -> None:
    calls: list[str] = []
    scraper = TieredScraper(_registry_fetch(_busy_metrics().registry, calls), ScrapeFilter(slow=False))
    await scraper.scrape()
    text = await scraper.scrape()
    assert filter_path(SLOW_NAMES) not in calls and filter_path(ALL_NAMES) not in calls[1:]
    assert sample_names(text) <= set(HOT_NAMES)


async def test_a_restart_probes_again_and_refreshes_the_slow_tier() -> None:
    now = [0.0]
    calls: list[str] = []
    holder = {"m": _busy_metrics()}

    async def fetch(path: str) -> str:
        return await _registry_fetch(holder["m"].registry, calls)(path)

    scraper = TieredScraper(fetch, ScrapeFilter(), clock=lambda: now[0])
    await scraper.scrape()
    holder["m"].generation_tokens.labels(model_name="m", engine="0").inc(500)
    now[0] += 0.25
    await scraper.scrape()
    holder["m"] = _busy_metrics()  # a new server life: counters back to 0, new _created
    now[0] += 0.25
    calls.clear()
    text = await scraper.scrape()
    # the hot answer showed the restart: re-checked at once, and this scrape is the new full page
    assert scraper.probes == 2
    assert calls == [filter_path(HOT_NAMES), FULL_PATH, filter_path(HOT_NAMES), filter_path(SLOW_NAMES)]
    assert parse_snapshot(text).generation_tokens == 60


# -- the fallback --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("ignore", "filter ignored"),
        ("redirect", "filter ignored"),
        ("empty", "filtered answer empty: several API servers?"),
        ("404", "filter refused: 404 Not Found"),
    ],
)
async def test_a_filter_not_honoured_falls_back_to_the_full_page(mode: str, reason: str) -> None:
    async with (
        running_sim(speed=400, metrics_filter=mode) as url,
        VllmClient(url, scrape_filter=ScrapeFilter()) as client,
        VllmClient(url) as full,
    ):
        for _ in range(3):
            text = await client.scrape_text()
            state = client.scrape_state
            assert state is not None and state.mode == "full" and state.reason == reason
            assert state.text == f"full page ({reason})"
            page = await full.scrape_text()
            assert sample_names(text) == sample_names(page)  # the whole page
        assert client._tiers is not None and client._tiers.probes == 1  # judged once, not per scrape
        assert client._fast_get is not None  # the filtered path's odd answer keeps the page's fast GET


async def test_a_filter_that_stops_being_honoured_falls_back_at_once() -> None:
    async with running_sim(speed=400) as url, VllmClient(url, scrape_filter=ScrapeFilter()) as client:
        await client.scrape_text()
        await client.scrape_text()
        assert client.scrape_state is not None and client.scrape_state.mode == "filtered"
        async with httpx.AsyncClient() as http:
            await http.post(url + "/sim/fault", json={"metrics_filter": "empty"})
        text = await client.scrape_text()
        assert client.scrape_state.mode == "full"
        assert parse_snapshot(text).schema == "vllm"
        async with httpx.AsyncClient() as http:
            await http.post(url + "/sim/fault", json={"metrics_filter": "honour"})
        await client.scrape_text()  # still the full page: nothing says the server changed...
        assert client.scrape_state.mode == "full"
        await http_restart(url)
        await asyncio.sleep(0)
        for _ in range(200):  # ...until it restarts: then the filter is checked again
            await client.scrape_text()
            if client.scrape_state.mode == "filtered":
                break
            await asyncio.sleep(0.05)
        assert client.scrape_state.mode == "filtered"


async def http_restart(url: str) -> None:
    async with httpx.AsyncClient() as http:
        await http.post(url + "/sim/fault", json={"restart": True})


@pytest.mark.parametrize("options", [{"spec": False}, {"metrics_no_spec": True}, {"mfu_metrics": False}])
async def test_families_legitimately_absent_keep_the_filter(options: dict[str, Any]) -> None:
    """No spec counters (speculation off) or no read bytes: absent from the full page too, so the
    filter stays honoured and the numbers stay the full page's."""
    async with (
        running_sim(speed=400, **options) as url,
        VllmClient(url, scrape_filter=ScrapeFilter()) as client,
        VllmClient(url) as full,
    ):
        await client.scrape_text()
        for _ in range(3):
            text = await client.scrape_text()
        assert client.scrape_state is not None and client.scrape_state.mode == "filtered"
        _assert_same_snapshot(parse_snapshot(text), parse_snapshot(await full.scrape_text()))


async def test_not_vllm_keeps_the_full_page(data: DataDir) -> None:
    page = data.text("llamacpp-metrics-after.txt")
    calls: list[str] = []

    async def fetch(path: str) -> str:
        calls.append(path)
        if path != FULL_PATH:
            raise FilterRefused("404 Not Found")
        return page

    scraper = TieredScraper(fetch, ScrapeFilter())
    assert await scraper.scrape() == page
    assert await scraper.scrape() == page
    assert calls == [FULL_PATH, FULL_PATH]
    assert scraper.state.text == "full page (not vLLM)"


async def test_a_failed_scrape_probes_again() -> None:
    calls: list[str] = []
    registry = _busy_metrics().registry
    inner = _registry_fetch(registry, calls)
    fail = [False]

    async def fetch(path: str) -> str:
        if fail[0]:
            raise OSError("connection refused")
        return await inner(path)

    scraper = TieredScraper(fetch, ScrapeFilter())
    await scraper.scrape()
    fail[0] = True
    with pytest.raises(OSError):
        await scraper.scrape()
    fail[0] = False
    await scraper.scrape()
    assert scraper.probes == 2


async def test_once_uses_one_filtered_request_or_the_page() -> None:
    calls: list[str] = []
    m = _busy_metrics()
    scraper = TieredScraper(_registry_fetch(m.registry, calls), ScrapeFilter(once=True))
    text = await scraper.scrape()
    assert calls == [filter_path(ALL_NAMES)]
    assert scraper.state.mode == "filtered"
    _assert_same_snapshot(parse_snapshot(text), parse_snapshot(m.render().decode()))

    async def ignoring(path: str) -> str:
        calls.append(path)
        return m.render().decode()

    calls.clear()
    once = TieredScraper(ignoring, ScrapeFilter(once=True))
    await once.scrape()
    assert calls == [filter_path(ALL_NAMES)]  # the answer was the whole page: used as it is
    assert once.state.text == "full page (filter ignored)"


# -- recordings ----------------------------------------------------------------------------------


def test_a_recorded_filtered_page_replays_to_the_same_snapshot(data: DataDir) -> None:
    """The recorder keeps SNAPSHOT_PREFIXES lines as line deltas: a tiered page round-trips to the
    full page's numbers, and so does a recording that switches between the two."""
    pages = [data.text("metrics-ngram-k4-before.txt"), data.text("metrics-ngram-k4-after.txt")]
    tiered = []
    for page in pages:
        registry = _registry_of(page)
        tiered.append(_restricted(registry, HOT_NAMES) + _restricted(registry, SLOW_NAMES))
    previous: list[str] | None = None
    replayed: list[list[str]] = []
    for text in [pages[0], tiered[0], tiered[1], pages[1]]:
        lines = filter_page(text)
        record = page_delta(previous, lines)
        replayed.append(apply_delta(replayed[-1] if replayed else None, record))
        previous = lines
    expected = [pages[0], pages[0], pages[1], pages[1]]
    for lines, page in zip(replayed, expected, strict=True):
        _assert_same_snapshot(parse_snapshot("\n".join(lines) + "\n"), parse_snapshot(page))


async def test_a_server_honouring_it_now_and_then_costs_no_probe_per_scrape() -> None:
    """Behind a balancer, one replica honours the filter and one answers empty: after the first bad
    answer every scrape is the full page, without a probe each time."""
    calls: list[str] = []
    m = _busy_metrics()
    inner = _registry_fetch(m.registry, calls)
    turn = [0]

    async def fetch(path: str) -> str:
        turn[0] += 1
        if path != FULL_PATH and turn[0] % 2 == 0:
            calls.append(path)
            return ""
        return await inner(path)

    scraper = TieredScraper(fetch, ScrapeFilter())
    pages = [await scraper.scrape() for _ in range(8)]
    assert scraper.probes <= 2 and scraper.state.mode == "full"
    assert calls[-4:] == [FULL_PATH] * 4
    assert all(parse_snapshot(p) == parse_snapshot(m.render().decode()) for p in pages)


async def test_once_on_llama_server_says_not_vllm(data: DataDir) -> None:
    page = data.text("llamacpp-metrics-after.txt")

    async def fetch(path: str) -> str:
        if path != FULL_PATH:
            raise FilterRefused("404 Not Found")
        return page

    scraper = TieredScraper(fetch, ScrapeFilter(once=True))
    assert await scraper.scrape() == page
    assert scraper.state.text == "full page (not vLLM)"


async def test_once_on_a_server_answering_every_path_with_its_llama_page_says_not_vllm(data: DataDir) -> None:
    """The filtered path answers the whole llama-server page: used as it is, and named as the
    per-scrape path names it ('not vLLM', not 'filter ignored')."""
    page = data.text("llamacpp-metrics-after.txt")
    calls: list[str] = []

    async def fetch(path: str) -> str:
        calls.append(path)
        return page

    scraper = TieredScraper(fetch, ScrapeFilter(once=True))
    assert await scraper.scrape() == page
    assert len(calls) == 1 and calls[0] != FULL_PATH
    assert scraper.state.text == "full page (not vLLM)"


def test_fleet_json_says_how_each_server_is_scraped() -> None:
    from mtpwatch.commands.fleet import direct_json
    from mtpwatch.sim.harness import SimThread

    with SimThread(speed=50) as honours, SimThread(speed=50, metrics_filter="empty") as empty:
        doc = direct_json([honours, empty], window_s=1.0, interval_s=0.25, idle_interval_s=0.5, api_key=None)
    assert doc["scrape"][honours].startswith("filtered, ")
    assert doc["scrape"][empty] == "full page (filtered answer empty: several API servers?)"
    assert {r["source"] for r in doc["rows"]} == {honours, empty}
