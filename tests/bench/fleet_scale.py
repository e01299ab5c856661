"""Fleet view at scale: 8, 16 and 32 simulated servers scraped at 4 Hz; CPU, scrape cycle, frame time.

    python tests/bench/fleet_scale.py [--seconds 20] [--sizes 8,16,32] [--procs 4] [--load 1]

The servers are `mtpwatch sim --count N --load 1` processes (each server keeps one request in flight,
so every page changes every scrape; `--load 0`: an idle fleet, which the scraper asks every 0.5 s,
the idle cadence); their CPU is not counted. For each size the app runs headless
(Textual's real compositor, `run_test`) with the fleet view of the first N servers, and the bench
reports, over `--seconds` after a 3 s warm-up:

- CPU: the app process's CPU time / wall time, in % of one core (scraping, parsing, rows, table,
  rendering; the simulators run elsewhere);
- scrape cycle: per 4 Hz tick, from the tick to the end of the last scrape it started (HTTP round
  trip included, so a busy machine's simulators lengthen it), median / p95 / max;
- frame time: sorting the rows and rebuilding the table (`FleetScreen.show_rows`, 1 per second),
  median / p95; and the scraper alone (no UI) for the share the screen adds.

Targets (issue 12): ≤ 10 % of one core and a cycle < 250 ms at 32 servers. Growth is printed as
ratios between sizes (paired: the same servers, the same machine, back to back).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import statistics
import subprocess
import sys
import time

from mtpwatch.config import AppConfig, DisplaySettings, FleetSettings
from mtpwatch.core.fleet.rows import FleetRow

INTERVAL_S = 0.25


def start_sims(total: int, procs: int, load: int = 1) -> tuple[list[subprocess.Popen[str]], list[str]]:
    per = -(-total // procs)
    started: list[subprocess.Popen[str]] = []
    urls: list[str] = []
    left = total
    while left > 0:
        n = min(per, left)
        proc = subprocess.Popen(
            [sys.executable, "-m", "mtpwatch", "sim", "--port", "0", "--count", str(n), "--load", str(load)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        started.append(proc)
        assert proc.stdout is not None
        urls += [proc.stdout.readline().rsplit(" on ", 1)[1].strip() for _ in range(n)]
        left -= n
    return started, urls


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        proc.wait(timeout=20)


def newest(values: list[float], n: int) -> list[float]:
    return values[len(values) - min(n, len(values)) :]


def q(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")


async def measure_app(urls: list[str], seconds: float) -> dict[str, float]:
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.screens.fleet import FleetScreen

    config = AppConfig(
        servers=[],
        display=DisplaySettings(scrape_interval_s=INTERVAL_S),
        fleet=FleetSettings(urls=tuple(urls), window_s=10.0),
    )
    app = make_app(config)
    async with app.run_test(size=(200, max(30, len(urls) + 8))) as pilot:
        screen = app.screen
        assert isinstance(screen, FleetScreen) and screen.scraper is not None
        await pilot.pause(3.0)
        scraper = screen.scraper
        ticks0 = scraper.stats.ticks
        frames: list[float] = []  # seconds each table update took, from now on
        show_rows = screen.show_rows

        def timed(rows: list[FleetRow]) -> None:
            t0 = time.perf_counter()
            show_rows(rows)
            frames.append(time.perf_counter() - t0)

        screen.show_rows = timed  # type: ignore[method-assign]
        scrapes0 = scraper.stats.scrapes + scraper.stats.failures
        t_wall, t_cpu = time.perf_counter(), time.process_time()
        await asyncio.sleep(seconds)
        cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
        # The newest entries since the window began (the lists are bounded, so not by position).
        cycles = newest(scraper.stats.cycles, scraper.stats.ticks - ticks0)
        up = sum(1 for r in screen.rows if r.state == "up")
        out = {
            "cpu_pct": 100 * cpu / wall,
            "cycle_p50_ms": 1000 * statistics.median(cycles),
            "cycle_p95_ms": 1000 * q(cycles, 0.95),
            "cycle_max_ms": 1000 * max(cycles),
            "frame_p50_ms": 1000 * statistics.median(frames),
            "frame_p95_ms": 1000 * q(frames, 0.95),
            "scrapes_per_s": (scraper.stats.scrapes + scraper.stats.failures - scrapes0) / wall,
            "frames_per_s": len(frames) / wall,
            "rows_up": up,
        }
        await pilot.press("ctrl+q")
    return out


async def measure_scraper(urls: list[str], seconds: float) -> dict[str, float]:
    from mtpwatch.core.fleet.scraper import FleetScraper, Target

    scraper = FleetScraper([Target(u) for u in urls], interval_s=INTERVAL_S)
    task = asyncio.create_task(scraper.run())
    await asyncio.sleep(2.0)
    scrapes0, failures0 = scraper.stats.scrapes, scraper.stats.failures
    t_wall, t_cpu = time.perf_counter(), time.process_time()
    await asyncio.sleep(seconds)
    scraper.rows(10.0)
    cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
    scrapes = scraper.stats.scrapes - scrapes0 + scraper.stats.failures - failures0
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await scraper.aclose()
    return {"cpu_pct": 100 * cpu / wall, "cpu_ms_per_scrape": 1000 * cpu / max(1, scrapes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--sizes", default="8,16,32")
    parser.add_argument("--procs", type=int, default=4, help="simulator processes sharing the servers")
    parser.add_argument("--load", type=int, default=1, help="requests each server keeps in flight (0: idle)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    sims, urls = start_sims(max(sizes), args.procs, args.load)
    results: dict[int, dict[str, float]] = {}
    try:
        time.sleep(1.0)
        for n in sizes:
            app = asyncio.run(measure_app(urls[:n], args.seconds))
            alone = asyncio.run(measure_scraper(urls[:n], args.seconds / 2))
            app["scraper_alone_cpu_pct"] = alone["cpu_pct"]
            # CPU per scrape (scraper alone) and, from the app's total, per table update: the
            # projection to a full 4 Hz × n scrapes a second holds when the simulators keep up.
            per_scrape = alone["cpu_ms_per_scrape"]
            ui_ms = app["cpu_pct"] * 10 - per_scrape * app["scrapes_per_s"]
            per_frame = ui_ms / max(app["frames_per_s"], 1e-9)
            app["projected_cpu_pct"] = (per_scrape * n / INTERVAL_S + per_frame * 1) / 10
            results[n] = app
            print(
                f"fleet_scale: {n:2d} servers at 4 Hz: app CPU {app['cpu_pct']:.1f} % of a core "
                f"(scraper alone {alone['cpu_pct']:.1f} %), scrape cycle p50 {app['cycle_p50_ms']:.0f} ms "
                f"p95 {app['cycle_p95_ms']:.0f} ms max {app['cycle_max_ms']:.0f} ms, frame p50 "
                f"{app['frame_p50_ms']:.1f} ms p95 {app['frame_p95_ms']:.1f} ms, "
                f"{app['scrapes_per_s']:.0f} scrapes/s (of {n / INTERVAL_S:.0f} asked), "
                f"{app['rows_up']:.0f} rows up",
                flush=True,
            )
            print(
                f"fleet_scale: {n:2d} servers: {per_scrape:.2f} ms CPU per scrape, "
                f"{per_frame:.1f} ms CPU per table update (1 a second) → projected "
                f"{app['projected_cpu_pct']:.1f} % of a core at the full {n / INTERVAL_S:.0f} scrapes/s",
                flush=True,
            )
    finally:
        stop(sims)
    for a, b in itertools.pairwise(sizes):
        ra, rb = results[a], results[b]
        print(
            f"fleet_scale: {a} → {b} servers (×{b / a:g}): CPU ×{rb['cpu_pct'] / ra['cpu_pct']:.2f}, "
            f"cycle p50 ×{rb['cycle_p50_ms'] / ra['cycle_p50_ms']:.2f}, "
            f"frame p50 ×{rb['frame_p50_ms'] / ra['frame_p50_ms']:.2f}"
        )
    big = results[max(sizes)]
    print(
        f"fleet_scale: targets at {max(sizes)}: CPU ≤ 10 % of a core → {big['cpu_pct']:.1f} % measured "
        f"at {big['scrapes_per_s']:.0f} scrapes/s, {big['projected_cpu_pct']:.1f} % projected at "
        f"{max(sizes) / INTERVAL_S:.0f}/s; "
        f"cycle < 250 ms → p50 {big['cycle_p50_ms']:.0f} ms, p95 {big['cycle_p95_ms']:.0f} ms"
    )
    print(f"fleet_scale: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
