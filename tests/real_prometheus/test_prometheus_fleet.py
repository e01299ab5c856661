"""Fleet numbers read through a real Prometheus equal those mtpwatch computes from direct scrapes.

Three simulator processes (one with its acceptance collapsed to 5 % of the preset's) are scraped by
Debian's Prometheus 2.42 every second and by mtpwatch's own fleet scraper at 4 Hz. Over one window
that starts before a burst of requests and ends after it, the counter deltas are exact on both sides;
Prometheus' `increase()` then multiplies each series' delta by its extrapolation factor
(extrapolatedRate in promql/functions.go: the sampled interval stretched to the window's edges when
the first/last sample lies within 1.1 average sample intervals of them, else by half an interval),
which this test recomputes from the raw samples. So every increase must equal direct delta ×
factor, and the ratios (acceptance, mean length, per position) may differ only by the ratio of two
series' factors, which the test bounds from the same samples.

Then: the README's `snapshot --prometheus` and `attach --prometheus` commands; Enter on the collapsed
row (its monitor fed from Prometheus, with history from before it opened); a server restart inside
the window (increase() adds the value before the reset: the row counts exactly the traffic since);
and a dead target (`up == 0`: the row says down).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from mtpwatch.core.fleet.rows import FleetRow
from mtpwatch.core.fleet.scraper import FleetScraper, Target
from mtpwatch.core.sources.prometheus import PrometheusSource
from tests.feeds import server_feeds

from .conftest import Procs, Tty, start_prometheus, start_sims

COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
}
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def extrapolation_factor(points: list[tuple[int, float]], range_start_ms: int, range_end_ms: int) -> float:
    """increase() / Δ for one series, Δ = last − first plus the value before each reset: Prometheus
    2.42's extrapolatedRate for a counter.

    Times in integer milliseconds, as Prometheus keeps them (floats near 1.7e9 s lose the last digits).
    """
    (t0, v0), (t1, _) = points[0], points[-1]
    delta = reset_corrected(points)
    to_start, to_end, sampled = (t0 - range_start_ms) / 1000, (range_end_ms - t1) / 1000, (t1 - t0) / 1000
    avg = sampled / (len(points) - 1)
    if delta > 0 and v0 >= 0:
        to_start = min(to_start, sampled * (v0 / delta))
    threshold = avg * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else avg / 2
    interval += to_end if to_end < threshold else avg / 2
    return interval / sampled


def reset_corrected(points: list[tuple[int, float]]) -> float:
    """last − first, plus the value before every drop (a counter reset)."""
    delta, prev = points[-1][1] - points[0][1], 0.0
    for _, v in points:
        if v < prev:
            delta += prev
        prev = v
    return delta


async def generate(url: str, prompt: str, max_tokens: int) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        r = await client.post(
            url + "/v1/completions",
            json={"prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
        )
        r.raise_for_status()


async def raw_matrix(prom: str, selector: str, t: float) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as client:
        r = await client.get(prom + "/api/v1/query", params={"query": selector, "time": f"{t:.3f}"})
        body = r.json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result


async def wait_scraped(prom: str, n: int) -> None:
    """Until Prometheus has scraped all `n` targets (its discovery hands targets over after ~5 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        result = await raw_matrix(prom, 'count(up{job="vllm"} == 1)', time.time())
        if result and float(result[0]["value"][1]) == n:
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"Prometheus did not scrape all {n} targets within 60 s")


async def wait_prometheus(prom: str, query: str, done: Callable[[float], bool], what: str) -> None:
    """Until the instant `query` (one number) satisfies `done`: Prometheus' scrapes come later on a
    loaded machine, so the test waits for the scrapes it needs rather than for a fixed time."""
    deadline = time.monotonic() + 60
    value = None
    while time.monotonic() < deadline:
        result = await raw_matrix(prom, query, time.time())
        value = float(result[0]["value"][1]) if result else None
        if value is not None and done(value):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"Prometheus: {what} not within 60 s ({query} = {value})")


