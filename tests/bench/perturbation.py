"""Does watching slow the server down? Decode tok/s with mtpwatch watching vs nobody watching.

Runs paired trials against a live vLLM, one streamed completion (`ignore_eos`, fixed length) per
trial: A with nobody scraping, B with a watcher, in ABBA order (a slow drift adds to A in half the
pairs and to B in the other half). The watcher is either the real app (`--watcher app`: `mtpwatch
attach URL` on a pseudo-terminal, drawing, scraping at the app's default interval; started before
the B trial and quit after it) or a bare scraper (`--watcher scraper`: a separate interpreter that
GETs and parses /metrics every `--interval` seconds the way the app does). Prints JSON: per-pair
ratios B/A, their median with a distribution-free 95 % CI and a bootstrap one, and whether the
median meets the target (≥ 0.995: watching costs at most 0.5 % of decode speed).

On a small machine pin the server and the watcher to different cores, as the issue's measurement
does: the server with `taskset`, this benchmark (and so the watcher and its load client) with
`--cpus`:

    taskset -c 0 .venv/bin/mtpwatch start MODEL --method ngram -k 4 --headless --port 8000 &
    .venv/bin/python tests/bench/perturbation.py --url http://127.0.0.1:8000 --cpus 1 --pairs 12

One completion against the next scatters by ±10 % on one core, so those pairs cannot resolve the
0.5 % of the target. `--windows N` does: generations stream back to back while the bare scraper
(scraping as the app does: filtered tiers; `--full-page` for the whole page) is switched on and off
every `--window-s` seconds in ABBA order, and each pair of adjacent windows gives a ratio of decode
rates under the same stream (windows holding a request's start are dropped):

    .venv/bin/python tests/bench/perturbation.py --url http://127.0.0.1:8000 --cpus 1 --windows 150

`--watcher none` with `--windows N` is the method's A/A control: the same windows, nobody watching
either arm. What it reads (a median that is not 1.000, a CI of its own width) is what a watched run
can be told apart from. The windowed report lists every pair's ratio (`ratios`), so runs pool:
`perturbation_pool.py` reads several watched runs against several controls.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

from mtpwatch.config import DisplaySettings
from mtpwatch.core.ab.stats import abba_order, median_ci
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest, StreamEvent
from tests.reference import bootstrap_median_ci

sys.path.insert(0, str(Path(__file__).resolve().parent))
from watch_cost import Tty  # the app on a pty, as SSH carries it

ROOT = Path(__file__).resolve().parents[2]
TARGET = 0.995
PROMPT = (
    "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    + "The quick brown fox jumps over the lazy dog near the river"
)

# The watcher runs in its own interpreter, like mtpwatch would: "on"/"off" on stdin toggle it.
SCRAPER = textwrap.dedent(
    """
    import asyncio, sys, time
    from mtpwatch.core.http.client import VllmClient
    from mtpwatch.core.metrics.filtered import ScrapeFilter
    from mtpwatch.core.metrics.snapshot import parse_snapshot
    from mtpwatch.core.metrics.rates import Collector

    async def main(url, interval, full_page):
        # as the app scrapes: the filtered tiers (hot every scrape, slow ≤ 1 Hz while tokens flow)
        client = VllmClient(url, scrape_filter=None if full_page else ScrapeFilter())
        collector = Collector()
        loop = asyncio.get_running_loop()
        active = asyncio.Event()
        count = 0

        async def scrape_loop():
            nonlocal count
            while True:
                await active.wait()
                t = time.monotonic()
                collector.add(parse_snapshot(await client.scrape_text()), t)
                collector.window(10.0, t)
                count += 1
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - t)))

        task = asyncio.create_task(scrape_loop())
        print("ready", flush=True)
        while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
            if line == "on":
                count = 0
                active.set()
                while count == 0:  # scraping is under way before the trial starts
                    await asyncio.sleep(0.01)
            else:
                active.clear()
            print(f"{line} {count}", flush=True)
        task.cancel()
        await client.aclose()

    asyncio.run(main(sys.argv[1], float(sys.argv[2]), sys.argv[3] == "full"))
    """
)


class Scraper:
    def __init__(self, url: str, interval: float, full_page: bool = False) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SCRAPER, url, str(interval), "full" if full_page else "filtered"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._read() == "ready"

    def _read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def command(self, word: str) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        reply = self._read().split()
        return int(reply[1])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


TICKS = os.sysconf("SC_CLK_TCK")


def _listener_pid(port: int) -> int | None:
    """The process listening on 127.0.0.1:`port` (its socket inode in /proc/net/tcp, then /proc/*/fd)."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table, encoding="ascii") as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inode = fields[9]
    if inode is None:
        return None
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)
    return None


def _tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError):
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _cpu_s(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def server_cost(url: str, scrapes: int = 200) -> dict[str, object]:
    """CPU the server's processes spend per /metrics answer (idle server, `scrapes` GETs in a row).

    With the whole server on one core this is what a watcher takes from decoding: at `rate` scrapes
    a second the expected ratio is 1 − rate × cpu_per_scrape.
    """
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    pid = _listener_pid(port)
    if pid is None:
        return {"error": f"no process found listening on port {port}"}
    pids = _tree(pid)
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        size = len(resp.read())
    c0, t0 = _cpu_s(pids), time.monotonic()
    for _ in range(scrapes):
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            resp.read()
    per = (_cpu_s(pids) - c0) / scrapes
    return {
        "processes": len(pids),
        "page_bytes": size,
        "server_cpu_ms_per_scrape": round(1000 * per, 2),
        "wall_ms_per_scrape": round(1000 * (time.monotonic() - t0) / scrapes, 2),
        "expected_ratio_one_core": {f"{hz:g} Hz": round(1 - hz * per, 4) for hz in (4, 2, 1, 0.5)},
    }


class AppWatcher:
    """The real app, `mtpwatch attach URL` at 160×48 on a pty, started for each B trial."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.tty: Tty | None = None
        self.started = 0.0

    def command(self, word: str) -> int:
        if word == "on":
            argv = ["attach", self.url, "--interval", str(self.interval)]
            self.tty = Tty(argv, 160, 48, None, os.devnull)
            deadline = time.monotonic() + 30
            while self.tty.first_output is None and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(3.0)  # identification and the first scrapes: watching is under way
            self.started = time.monotonic()
            return 0
        assert self.tty is not None
        self.tty.quit()
        self.tty = None
        return -1  # the app's scrapes are not counted from the outside

    def close(self) -> None:
        if self.tty is not None:
            self.tty.quit()


async def trial(client: VllmClient, model: str | None, max_tokens: int) -> float:
    request = GenerationRequest(PROMPT, model=model, max_tokens=max_tokens, ignore_eos=True)
    result = await client.generate(request)
    if result.error or result.decode_tok_s is None:
        raise SystemExit(f"perturbation: generation failed: {result.error}")
    return result.decode_tok_s


async def run(
    url: str, model: str | None, pairs: int, max_tokens: int, interval: float, watcher_kind: str
) -> dict[str, object]:
    watcher: Scraper | AppWatcher
    watcher = AppWatcher(url, interval) if watcher_kind == "app" else Scraper(url, interval)
    rows: list[dict[str, Any]] = []  # one JSON row per pair
    try:
        async with VllmClient(url) as client:
            await trial(client, model, 32)  # warm-up: the first request after start is slow
            await trial(client, model, max_tokens)
            for i, order in enumerate(abba_order(pairs)):
                speeds: dict[str, float] = {}
                scrapes = 0
                elapsed = 0.0
                for arm in order:
                    if arm == "a":
                        speeds["a"] = await trial(client, model, max_tokens)
                        continue
                    await asyncio.get_running_loop().run_in_executor(None, watcher.command, "on")
                    t0 = time.monotonic()
                    speeds["b"] = await trial(client, model, max_tokens)
                    elapsed = time.monotonic() - t0
                    scrapes = await asyncio.get_running_loop().run_in_executor(None, watcher.command, "off")
                rows.append(
                    {
                        "pair": i,
                        "order": "".join(order).upper(),
                        "a_tok_s": round(speeds["a"], 2),
                        "b_tok_s": round(speeds["b"], 2),
                        "ratio": round(speeds["b"] / speeds["a"], 4),
                        "scrape_hz": round(scrapes / elapsed, 2) if elapsed and scrapes >= 0 else None,
                    }
                )
                print(f"perturbation: {rows[-1]}", file=sys.stderr)
    finally:
        watcher.close()
    ratios = [float(r["ratio"]) for r in rows]
    median = statistics.median(ratios)
    cost = server_cost(url)
    ci = median_ci(ratios)
    boot = bootstrap_median_ci(ratios)
    return {
        "url": url,
        "watcher": watcher_kind,
        "cpus": sorted(os.sched_getaffinity(0)),
        "max_tokens": max_tokens,
        "scrape_interval_s": interval,
        "pairs": rows,
        "median_ratio": round(median, 4),
        "median_ratio_ci95": [round(ci.low, 4), round(ci.high, 4), round(ci.coverage, 3)],
        "median_ratio_bootstrap_ci95": [round(boot.low, 4), round(boot.high, 4)],
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "median_a_tok_s": round(statistics.median(float(r["a_tok_s"]) for r in rows), 2),
        "median_b_tok_s": round(statistics.median(float(r["b_tok_s"]) for r in rows), 2),
        "target": TARGET,
        "meets_target": median >= TARGET,
        "server_cost": cost,
    }


WINDOWED_MAX_TOKENS = 1024
"""Each generation of the windowed mode: long, so few windows hold a request's start."""


class NoWatcher:
    """The A/A control of the windowed mode: B windows are watched by nobody either."""

    def command(self, word: str) -> int:
        return 0

    def close(self) -> None:
        pass


async def windowed(
    url: str,
    model: str | None,
    pairs: int,
    window_s: float,
    interval: float,
    full_page: bool,
    control: bool = False,
) -> dict[str, object]:
    """Toggle a bare scraper (the app's scrapes, nothing drawn) on and off every `window_s` seconds
    in ABBA order while generations stream back to back, and compare each pair of windows' decode
    rate: tokens after a window's first chunk over the time to its last (chunks arrive once per
    engine step). Windows that hold a request's start (its queueing and prefill) are dropped with
    their pair. Short alternating windows under one stream cancel the ±10 % that separates one
    completion from the next on one core, so the median ratio resolves a fraction of a percent.
    `control`: nobody watches either arm (A/A): what the method reads when there is nothing to
    find, its spread and any bias of its own.
    """
    clock = time.perf_counter
    events: list[tuple[float, int]] = []
    starts: list[tuple[float, float]] = []  # (request sent, first chunk): no decode in between
    stop = asyncio.Event()

    def on_event(ev: StreamEvent) -> None:
        events.append((ev.t, ev.tokens))

    async def load(client: VllmClient) -> None:
        while not stop.is_set():
            sent, before = clock(), len(events)
            request = GenerationRequest(PROMPT, model=model, max_tokens=WINDOWED_MAX_TOKENS, ignore_eos=True)
            result = await client.generate(request, on_event=on_event)
            starts.append((sent, events[before][0] if len(events) > before else clock()))
            if result.error:
                raise SystemExit(f"perturbation: generation failed: {result.error}")

    scraper: Scraper | NoWatcher = NoWatcher() if control else Scraper(url, interval, full_page)
    loop = asyncio.get_running_loop()
    windows: list[tuple[str, float, float]] = []
    try:
        async with VllmClient(url, clock=clock) as client:
            await trial(client, model, 32)  # warm-up
            task = asyncio.create_task(load(client))
            await asyncio.sleep(2.0)
            for order in abba_order(pairs):
                for arm in order:
                    await loop.run_in_executor(None, scraper.command, "on" if arm == "b" else "off")
                    t0 = clock()
                    await asyncio.sleep(window_s)
                    windows.append((arm, t0, clock()))
            stop.set()
            await task
    finally:
        scraper.close()

    def rate(t0: float, t1: float) -> float | None:
        if any(a < t1 and b > t0 for a, b in starts):
            return None
        inside = [(t, n) for t, n in events if t0 <= t < t1]
        if len(inside) < 3 or inside[-1][0] <= inside[0][0]:
            return None
        return sum(n for _, n in inside[1:]) / (inside[-1][0] - inside[0][0])

    rows, dropped = [], 0
    for i in range(0, len(windows), 2):
        (arm1, a0, a1), (_, b0, b1) = windows[i], windows[i + 1]
        r1, r2 = rate(a0, a1), rate(b0, b1)
        if r1 is None or r2 is None:
            dropped += 1
            continue
        a, b = (r1, r2) if arm1 == "a" else (r2, r1)
        rows.append({"pair": i // 2, "order": "AB" if arm1 == "a" else "BA", "a": a, "b": b, "ratio": b / a})
    ratios = [float(r["ratio"]) for r in rows]
    if len(ratios) < 2:
        raise SystemExit("perturbation: fewer than two usable pairs of windows")
    median = statistics.median(ratios)
    ci = median_ci(ratios)
    boot = bootstrap_median_ci(ratios)
    return {
        "url": url,
        "mode": "windowed",
        "watcher": "none (A/A control)"
        if control
        else "scraper, " + ("whole page" if full_page else "filtered tiers as the app"),
        "cpus": sorted(os.sched_getaffinity(0)),
        "window_s": window_s,
        "scrape_interval_s": interval,
        "pairs_used": len(rows),
        "pairs_dropped": dropped,
        "median_ratio": round(median, 4),
        "median_ratio_ci95": [round(ci.low, 4), round(ci.high, 4), round(ci.coverage, 3)],
        "median_ratio_bootstrap_ci95": [round(boot.low, 4), round(boot.high, 4)],
        "mean_ratio": round(statistics.fmean(ratios), 4),
        "median_a_tok_s": round(statistics.median(float(r["a"]) for r in rows), 2),
        "median_b_tok_s": round(statistics.median(float(r["b"]) for r in rows), 2),
        "target": TARGET,
        "meets_target": None if control else median >= TARGET,
        "ratios": [round(r, 5) for r in ratios],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default=None, help="served model name (default: the only one)")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument(
        "--interval",
        type=float,
        default=DisplaySettings().scrape_interval_s,
        help="the watcher's interval (default: the app's, %(default)s s)",
    )
    parser.add_argument(
        "--watcher",
        choices=("app", "scraper", "none"),
        default="app",
        help="none: windowed mode's A/A control, nobody watches either arm",
    )
    parser.add_argument(
        "--cpus", default="", help="pin this benchmark, its watcher and its load client to these CPUs, e.g. 1"
    )
    parser.add_argument(
        "--windows",
        type=int,
        default=0,
        help="windowed mode: this many pairs of alternating windows under one stream (bare scraper)",
    )
    parser.add_argument("--window-s", type=float, default=2.0, help="windowed mode: seconds a window")
    parser.add_argument("--full-page", action="store_true", help="the bare scraper reads the whole page")
    args = parser.parse_args()
    if args.watcher == "none" and not args.windows:
        parser.error("--watcher none is the windowed mode's control: give --windows N")
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    if args.windows:
        report = asyncio.run(
            windowed(
                args.url,
                args.model,
                args.windows,
                args.window_s,
                args.interval,
                args.full_page,
                control=args.watcher == "none",
            )
        )
        print(json.dumps(report, indent=2))
        return
    report = asyncio.run(run(args.url, args.model, args.pairs, args.max_tokens, args.interval, args.watcher))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
