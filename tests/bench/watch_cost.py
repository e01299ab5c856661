"""The cost of watching, through a real pty (what SSH carries): CPU, terminal bytes/s and token latency.

Each scenario runs the real `mtpwatch` command line (through `tty_probe.py`, which adds the latency
probe) on a pseudo-terminal of the given size against simulator subprocesses, and reads everything
it writes, as a terminal would. Figures over the measured window:

- cpu_percent: the app process's user+system CPU (/proc/PID/stat) over wall time, % of one core;
- bytes_per_s: bytes the app wrote to the terminal per second;
- tok_s: tokens the simulators generated per second (their own counters);
- latency_ms p50/p95: a chunk's socket read (client clock) → the terminal write of the frame that
  first holds it (see tty_probe.py).

The app runs at its default interval (2 Hz, the idle cadence on an idle server). Scenarios: `idle`
(attach, one idle server, measured from 6 s after start, while the chart's first minute still
fills), `idle-steady` (the same from 65 s on: what an idle monitor costs for hours), `one` (attach,
one E4B server at real speed, ~39 tok/s, prompts sent back to back), `race` (ab --schedule race,
two servers streaming ≈2,000 tok/s together), and the framework's floor on the same pty: `floor`
(floor_app.py: a pane growing 15 times a second beside 20 rows changed twice a second; no servers),
`floor-idle` (the rows only), `floor-static` and `floor-log` (the pane as a `Static` or a `Log`),
`floor-race` (the race's shape: two panes growing 25 times a second by ~40 words, each under 32
rows), `floor-cell` and `floor-cell-25` (the least a Textual app can show: one cell changing 15 or
25 times a second, alone). `--fps` passes the app's `--fps`. `--trees A,B` runs every scenario on
two source trees (e.g. an exported older commit and this one), alternating order round by round,
and prints paired ratios.

    .venv/bin/python tests/bench/watch_cost.py --scenarios idle,one,race --seconds 20 --rounds 2
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import urllib.request
from pathlib import Path

from mtpwatch.core.metrics.parse import parse_samples

HERE = Path(__file__).resolve().parent
PROMPT = b"Write a very long essay about memory bandwidth."
SEND = b"\x1b[200~" + PROMPT + b"\x1b[201~\r"
"""The prompt as a terminal pastes it (bracketed paste: one input event, not one per character, as
when a user pastes or recalls a prompt), then Enter."""
TICKS = os.sysconf("SC_CLK_TCK")


def start_sim(*extra: str) -> tuple[subprocess.Popen[str], str]:
    sim = subprocess.Popen(
        [sys.executable, "-m", "mtpwatch", "sim", "--port", "0", "--log-interval", "1000", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert sim.stdout is not None
    first = sim.stdout.readline()
    url = first.rsplit(" on ", 1)[-1].strip()
    if not url.startswith("http://"):
        sim.terminate()
        raise SystemExit(f"watch_cost: the simulator did not start: {first.strip()!r}")
    time.sleep(0.5)
    return sim, url


def counters(urls: list[str]) -> tuple[float, float]:
    """(Σ generation tokens, Σ running requests) from the simulators' /metrics."""
    generated = running = 0.0
    for url in urls:
        with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
        for s in parse_samples(text):
            if s.name == "vllm:generation_tokens_total":
                generated += s.value
            elif s.name == "vllm:num_requests_running":
                running += s.value
    return generated, running


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Tty:
    """The app on a pty: everything it writes is read (and counted) by a thread."""

    def __init__(
        self,
        argv: list[str],
        cols: int,
        rows: int,
        tree: str | None,
        probe_out: str,
        script: Path | None = None,
    ) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", MTPWATCH_PROBE_OUT=probe_out)
        if tree:
            env["PYTHONPATH"] = tree
        self.proc = subprocess.Popen(
            [sys.executable, str(script or HERE / "tty_probe.py"), *argv],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.master = master
        self.bytes = 0
        self.first_output: float | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            if self.first_output is None:
                self.first_output = time.monotonic()
            self.bytes += len(data)

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def quit(self) -> None:
        self.type(b"\x11")  # Ctrl+Q
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=15)
        self._thread.join(timeout=5)
        os.close(self.master)


FLOOR_ARGS = {
    "floor": [],
    "floor-idle": ["--idle"],
    "floor-log": ["--pane", "log"],
    "floor-static": ["--pane", "static"],
    "floor-race": ["--race"],
    "floor-cell": ["--cell", "15"],
    "floor-cell-25": ["--cell", "25"],
}
"""floor_app.py's arguments per floor scenario (the framework's floor: no servers)."""
WARMUP_S = {"idle": 6.0, "idle-steady": 65.0, "one": 6.0, "race": 6.0, **dict.fromkeys(FLOOR_ARGS, 3.0)}
"""Seconds from the first frame to the measured window (start-up, first scrapes, identification)."""


