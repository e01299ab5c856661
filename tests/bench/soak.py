"""Soak: the app watching two simulators that stream continuously, with a random fault every 10-30 s.

Not a test: it prints figures (and writes them as JSON with ``--json``). Two ``mtpwatch sim``
processes (MTP off and MTP on, real time) are watched by the app in its A/B mode, headless; a
prompt goes to both whenever the previous one ended. Every 10-30 s one server gets one fault:

  metrics_500, metrics_slow (answers later than the scrape interval), metrics_truncate,
  metrics_no_spec (spec families gone), cut_stream (mid-event or between events), hang (accepts,
  never answers), restart (counters reset, new _created), sigkill (process killed, a new one
  started on the same port a few seconds later), sigstop (frozen, then continued).

A fault is *survived* when, after it ends, the app is still running and the server's panel is
'up' again with a scrape newer than the end of the fault within 30 s. Reported: faults injected
and survived, crashes (the app exiting or a worker failing), RSS at start and end and its growth
per hour (least-squares slope after the first 10 % of the run), open file descriptors and asyncio
tasks at start and end, the largest gap between two scrapes (overall and with no fault active on
that server), prompts completed, and any number on screen that went negative or NaN.

    python tests/bench/soak.py --minutes 60 --json soak.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import dataclasses
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mtpwatch.commands.options import free_port  # noqa: E402
from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec  # noqa: E402
from mtpwatch.ui.app import MtpWatchApp, make_app  # noqa: E402
from mtpwatch.ui.widgets.token_stream import TokenStream  # noqa: E402
from tests.feeds import monitor_of, server_feeds  # noqa: E402

FAULTS = (
    "metrics_500",
    "metrics_slow",
    "metrics_truncate",
    "metrics_no_spec",
    "cut_stream",
    "hang",
    "restart",
    "sigkill",
    "sigstop",
)
RECOVERY_LIMIT_S = 30.0


def rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]  # fmt: skip


def malloc_bytes() -> tuple[int, int] | None:
    """glibc's view of its heap over all arenas: (bytes in use, bytes free but kept), or None.

    RSS growing while the in-use figure stays flat is memory the allocator keeps (fragmentation),
    not a leak. (pymalloc's own arenas are mmapped apart from this; tracemalloc sees their blocks.)
    """
    try:
        libc = ctypes.CDLL(None)
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    info = fn()
    return info.uordblks + info.hblkhd, info.fordblks


def pymalloc_bytes() -> tuple[int, int] | None:
    """pymalloc's arenas: (bytes of arenas held, bytes in allocated blocks), from
    `sys._debugmallocstats` (CPython only; it writes to the C stderr, so fd 2 is borrowed briefly).

    Arenas held growing while allocated blocks stay flat is fragmentation, not a leak."""
    debug = getattr(sys, "_debugmallocstats", None)
    if debug is None:
        return None
    import tempfile

    with tempfile.TemporaryFile() as out:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            debug()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode("ascii", "replace")
    arenas = blocks = None
    for line in text.splitlines():
        if line.startswith("# arenas allocated current"):
            arenas = int(line.rsplit("=", 1)[1].replace(",", ""))
        elif line.startswith("# bytes in allocated blocks"):
            blocks = int(line.rsplit("=", 1)[1].replace(",", ""))
    if arenas is None or blocks is None:
        return None
    return arenas * 2**20, blocks


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Sim:
    """One `mtpwatch sim` process on a fixed port; can be killed and started again."""

    def __init__(self, name: str, extra: list[str], speed: float) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [
            sys.executable, "-m", "mtpwatch", "sim", "--port", str(self.port),
            "--speed", f"{speed:g}", *extra,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )

    async def wait_up(self, limit_s: float = 30.0) -> None:
        import httpx

        deadline = time.monotonic() + limit_s
        async with httpx.AsyncClient(timeout=1.0) as http:
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(self.url + "/health")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise RuntimeError(f"simulator {self.name} did not start")

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGCONT)
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None


async def sim_fault(url: str, body: dict[str, Any]) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=5.0) as http:
        (await http.post(url + "/sim/fault", json=body)).raise_for_status()


@dataclass
class Figures:
    minutes: float = 0.0
    faults_injected: int = 0
    faults_survived: int = 0
    injections_failed: int = 0
    """Faults that could not be switched on (the simulator's control request failed)."""
    faults_by_kind: dict[str, list[int]] = field(default_factory=dict)
    """kind -> [injected, survived]"""
    crashes: int = 0
    crash_details: list[str] = field(default_factory=list)
    worker_errors: int = 0
    prompts_completed: int = 0
    prompts_with_error: int = 0
    restarts_detected: int = 0
    rss_start_mb: float = 0.0
    rss_end_mb: float = 0.0
    rss_growth_mb_per_h: float = 0.0
    fds_start: int = 0
    fds_end: int = 0
    fds_max: int = 0
    tasks_start: int = 0
    tasks_end: int = 0
    tasks_max: int = 0
    largest_scrape_gap_s: float = 0.0
    largest_clean_scrape_gap_s: float = 0.0
    """Largest gap between two scrapes of a server with no fault active (or recovering) on it."""
    bad_numbers: int = 0
    bad_examples: list[str] = field(default_factory=list)
    slowest_recovery_s: float = 0.0
    rss_by_minute_mb: list[float] = field(default_factory=list)
    python_heap_growth_mb_per_h: float | None = None
    """With --tracemalloc: growth of the memory Python objects hold (after the first 10 %), per hour.
    RSS growing while this stays flat points at the allocator (fragmentation), not at a leak."""
    python_heap_top_growth: list[str] = field(default_factory=list)
    python_heap_top_growth_second_half: list[str] = field(default_factory=list)
    """With --tracemalloc: what grew from the middle of the run to its end (after every cap is reached)."""
    pane_cap_chars: int | None = None
    """--pane-cap: the answer panes kept at most this much text (and a line a 100 characters)."""
    kept_at_end: dict[str, int] = field(default_factory=dict)
    """What the bounded buffers held at the end: the panes' text and lines, the scrape history."""
    malloc_in_use_growth_mb_per_h: float | None = None
    """glibc heap in use (all arenas, mmapped blocks included), growth per hour after the first 10 %."""
    malloc_free_kept_growth_mb_per_h: float | None = None
    """glibc heap free but not returned to the system, growth per hour after the first 10 %."""
    malloc_end_mb: list[float] = field(default_factory=list)
    """[in use, free but kept] at the end."""
    pymalloc_arenas_growth_mb_per_h: float | None = None
    """pymalloc's arenas held (1 MiB each), growth per hour after the first 10 % (sampled each minute)."""
    pymalloc_blocks_growth_mb_per_h: float | None = None
    """Bytes in pymalloc's allocated blocks (the small objects alive), growth per hour likewise."""
    pymalloc_end_mb: list[float] = field(default_factory=list)
    """[arenas held, allocated blocks] at the end."""


def _bad_numbers(obj: Any, path: str = "") -> list[str]:
    """Fields of a view (recursively) that are NaN, infinite or negative."""
    found: list[str] = []
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return found
    if isinstance(obj, (int, float)):
        if not math.isfinite(obj) or obj < 0:
            found.append(f"{path}={obj!r}")
        return found
    if isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            found += _bad_numbers(item, f"{path}[{i}]")
        return found
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            found += _bad_numbers(getattr(obj, f.name), f"{path}.{f.name}" if path else f.name)
    return found


class Soak:
    def __init__(self, minutes: float, seed: int, speed: float, trace: bool = False) -> None:
        self.minutes = minutes
        self.trace = trace
        self.heap: list[tuple[float, int]] = []
        self.heap_first: Any = None
        self.heap_middle: Any = None
        self.rng = random.Random(seed)
        self.sims = [Sim("A", ["--no-spec"], speed), Sim("B", [], speed)]
        self.fig = Figures(minutes=minutes)
        self.fault_until = [0.0, 0.0]  # monotonic time until which a fault (and its recovery) runs
        self.rss: list[tuple[float, int]] = []
        self.malloc_used: list[tuple[float, int]] = []
        self.arenas: list[tuple[float, int]] = []
        self.blocks: list[tuple[float, int]] = []
        self.malloc_free: list[tuple[float, int]] = []
        self.last_scrape: list[float | None] = [None, None]
        self.log: list[str] = []

    def say(self, text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        self.log.append(line)
        print(line, flush=True)

    async def run(self) -> Figures:
        for sim in self.sims:
            sim.start()
        try:
            await asyncio.gather(*(sim.wait_up() for sim in self.sims))
            servers = [
                ServerSpec(label="MTP off", url=self.sims[0].url),
                ServerSpec(label="MTP on", url=self.sims[1].url),
            ]
            config = AppConfig(servers=servers, display=DisplaySettings(max_tokens=256), mode="ab")
            app = make_app(dataclasses.replace(config, schedule="race"))
            try:
                async with app.run_test(size=(160, 48)) as pilot:
                    await self._drive(app, pilot)
            except Exception as exc:  # the app itself failed: that is a crash
                self.fig.crashes += 1
                self.fig.crash_details.append(f"{type(exc).__name__}: {exc}")
        finally:
            for sim in self.sims:
                sim.stop()
        return self.fig

    async def _drive(self, app: MtpWatchApp, pilot: Any) -> None:
        monitor = monitor_of(app.screen)
        t0 = time.monotonic()
        end = t0 + self.minutes * 60
        await asyncio.sleep(2.0)
        self.fig.rss_start_mb = rss_bytes() / 2**20
        self.fig.fds_start = open_fds()
        self.fig.tasks_start = len(asyncio.all_tasks())
        watchers = [asyncio.create_task(self._watch_scrapes(app, i, end)) for i in range(2)] + [
            asyncio.create_task(self._watch_views(app, end)),
            asyncio.create_task(self._prompts(app, end)),
        ]
        next_fault = time.monotonic() + self.rng.uniform(10, 30)
        faults: list[asyncio.Task[None]] = []
        last_sample = 0.0
        while time.monotonic() < end:
            now = time.monotonic()
            if not app.is_running:
                self.fig.crashes += 1
                self.fig.crash_details.append("the app stopped running")
                break
            if now - last_sample >= 10.0:
                last_sample = now
                self.rss.append((now - t0, rss_bytes()))
                if len(self.rss) % 6 == 1:
                    arenas = pymalloc_bytes()
                    if arenas is not None:
                        self.arenas.append((now - t0, arenas[0]))
                        self.blocks.append((now - t0, arenas[1]))
                heap = malloc_bytes()
                if heap is not None:
                    self.malloc_used.append((now - t0, heap[0]))
                    self.malloc_free.append((now - t0, heap[1]))
                if self.trace:
                    self._trace_sample(now - t0)
                fds, tasks = open_fds(), len(asyncio.all_tasks())
                self.fig.fds_max = max(self.fig.fds_max, fds)
                self.fig.tasks_max = max(self.fig.tasks_max, tasks)
                if len(self.rss) % 30 == 1:
                    self.say(
                        f"t={now - t0:5.0f}s rss={self.rss[-1][1] / 2**20:.1f} MB fds={fds} tasks={tasks} "
                        f"faults={self.fig.faults_survived}/{self.fig.faults_injected} "
                        f"prompts={self.fig.prompts_completed}"
                    )
            if now >= next_fault and now < end - 45:
                index = self.rng.randrange(2)
                if self.fault_until[index] <= now:
                    kind = self.rng.choice(FAULTS)
                    faults.append(asyncio.create_task(self._fault(app, index, kind)))
                next_fault = now + self.rng.uniform(10, 30)
            await asyncio.sleep(0.5)
        for task in faults:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for task in watchers:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        monitor.cancel_generation()
        await pilot.pause(1.0)
        import gc

        gc.collect()
        self.fig.rss_end_mb = rss_bytes() / 2**20
        self.fig.fds_end = open_fds()
        self.fig.tasks_end = len(asyncio.all_tasks())
        self.fig.rss_growth_mb_per_h = self._slope_mb_per_h(self.rss)
        if self.arenas:
            self.fig.pymalloc_arenas_growth_mb_per_h = self._slope_mb_per_h(self.arenas)
            self.fig.pymalloc_blocks_growth_mb_per_h = self._slope_mb_per_h(self.blocks)
            self.fig.pymalloc_end_mb = [
                round(self.arenas[-1][1] / 2**20, 1),
                round(self.blocks[-1][1] / 2**20, 1),
            ]
        if self.malloc_used:
            self.fig.malloc_in_use_growth_mb_per_h = self._slope_mb_per_h(self.malloc_used)
            self.fig.malloc_free_kept_growth_mb_per_h = self._slope_mb_per_h(self.malloc_free)
            self.fig.malloc_end_mb = [
                round(self.malloc_used[-1][1] / 2**20, 1),
                round(self.malloc_free[-1][1] / 2**20, 1),
            ]
        if self.trace:
            self._trace_report()
        self.fig.rss_by_minute_mb = [round(r / 2**20, 1) for i, (_, r) in enumerate(self.rss) if i % 6 == 0]
        self.fig.worker_errors = sum(1 for w in app.workers if w.state.name == "ERROR")
        for panel, feed in zip(monitor.panels, server_feeds(monitor), strict=True):
            name = feed.spec.label
            self.fig.kept_at_end[f"{name}: pane characters"] = panel.stream._raw_chars
            self.fig.kept_at_end[f"{name}: pane lines"] = len(panel.stream.lines)
            self.fig.kept_at_end[f"{name}: scrapes kept"] = len(feed.watch.collector)
        await pilot.press("ctrl+q")

    def _trace_sample(self, t: float) -> None:
        import tracemalloc

        self.heap.append((t, tracemalloc.get_traced_memory()[0]))
        if self.heap_first is None and t >= self.minutes * 60 * 0.1:
            self.heap_first = tracemalloc.take_snapshot()
        if self.heap_middle is None and t >= self.minutes * 60 * 0.5:
            self.heap_middle = tracemalloc.take_snapshot()

    def _trace_report(self) -> None:
        import tracemalloc

        self.fig.python_heap_growth_mb_per_h = self._slope_mb_per_h(self.heap)
        end = tracemalloc.take_snapshot()
        if self.heap_first is not None:
            stats = end.compare_to(self.heap_first, "lineno")
            self.fig.python_heap_top_growth = [str(st) for st in stats[:8]]
        if self.heap_middle is not None:
            stats = end.compare_to(self.heap_middle, "lineno")
            self.fig.python_heap_top_growth_second_half = [str(st) for st in stats[:8]]

    def _slope_mb_per_h(self, samples: list[tuple[float, int]]) -> float:
        pts = samples[len(samples) // 10 :]
        if len(pts) < 3:
            return float("nan")
        n = len(pts)
        mx = sum(t for t, _ in pts) / n
        my = sum(r for _, r in pts) / n
        sxx = sum((t - mx) ** 2 for t, _ in pts)
        sxy = sum((t - mx) * (r - my) for t, r in pts)
        return sxy / sxx * 3600 / 2**20 if sxx else float("nan")

    async def _watch_scrapes(self, app: MtpWatchApp, index: int, end: float) -> None:
        feed = server_feeds(app.screen)[index]
        prev_t: float | None = None
        prev_seen: float | None = None
        restarts = 0
        while time.monotonic() < end:
            t = feed.watch.collector.latest_t
            if t is not None and t != prev_t:
                now = time.monotonic()
                if prev_seen is not None:
                    gap = now - prev_seen
                    self.fig.largest_scrape_gap_s = max(self.fig.largest_scrape_gap_s, gap)
                    if self.fault_until[index] < prev_seen:
                        self.fig.largest_clean_scrape_gap_s = max(self.fig.largest_clean_scrape_gap_s, gap)
                prev_t, prev_seen = t, now
                self.last_scrape[index] = now
            if feed.watch.collector.restarts != restarts:
                self.fig.restarts_detected += feed.watch.collector.restarts - restarts
                restarts = feed.watch.collector.restarts
            await asyncio.sleep(0.05)

    async def _watch_views(self, app: MtpWatchApp, end: float) -> None:
        while time.monotonic() < end:
            for feed in server_feeds(app.screen):
                for window in ("10 s", "60 s", "prompt"):
                    bad = _bad_numbers(feed.view(window))
                    if bad:
                        self.fig.bad_numbers += len(bad)
                        if len(self.fig.bad_examples) < 10:
                            self.fig.bad_examples.append(f"{feed.spec.label} {window}: {', '.join(bad[:3])}")
            await asyncio.sleep(1.0)

    async def _prompts(self, app: MtpWatchApp, end: float) -> None:
        monitor = monitor_of(app.screen)
        prompts = ["Write a long story about a lighthouse keeper.", "Explain speculative decoding in detail."]
        i = 0
        while time.monotonic() < end - 5:
            if not monitor.generating and not monitor.ab.measuring:
                before = [p.prompt_count for p in monitor.panels]
                monitor.send(prompts[i % len(prompts)])
                i += 1
                started = time.monotonic()
                while monitor.generating and time.monotonic() < end:
                    if time.monotonic() - started > 180:
                        self.say("a prompt ran for 180 s: cancelled")
                        monitor.cancel_generation()
                        break
                    await asyncio.sleep(0.2)
                after = [p.prompt_count for p in monitor.panels]
                if after != before:
                    self.fig.prompts_completed += 1
                    if any(p.last_summary is not None and p.last_summary.error for p in monitor.panels):
                        self.fig.prompts_with_error += 1
            await asyncio.sleep(0.3)

    async def _fault(self, app: MtpWatchApp, index: int, kind: str) -> None:
        sim = self.sims[index]
        duration = self.rng.uniform(3.0, 8.0)
        self.fault_until[index] = time.monotonic() + duration + RECOVERY_LIMIT_S
        self.fig.faults_injected += 1
        counts = self.fig.faults_by_kind.setdefault(kind, [0, 0])
        counts[0] += 1
        try:
            if kind == "metrics_500":
                await sim_fault(sim.url, {"metrics_500": True})
            elif kind == "metrics_slow":
                await sim_fault(sim.url, {"metrics_delay_s": 1.0})
            elif kind in ("metrics_truncate", "metrics_no_spec", "hang"):
                await sim_fault(sim.url, {kind: True})
            elif kind == "cut_stream":
                body = {"cut_stream_after": self.rng.randint(3, 40), "cut_mid_chunk": self.rng.random() < 0.5}
                await sim_fault(sim.url, body)
            elif kind == "restart":
                await sim_fault(sim.url, {"restart": True})
            elif kind == "sigkill":
                sim.signal(signal.SIGKILL)
                assert sim.proc is not None
                sim.proc.wait(timeout=10)
            elif kind == "sigstop":
                sim.signal(signal.SIGSTOP)
            await asyncio.sleep(duration)
            if kind == "sigkill":
                sim.start()
                await sim.wait_up()
            elif kind == "sigstop":
                sim.signal(signal.SIGCONT)
            elif kind != "restart":
                await sim_fault(sim.url, {"clear": True})
        except Exception as exc:
            # the control request timed out (a loaded machine): not a fault the app met
            self.say(f"fault {kind} on {sim.name}: the injection itself failed: {exc!r}")
            self.fig.faults_injected -= 1
            self.fig.injections_failed += 1
            counts[0] -= 1
            with contextlib.suppress(Exception):
                sim.signal(signal.SIGCONT)
                await sim_fault(sim.url, {"clear": True})
            self.fault_until[index] = time.monotonic()
            return
        ended = time.monotonic()
        feed = server_feeds(app.screen)[index]
        while time.monotonic() - ended < RECOVERY_LIMIT_S:
            seen = self.last_scrape[index]
            if app.is_running and feed.watch.status == "up" and seen is not None and seen > ended:
                counts[1] += 1
                self.fig.faults_survived += 1
                self.fig.slowest_recovery_s = max(self.fig.slowest_recovery_s, seen - ended)
                self.fault_until[index] = seen
                return
            await asyncio.sleep(0.1)
        reason = feed.watch.reason
        self.say(f"fault {kind} on {sim.name}: no recovery within {RECOVERY_LIMIT_S:.0f} s ({reason})")
        self.fault_until[index] = time.monotonic()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--speed", type=float, default=1.0, help="simulator speed (1 = the preset's real rate)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="also measure the Python heap (slower; tells leaks from fragmentation)",
    )
    parser.add_argument(
        "--pane-cap",
        type=int,
        default=None,
        metavar="CHARS",
        help="keep at most CHARS characters (and CHARS/100 lines) an answer pane, so the caps are "
        "reached early and what still grows is not the panes' text",
    )
    args = parser.parse_args()
    if args.pane_cap is not None:
        TokenStream.MAX_RAW_CHARS = args.pane_cap
        TokenStream.MAX_LINES = max(100, args.pane_cap // 100)
    if args.tracemalloc:
        import tracemalloc

        tracemalloc.start(1)
    soak = Soak(args.minutes, args.seed, args.speed, trace=args.tracemalloc)
    soak.fig.pane_cap_chars = args.pane_cap
    fig = asyncio.run(soak.run())
    doc = dataclasses.asdict(fig)
    print(json.dumps(doc, indent=2))
    print(
        f"soak {fig.minutes:g} min: faults survived {fig.faults_survived}/{fig.faults_injected} "
        f"({fig.injections_failed} could not be switched on), "
        f"crashes {fig.crashes}, worker errors {fig.worker_errors}, "
        f"RSS {fig.rss_start_mb:.1f} -> {fig.rss_end_mb:.1f} MB ({fig.rss_growth_mb_per_h:+.2f} MB/h), "
        f"fds {fig.fds_start} -> {fig.fds_end} (max {fig.fds_max}), "
        f"tasks {fig.tasks_start} -> {fig.tasks_end} (max {fig.tasks_max}), "
        f"largest scrape gap {fig.largest_scrape_gap_s:.2f} s "
        f"(clean {fig.largest_clean_scrape_gap_s:.2f} s), "
        f"negative/NaN numbers {fig.bad_numbers}, prompts {fig.prompts_completed}"
        + (
            f", Python heap {fig.python_heap_growth_mb_per_h:+.2f} MB/h"
            if fig.python_heap_growth_mb_per_h is not None
            else ""
        )
    )
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0 if fig.crashes == 0 and fig.worker_errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