async def wait_direct(scraper: FleetScraper, scrapes: int, what: str) -> None:
    """Until the direct scraper has made `scrapes` successful scrapes in all."""
    deadline = time.monotonic() + 60
    while scraper.stats.scrapes < scrapes:
        assert time.monotonic() < deadline, f"direct scrapes: {what} not within 60 s"
        await asyncio.sleep(0.05)


def scraped_after(prom: str, t: float, instance: str = "") -> Awaitable[None]:
    """Until Prometheus holds a sample, of every target or of `instance`, scraped after `t`."""
    selector = f'job="vllm",instance="{instance}"' if instance else 'job="vllm"'
    return wait_prometheus(
        prom, f"min(timestamp(up{{{selector}}}))", lambda v: v > t, f"a scrape after {t:.3f}"
    )


async def check_monitor_from_prometheus(prom: str, collapsed: str) -> None:
    from mtpwatch.config import AppConfig, DisplaySettings, FleetSettings
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.screens.monitor import MonitorScreen
    from mtpwatch.ui.widgets.fleet_table import FleetTable

    config = AppConfig(
        servers=[],
        display=DisplaySettings(scrape_interval_s=0.5),
        fleet=FleetSettings(prometheus=prom, selector='{job="vllm"}', window_s=60.0),
    )
    app = make_app(config)
    async with app.run_test(size=(180, 40)) as pilot:
        table = app.screen.query_one(FleetTable)
        deadline = time.monotonic() + 60
        while len(table.rows_shown) < 3:
            assert time.monotonic() < deadline, "no rows from Prometheus"
            await pilot.pause(0.2)
        index = next(i for i, r in enumerate(table.rows_shown) if r.name == collapsed)
        table.move_cursor(row=index)
        await pilot.press("enter")
        monitor = app.screen
        assert isinstance(monitor, MonitorScreen)
        while not (monitor.feeds and monitor.feeds[0].state().status == "up"):
            assert time.monotonic() < deadline + 60, "the Prometheus-fed monitor never came up"
            await pilot.pause(0.2)
        feed = server_feeds(monitor)[0]
        assert len(feed.watch.collector) >= 10, "history from before the monitor opened"
        rates = feed.rates("60 s")
        assert rates is not None and rates.acceptance_rate is not None and rates.acceptance_rate < 0.2
        assert max(v for _, v in feed.watch.collector.tok_s_series()) > 0
        await pilot.press("escape")
        await pilot.pause(0.3)
        await pilot.press("ctrl+q")


def by_instance(rows: list[FleetRow], strip_scheme: bool) -> dict[str, FleetRow]:
    return {(r.source.split("://", 1)[-1] if strip_scheme else r.source): r for r in rows}