def run(
    scenario: str,
    urls: list[str],
    seconds: float,
    cols: int,
    rows: int,
    tree: str | None,
    fps: int | None = None,
) -> dict[str, float]:
    script = None
    if scenario.startswith("floor"):
        # The framework's floor (floor_app.py): the same shape, no servers; `tree` is not used.
        script, tree = HERE / "floor_app.py", None
        argv = list(FLOOR_ARGS[scenario])
    elif scenario == "race":
        argv = ["ab", urls[0], urls[1], "--schedule", "race", "--max-tokens", "4000"]
    else:
        argv = ["attach", urls[0], "--max-tokens", "4000"]
    if fps is not None and script is None:
        argv += ["--fps", str(fps)]
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        probe_out = fh.name
    tty = Tty(argv, cols, rows, tree, probe_out, script)
    try:
        deadline = time.monotonic() + 30
        while tty.first_output is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(WARMUP_S[scenario])
        streaming = scenario in ("one", "race")  # the floor app streams by itself
        prompts = 0

        def send() -> None:
            # One prompt, then wait until the servers run it: sending again while it is still
            # queued would paste into the box of a console that is busy.
            nonlocal prompts
            tty.type(SEND)
            prompts += 1
            until = time.monotonic() + 5.0
            while counters(urls)[1] == 0 and time.monotonic() < until:
                time.sleep(0.05)

        if streaming:
            send()
            time.sleep(2.0)
        gen0, _ = counters(urls)
        b0, c0, t0 = tty.bytes, cpu_seconds(tty.proc.pid), time.monotonic()
        prompts = 0
        while time.monotonic() - t0 < seconds:
            time.sleep(0.25)
            if streaming and counters(urls)[1] == 0:
                send()  # the answer ended: the next one, back to back
        wall = time.monotonic() - t0
        cpu = cpu_seconds(tty.proc.pid) - c0
        nbytes = tty.bytes - b0
        gen1, _ = counters(urls)
    finally:
        tty.quit()
    latencies = json.loads(Path(probe_out).read_text() or "[]") if Path(probe_out).stat().st_size else []
    os.unlink(probe_out)
    out = {
        "cpu_percent": round(100 * cpu / wall, 2),
        "bytes_per_s": round(nbytes / wall),
        "tok_s": round((gen1 - gen0) / wall, 1),
        "prompts": prompts,
    }
    if latencies:
        ms = sorted(1000 * x for x in latencies)
        out["latency_ms_p50"] = round(ms[len(ms) // 2], 1)
        out["latency_ms_p95"] = round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1)
        out["latency_chunks"] = len(ms)
    return out


SIMS: dict[str, list[tuple[str, ...]]] = {
    "idle": [("--preset", "gemma4-e4b-gb10")],
    "idle-steady": [("--preset", "gemma4-e4b-gb10")],
    "one": [("--preset", "gemma4-e4b-gb10")],
    "race": [("--preset", "gemma4-e4b-gb10", "--no-spec"), ("--preset", "gemma4-e4b-gb10")],
    **{key: [] for key in FLOOR_ARGS},
}


def measure(args: argparse.Namespace) -> dict[str, object]:
    trees: list[str | None] = [t or None for t in args.trees.split(",")] if args.trees else [None]
    results: dict[str, dict[str, list[dict[str, float]]]] = {}
    for scenario in args.scenarios.split(","):
        speed = args.race_speed if scenario == "race" else 1.0
        sims = [start_sim(*extra, "--speed", str(speed)) for extra in SIMS[scenario]]
        urls = [url for _, url in sims]
        runs: dict[str, list[dict[str, float]]] = {str(t): [] for t in trees}
        try:
            for r in range(args.rounds):
                for tree in trees if r % 2 == 0 else trees[::-1]:
                    figures = run(scenario, urls, args.seconds, args.cols, args.rows, tree, args.fps)
                    print(f"watch_cost: {scenario} tree={tree} round {r}: {figures}", file=sys.stderr)
                    runs[str(tree)].append(figures)
        finally:
            for sim, _ in sims:
                sim.terminate()
                sim.wait(timeout=30)
        results[scenario] = runs
    report: dict[str, object] = {"size": f"{args.cols}x{args.rows}", "seconds": args.seconds, "fps": args.fps}
    for scenario, runs in results.items():
        summary: dict[str, object] = {}
        for tree, figs in runs.items():
            summary[tree] = {
                k: round(statistics.median(f[k] for f in figs if k in f), 2)
                for k in figs[0]
                if any(k in f for f in figs)
            }
        if len(trees) == 2:
            a, b = (runs[str(t)] for t in trees)
            summary["paired_ratio_cpu_second_over_first"] = [
                round(y["cpu_percent"] / x["cpu_percent"], 3)
                for x, y in zip(a, b, strict=True)
                if x["cpu_percent"]
            ]
        report[scenario] = summary if len(trees) > 1 else summary[str(trees[0])]
    return report


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenarios", default="idle,one,race")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--cols", type=int, default=160)
    p.add_argument("--rows", type=int, default=48)
    p.add_argument("--race-speed", type=float, default=90.0, help="Simulator speed of the race scenario.")
    p.add_argument("--fps", type=int, default=None, help="The app's --fps (default: its own default).")
    p.add_argument(
        "--trees", default="", help="Two source trees to compare, comma-separated ('' = this one)."
    )
    return p


if __name__ == "__main__":
    print(json.dumps(measure(parser().parse_args()), indent=2))
