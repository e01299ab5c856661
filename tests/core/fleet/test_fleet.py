"""core.fleet: a page split by engine, the outlier rule, rows from rates, the scraper's isolation."""

from __future__ import annotations

import asyncio
import time

import pytest

from mtpwatch.core.fleet.outliers import mark_outliers
from mtpwatch.core.fleet.report import fleet_report
from mtpwatch.core.fleet.rows import FleetRow, split_page
from mtpwatch.core.fleet.scraper import Fetch, FleetScraper, Target
from mtpwatch.core.metrics.snapshot import parse_snapshot
from mtpwatch.sim.harness import running_sim
from tests.datadir import DataDir
from tests.reference_metrics import is_outlier


def two_engines(text: str) -> str:
    """The real page with every engine="0" series repeated as engine="1" at twice the value."""
    out = [text]
    for line in text.splitlines():
        if line.startswith("vllm:") and 'engine="0"' in line:
            series, value = line.rsplit(" ", 1)
            other = series.replace('engine="0"', 'engine="1"')
            out.append(f"{other} {float(value) * 2}")
    return "\n".join(out) + "\n"


def test_split_page_gives_one_snapshot_per_engine_and_they_sum_to_the_page(data: DataDir) -> None:
    text = two_engines(data.text("metrics-ngram-k4-after.txt"))
    groups = split_page(text)
    assert list(groups) == [("spec", "0"), ("spec", "1")]
    e0, e1 = groups[("spec", "0")], groups[("spec", "1")]
    assert e0.drafts == 51 and e1.drafts == 102
    assert e0.num_speculative_tokens == e1.num_speculative_tokens == 4
    whole = parse_snapshot(text)
    assert whole.drafts == e0.drafts + e1.drafts
    assert whole.accepted_per_pos == tuple(
        a + b for a, b in zip(e0.accepted_per_pos, e1.accepted_per_pos, strict=True)
    )


def test_split_page_llamacpp_and_empty() -> None:
    page = (
        "llamacpp:spec_decode_num_drafts_total 13\nllamacpp:spec_decode_num_draft_tokens_total 50\n"
        "llamacpp:spec_decode_num_accepted_tokens_total 50\n"
        'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 13\n'
        "llamacpp:tokens_predicted_total 64\n"
    )
    groups = split_page(page)
    assert list(groups) == [(None, None)]
    assert groups[(None, None)].schema == "llamacpp" and groups[(None, None)].drafts == 13
    assert split_page("python_info 1\n") == {}


def row(name: str, acc: float | None, tok_s: float | None, *, model: str = "m", k: int = 2) -> FleetRow:
    return FleetRow(
        source=f"http://{name}",
        model=model,
        engine="0",
        k=k,
        state="up",
        acceptance=acc,
        decode_tok_s=tok_s,
        drafts=100.0 if acc is not None else 0.0,
        generation_tokens=100.0 if tok_s is not None else 0.0,
    )


def test_outlier_rule() -> None:
    assert is_outlier(0.02, [0.70, 0.72])
    assert not is_outlier(0.70, [0.72, 0.02])  # the collapsed peer does not make a healthy row odd
    assert not is_outlier(0.02, [0.70])  # one peer: nothing says which of the two is odd
    assert not is_outlier(0.60, [0.70, 0.72, 0.71])  # 14 % below: within the 25 % floor
    assert is_outlier(0.50, [0.70, 0.72, 0.71])


def test_mark_outliers_compares_only_same_model_and_k() -> None:
    rows = [
        row("a", 0.70, 50.0),
        row("b", 0.72, 52.0),
        row("c", 0.02, 30.0),
        row("d", 0.02, 30.0, k=4),  # another k: no peers for its numbers; its k is the odd one
        row("e", 0.71, 51.0, model="other"),
        row("f", None, None),  # no drafts in the window: judged on nothing, not a peer
    ]
    marked = {r.source.split("//")[1]: r.outliers for r in mark_outliers(rows)}
    assert marked == {"a": (), "b": (), "c": ("acceptance", "tok/s"), "d": ("k",), "e": (), "f": ()}
    doc = fleet_report(mark_outliers(rows), window_s=10, source="test")
    assert doc["outliers"] == ["c", "d"]
    assert [r["outlier"] for r in doc["rows"]] == [False, False, True, True, False, False]
    # by group: (m, k=2) holds a, b, c, f; c is its outlier, with why; d is a group of its own
    groups = {(g["model"], g["k"]): g for g in doc["groups"]}
    assert groups[("m", 2)]["instances"] == 4 and groups[("m", 2)]["acceptance_rate"]["p50"] == 0.7
    assert [o["source"] for o in groups[("m", 2)]["outliers"]] == ["c"]
    assert "acceptance 0.020 vs its group's median 0.710" in groups[("m", 2)]["outliers"][0]["why"][0]
    assert doc["groups"][0]["outliers"], "groups with outliers first"
    from mtpwatch.render.snapshot_table import render_fleet

    text = render_fleet(doc)
    assert "⚠ c: acceptance 0.020" in text and "k=4 where 4 of 5 of m run k=2" in text