async def test_prometheus_fleet_equals_direct_scrapes(procs: Procs, tmp_path: Path) -> None:
    urls = start_sims(
        procs,
        ["--speed", "4", "--seed", "1"],
        ["--speed", "4", "--seed", "2"],
        ["--speed", "4", "--seed", "3", "--acceptance", "0.05"],  # the collapsed server
    )
    hosts = [u.split("://", 1)[1] for u in urls]
    collapsed = hosts[2]
    prom = start_prometheus(procs, tmp_path, hosts)
    await wait_scraped(prom, len(hosts))
    # Warm-up: counters start from non-zero values (Prometheus' zero-point rule then plays no part).
    await asyncio.gather(*(generate(u, f"warm up {i}", 40) for i, u in enumerate(urls)))

    scraper = FleetScraper([Target(u) for u in urls], interval_s=0.25, clock=time.time)
    task = asyncio.create_task(scraper.run())
    try:
        # The window starts 2.5 s before the burst: at least that long, and until both sides hold
        # the scrapes it needs there (≥ 2 Prometheus ones a target, ≥ 12 direct ones a target).
        await asyncio.sleep(3.5)
        await wait_prometheus(
            prom, 'min(count_over_time(up{job="vllm"}[2500ms]))', lambda v: v >= 2, "2 scrapes in 2.5 s"
        )
        await wait_direct(scraper, 12 * len(urls), "12 a target")
        t_start = time.time()
        await asyncio.gather(
            *(
                generate(u, f"Write a story about server {i} and request {j}.", 100)
                for i, u in enumerate(urls)
                for j in range(2)
            )
        )
        # Flat counters after the burst on both sides: scrapes made after it ended, on each side.
        t_burst_end, after_burst = time.time(), scraper.stats.scrapes
        await asyncio.sleep(3.5)
        await scraped_after(prom, t_burst_end)
        await wait_direct(scraper, after_burst + 4 * len(urls), "4 a target after the burst")
        t_end = round(time.time(), 3)
        window = round(t_end - t_start + 2.5, 3)
        direct = scraper.rows(window, now=t_end)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await scraper.aclose()

    source = PrometheusSource(prom, selector='{job="vllm"}', stale_after_s=5)
    try:
        via_prom = (await source.read(window, at=t_end)).rows
    finally:
        await source.aclose()

    d = by_instance(direct, strip_scheme=True)
    p = by_instance(via_prom, strip_scheme=False)
    assert sorted(d) == sorted(hosts) == sorted(p)

    w_ms = round(window * 1000)
    range_end_ms = round(t_end * 1000)
    range_start_ms = range_end_ms - w_ms
    factors: dict[tuple[str, str], float] = {}
    for field, name in [*COUNTERS.items(), ("per_position", PER_POS)]:
        for series in await raw_matrix(prom, f'{name}{{job="vllm"}}[{w_ms}ms]', t_end):
            pts = [(round(float(t) * 1000), float(v)) for t, v in series["values"]]
            inst = series["metric"]["instance"]
            key = field if field != "per_position" else f"pos{series['metric']['position']}"
            factors[(inst, key)] = extrapolation_factor(pts, range_start_ms, range_end_ms)

    for host in hosts:
        dr, pr = d[host], p[host]
        assert dr.state == pr.state == "up"
        assert dr.model == pr.model and dr.k == pr.k == 2
        assert dr.drafts > 50, "the burst must give enough drafts to compare"
        for field in COUNTERS:
            expect = getattr(dr, field) * factors[(host, field)]
            assert getattr(pr, field) == pytest.approx(expect, rel=1e-9), (host, field)
        # ratios: the factors of numerator and denominator differ by at most this much
        fs = [factors[(host, f)] for f in COUNTERS] + [factors[(host, "pos0")], factors[(host, "pos1")]]
        spread = max(fs) / min(fs) - 1
        print(
            f"{host}: increase()/Δ {min(fs):.4f}…{max(fs):.4f}; acceptance direct {dr.acceptance:.4f} "
            f"Prometheus {pr.acceptance:.4f}; mean length {dr.mean_length:.4f} vs {pr.mean_length:.4f}"
        )
        assert pr.acceptance == pytest.approx(dr.acceptance, rel=spread + 1e-9)
        assert pr.mean_length is not None and dr.mean_length is not None
        assert pr.mean_length - 1 == pytest.approx(dr.mean_length - 1, rel=spread + 1e-9)
        for a, b in zip(pr.per_position, dr.per_position, strict=True):
            assert a == pytest.approx(b, rel=spread + 1e-9, abs=1e-12)
        # tok/s: Prometheus' rate() is increase / window; direct is Δ / Δt of its own scrapes
        assert pr.decode_tok_s == pytest.approx(pr.generation_tokens / window, rel=1e-9)
        # the direct window ends at its last scrape: up to one interval (more on a loaded machine) short
        assert dr.window_s is not None and dr.window_s >= window - 1.0

    for rows in (direct, via_prom):
        flagged = {r.name for r in rows if "acceptance" in r.outliers}
        assert flagged == {collapsed}, rows
    collapsed_acceptance = d[collapsed].acceptance
    assert collapsed_acceptance is not None and collapsed_acceptance < 0.2
    assert min(d[h].acceptance or 0 for h in hosts[:2]) > 0.4

    # The README's commands: the same numbers as the CLI prints them, and the fleet view on screen.
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "mtpwatch", "snapshot", "--prometheus", prom, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert {r["source"] for r in doc["rows"]} == set(hosts)
    assert doc["outliers"] == [collapsed] and "increase(" in doc["queries"]["drafts"]
    tty = Tty(procs, ["attach", "--prometheus", prom, "--selector", '{job="vllm"}'])
    tty.wait_for("fleet", "Prometheus", *hosts, "idle")  # the burst ended > 10 s ago
    assert tty.quit() == 0

    # Enter on the collapsed row: the single-server monitor, fed from Prometheus, its history
    # (from before the monitor opened) read by a range query.
    await check_monitor_from_prometheus(prom, collapsed)

    # A server that restarts (counters back to 0) inside the window: increase() adds the value before
    # the reset, so the row counts the traffic after the restart, not a negative or a full total.
    t_before = time.time()
    async with httpx.AsyncClient(timeout=10) as client:
        r = await client.post(urls[0] + "/sim/fault", json={"restart": True})
        r.raise_for_status()
        await scraped_after(prom, time.time(), hosts[0])  # Prometheus scrapes the reset counters
        await generate(urls[0], "After the restart, write one more story.", 60)
        # A target that dies: Prometheus' `up` turns 0 and the row says so (checked below).
        t_kill = time.time()
        procs.procs[2].terminate()
        procs.procs[2].wait(timeout=10)
        # Prometheus holds the last counters of the first server and the dead one's `up == 0`.
        await scraped_after(prom, t_kill, hosts[0])
        await wait_prometheus(
            prom,
            f'timestamp(up{{instance="{collapsed}"}} == 0)',
            lambda v: v > t_kill,
            "the dead one's up == 0",
        )
        page = (await client.get(urls[0] + "/metrics")).text
    from mtpwatch.core.metrics.snapshot import parse_snapshot

    after_restart = parse_snapshot(page)
    t_end2 = round(time.time(), 3)
    w2_ms = max(5000, round((t_end2 - t_before + 2.0) * 1000))  # ≥ 4 scrape intervals: not widened
    reset = await raw_matrix(prom, f'{COUNTERS["drafts"]}{{instance="{hosts[0]}"}}[{w2_ms}ms]', t_end2)
    pts = [(round(float(t) * 1000), float(v)) for t, v in reset[0]["values"]]
    assert any(b[1] < a[1] for a, b in itertools.pairwise(pts)), "the window holds the reset"
    assert reset_corrected(pts) == after_restart.drafts > 0
    factor = extrapolation_factor(pts, round(t_end2 * 1000) - w2_ms, round(t_end2 * 1000))
    source = PrometheusSource(prom, selector='{job="vllm"}', stale_after_s=5)
    try:
        across = by_instance((await source.read(w2_ms / 1000, at=t_end2)).rows, strip_scheme=False)[hosts[0]]
    finally:
        await source.aclose()
    assert across.drafts == pytest.approx(after_restart.drafts * factor, rel=1e-9)
    assert across.acceptance is not None and 0 < across.acceptance < 1
    source = PrometheusSource(prom, selector='{job="vllm"}', stale_after_s=5)
    try:
        later = by_instance((await source.read(10.0)).rows, strip_scheme=False)
    finally:
        await source.aclose()
    assert later[collapsed].state == "down" and "up == 0" in later[collapsed].reason
    assert later[hosts[0]].state in ("up", "idle", "restarted")  # restarted: the reset is in the window
