"""What watching costs vLLM's API server: its CPU per second with `mtpwatch attach` on a pty, and without.

Four states, each measured over W-second windows: idle and nobody watching, idle with the real app
attached (`mtpwatch attach URL` at 160×48 on a pseudo-terminal, its default interval unless
`--interval`), streaming (this benchmark sends one completion after another, `ignore_eos`, fixed
length) and nobody watching, streaming with the app attached. Each round measures the idle pair and
the streaming pair, in alternating order (AB, then BA: a drift adds to either side in half the rounds).
The app is started before its window (first frame, then `--warmup` seconds: identification and the
filter probe, whose full page is a one-off) and quit after it.

CPU is utime+stime from /proc/<pid>/stat: the API server (the process that answers HTTP: with vLLM
0.32's one API server, the `vllm serve` process listening on the port, or `--pid`) and, reported
apart, its child processes (the EngineCore, which does not answer /metrics). Prints JSON: ms of CPU
per second per state and round, the added ms/s (attached − not) per round and their median, the
targets (≤ 6 ms/s idle, ≤ 10 ms/s streaming at the default interval), the load average, and how the
server answers a filtered scrape (`mtpwatch snapshot --json`'s `scrape`). `--full-page` adds the same
two pairs with the app reading the whole page (tty_probe.py's MTPWATCH_PROBE_FULL_PAGE), for scale.

On a 2-core machine pin the server to one core and this benchmark (and so the app and the load
client) to the other:

    taskset -c 0 .venv/bin/mtpwatch start MODEL --method ngram -k 4 --headless --port 8000 &
    .venv/bin/python tests/bench/server_cpu.py --url http://127.0.0.1:8000 --cpus 1 --rounds 3
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
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perturbation import PROMPT, _cpu_s, _listener_pid, _tree  # the server's processes and their CPU time
from watch_cost import Tty  # the app on a pty, as SSH carries it

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest

TARGETS_MS_PER_S = {"idle": 6.0, "streaming": 10.0}
"""Issue 18: API-server CPU an attached app may add at the default interval."""


class Load:
    """One streamed completion after another from a thread of this process, until `stop()`."""

    def __init__(self, url: str, model: str | None, max_tokens: int) -> None:
        self.url, self.model, self.max_tokens = url, model, max_tokens
        self.completions = 0
        self.error: str | None = None
        self._stop = threading.Event()
        self._running = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._loop()), daemon=True)
        self._thread.start()
        if not self._running.wait(timeout=120):
            raise SystemExit("server_cpu: the first completion did not start streaming in 120 s")

    async def _loop(self) -> None:
        request = GenerationRequest(PROMPT, model=self.model, max_tokens=self.max_tokens, ignore_eos=True)
        async with VllmClient(self.url) as client:
            while not self._stop.is_set():
                self._running.set()
                result = await client.generate(request)
                if result.error:
                    self.error = result.error
                    self._running.set()
                    return
                self.completions += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        if self.error:
            raise SystemExit(f"server_cpu: generation failed: {self.error}")


def _median(values: Iterable[float]) -> float:
    return round(statistics.median(values), 2)


def _window(server: int, children: list[int], seconds: float) -> dict[str, float]:
    c0, e0, t0 = _cpu_s([server]), _cpu_s(children), time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    return {
        "api_server_ms_per_s": round(1000 * (_cpu_s([server]) - c0) / wall, 2),
        "children_ms_per_s": round(1000 * (_cpu_s(children) - e0) / wall, 2),
    }


def _attached_window(
    url: str, server: int, children: list[int], args: argparse.Namespace, *, full_page: bool
) -> dict[str, float]:
    argv = ["attach", url]
    if args.interval is not None:
        argv += ["--interval", str(args.interval)]
    old = os.environ.get("MTPWATCH_PROBE_FULL_PAGE")
    os.environ["MTPWATCH_PROBE_FULL_PAGE"] = "1" if full_page else ""
    try:
        tty = Tty(argv, 160, 48, None, os.devnull)
    finally:
        os.environ["MTPWATCH_PROBE_FULL_PAGE"] = old or ""
    try:
        deadline = time.monotonic() + 60
        while tty.first_output is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if tty.first_output is None:
            raise SystemExit("server_cpu: the app drew nothing in 60 s")
        time.sleep(args.warmup)
        a0 = _cpu_s([tty.proc.pid])
        figures = _window(server, children, args.seconds)
        figures["app_cpu_percent"] = round(100 * (_cpu_s([tty.proc.pid]) - a0) / args.seconds, 2)
        if tty.proc.poll() is not None:
            raise SystemExit(f"server_cpu: the app exited ({tty.proc.returncode}) during its window")
    finally:
        tty.quit()
    return figures


def _scrape_mode(url: str) -> object:
    """How the server answers a filtered scrape, as `mtpwatch snapshot --json` says it."""
    out = subprocess.run(
        [sys.executable, "-m", "mtpwatch", "snapshot", url, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    with contextlib.suppress(ValueError):
        return json.loads(out.stdout).get("scrape")
    return {"error": (out.stderr or out.stdout).strip()[-300:]}


def measure(args: argparse.Namespace) -> dict[str, object]:
    url = args.url.rstrip("/")
    port = urlsplit(url).port or 80
    server = args.pid or _listener_pid(port)
    if server is None:
        raise SystemExit(f"server_cpu: no process found listening on port {port}")
    children = [p for p in _tree(server) if p != server]
    comms = sorted({Path(f"/proc/{p}/comm").read_text().strip() for p in children})
    load0 = os.getloadavg()
    watchers = ["filtered", "full_page"] if args.full_page else ["filtered"]
    rows: dict[str, list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for activity in ("idle", "streaming"):
            load = Load(url, args.model, args.max_tokens) if activity == "streaming" else None
            try:
                if load is not None:
                    time.sleep(2.0)  # the first completion decoding
                states = ["not_watched", *watchers]
                for state in states if r % 2 == 0 else states[::-1]:
                    key = f"{activity}/{state}"
                    if state == "not_watched":
                        figures = _window(server, children, args.seconds)
                    else:
                        full = state == "full_page"
                        figures = _attached_window(url, server, children, args, full_page=full)
                    figures["round"] = r
                    rows.setdefault(key, []).append(figures)
                    print(f"server_cpu: {key} {figures}", file=sys.stderr)
            finally:
                if load is not None:
                    load.stop()
    report: dict[str, object] = {
        "url": url,
        "api_server_pid": server,
        "children": comms,
        "cpus": sorted(os.sched_getaffinity(0)),
        "server_cpus": sorted(os.sched_getaffinity(server)),
        "seconds": args.seconds,
        "rounds": args.rounds,
        "interval_s": args.interval if args.interval is not None else "the app's default",
        "max_tokens": args.max_tokens,
        "scrape": _scrape_mode(url),
        "loadavg_start": [round(x, 2) for x in load0],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "states": {
            key: {
                "api_server_ms_per_s": [f["api_server_ms_per_s"] for f in figs],
                "api_server_ms_per_s_median": _median(f["api_server_ms_per_s"] for f in figs),
                "children_ms_per_s": [f["children_ms_per_s"] for f in figs],
                "app_cpu_percent": [f.get("app_cpu_percent") for f in figs],
            }
            for key, figs in rows.items()
        },
    }
    added: dict[str, object] = {}
    for activity in ("idle", "streaming"):
        base = rows[f"{activity}/not_watched"]
        for watcher in watchers:
            diffs = [
                round(w["api_server_ms_per_s"] - b["api_server_ms_per_s"], 2)
                for b, w in zip(base, rows[f"{activity}/{watcher}"], strict=True)
            ]
            median = _median(diffs)
            entry: dict[str, object] = {"per_round": diffs, "median": median}
            if watcher == "filtered":
                entry["target"] = TARGETS_MS_PER_S[activity]
                entry["meets_target"] = median <= TARGETS_MS_PER_S[activity]
            added[f"{activity}/{watcher}"] = entry
    report["added_api_server_ms_per_s"] = added
    return report


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="a live vLLM (one API server)")
    p.add_argument("--pid", type=int, default=None, help="the API server's pid (default: the listener)")
    p.add_argument("--model", default=None, help="served model name (default: the only one)")
    p.add_argument("--seconds", type=float, default=20.0, help="window length")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=float, default=5.0, help="first frame → the app's window, s")
    p.add_argument("--interval", type=float, default=None, help="the app's --interval (default: its own)")
    p.add_argument("--max-tokens", type=int, default=256, help="length of each streamed completion")
    p.add_argument("--full-page", action="store_true", help="also measure the app reading the whole page")
    p.add_argument("--cpus", default="", help="pin this benchmark, the app and the load client, e.g. 1")
    return p


def main() -> None:
    args = parser().parse_args()
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    print(json.dumps(measure(args), indent=2))


if __name__ == "__main__":
    main()