async def test_a_slow_and_a_dead_server_do_not_delay_the_others() -> None:
    async with (
        running_sim(load=1, speed=4) as fast,
        running_sim(load=1, speed=4, metrics_delay_s=1.5) as slow,
    ):
        dead = "http://127.0.0.1:9"
        scraper = FleetScraper([Target(fast), Target(slow), Target(dead)], interval_s=0.1, timeout_s=1.0)
        spans: dict[str, list[tuple[float, float]]] = {fast: [], slow: [], dead: []}
        for track in scraper.tracks:
            inner = track.fetch

            async def counted(inner: Fetch = inner, url: str = track.target.url) -> str:
                start = time.monotonic()
                try:
                    return await inner()
                finally:
                    spans[url].append((start, time.monotonic()))

            track.fetch = counted
        task = asyncio.create_task(scraper.run())
        # Until the slow server has timed out twice: a condition (a loaded machine takes longer).
        deadline = time.monotonic() + 60
        while len(spans[slow]) < 2 and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        rows = {r.source: r for r in scraper.rows(10.0)}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await scraper.aclose()
    # While each slow scrape hung (1 s, to its timeout), the fast server kept being scraped: a
    # scraper that waited for the slow one would finish none meanwhile. (Not a pace: at 10 Hz
    # about ten fit; a loaded machine fits fewer.)
    assert len(spans[slow]) >= 2, spans
    during = [sum(a <= s and e <= b for s, e in spans[fast]) for a, b in spans[slow][:2]]
    assert all(n >= 2 for n in during), (during, spans)
    assert rows[fast].state == "up"
    assert rows[slow].state in ("down", "connecting") and "no answer within 1 s" in rows[slow].reason
    assert rows[dead].state in ("down", "connecting") and "connection refused" in rows[dead].reason
    # backoff: the dead server was asked far less often than every tick
    assert len(spans[dead]) <= 6, spans[dead]


def test_scraper_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        FleetScraper([], interval_s=0)


async def test_cycle_times_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet view open for days keeps the newest ticks' cycle times, not every tick's."""
    from mtpwatch.core.fleet import scraper as scraper_module

    monkeypatch.setattr(scraper_module, "CYCLES_KEPT", 5)
    page = 'vllm:generation_tokens_total{model_name="m"} 1.0\n'

    async def fetch() -> str:
        return page

    scraper = FleetScraper([Target("http://127.0.0.1:1")], interval_s=0.01, fetch_factory=lambda _: fetch)
    for _ in range(40):
        await scraper.tick()
        await asyncio.sleep(0.011)
    assert scraper.stats.ticks == 40
    assert 5 <= len(scraper.stats.cycles) <= 10
    assert scraper.stats.summary()["cycles"] == len(scraper.stats.cycles)


async def test_an_idle_server_is_scraped_at_the_idle_interval_and_traffic_restores_the_pace() -> None:
    """The monitor's idle cadence (`Collector.idle`): every other tick at 4 Hz while nothing runs
    and no token is counted; every tick again from the scrape that shows a request."""
    from mtpwatch.sim.metrics import SimMetrics

    m = SimMetrics(model_name="m", k=3, max_model_len=4096, cache_info={"block_size": "16"})
    m.observe_step(prompt_tokens=7, generation_tokens=5, itls=[0.02], ttfts=[0.1], read_bytes=None)
    m.observe_scheduler(running=0, waiting=0, kv_usage=0.0)
    now = [0.0]
    asked: list[float] = []

    async def fetch() -> str:
        asked.append(now[0])
        return m.render().decode()

    scraper = FleetScraper(
        [Target("http://127.0.0.1:1")],
        interval_s=0.25,
        idle_interval_s=0.5,
        clock=lambda: now[0],
        fetch_factory=lambda _: fetch,
    )

    async def ticks(n: int) -> None:
        for _ in range(n):
            await scraper.tick()
            now[0] += 0.25

    await ticks(10)  # t = 0 … 2.25: two scrapes to see it idle, then every 0.5 s
    assert asked == [0.0, 0.25, 0.75, 1.25, 1.75, 2.25]
    m.observe_scheduler(running=1, waiting=0, kv_usage=0.1)  # a request arrives at t = 2.5
    del asked[:]
    await ticks(4)  # t = 2.5 … 3.25
    assert asked == [2.75, 3.0, 3.25]  # seen at the next due scrape, then every tick
    assert scraper.stats.failures == 0


@pytest.mark.parametrize("seed", range(20))
def test_mark_outliers_equals_the_rule_row_by_row(seed: int) -> None:
    """The whole-group computation gives what `is_outlier` gives each row against the others."""
    import random

    rng = random.Random(seed)
    n = rng.randint(1, 30)
    accs = [round(rng.choice([rng.gauss(0.7, 0.02), rng.uniform(0, 1)]), 3) for _ in range(n)]
    rows = [row(f"r{i}", a, rng.choice([50.0, 51.0, 20.0])) for i, a in enumerate(accs)]
    marked = mark_outliers(rows)
    for i, r in enumerate(marked):
        peers = [a for j, a in enumerate(accs) if j != i]
        assert ("acceptance" in r.outliers) == is_outlier(accs[i], peers), (seed, i)
