"""A fleet read through a metrics store: `mtpwatch attach --prometheus URL` over a generated fleet of 100
and 1,000 vLLM instances in Debian's Prometheus (or VictoriaMetrics), one refresh every 5 s.

    python tests/bench/fleet_store.py [--sizes 100,1000] [--span 1800] [--seconds 30] [--store prometheus]

For each size: tests/real_prometheus/fleetgen.py writes the fleet (`--span` seconds at 15 s, seven
injected faults, data ending just after the load so it reads live), the store loads it (promtool
tsdb create-blocks-from openmetrics / VictoriaMetrics's /api/v1/import/prometheus; the store's CPU
is not counted), then `mtpwatch attach --prometheus URL` runs in a pseudo-terminal of 160×48 as a
user runs it, and the bench reports:

- first view: seconds from launch until the terminal shows the group table's header;
- app CPU: the app process's CPU time (user + system, /proc) over `--seconds` after the first view,
  in % of one core;
- RSS: the app's peak resident memory (VmHWM) at the end;
- query time per refresh: `PrometheusSource.read` (the app's refresh: its queries, parsing, rows,
  outliers) timed in this process, median and max of 6 refreshes, with the queries, series and
  bytes of one refresh.

Targets (issue 41): at 1,000 instances, app ≤ 5 % of a core, first view ≤ 3 s, RSS ≤ 150 MB.
Prints one JSON document.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import pty
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mtpwatch.commands.options import free_port  # noqa: E402
from mtpwatch.core.sources.prometheus import PrometheusSource  # noqa: E402
from tests.real_prometheus import fleetgen  # noqa: E402

HEADER = "group (model"


def binary(kind: str) -> str:
    script = "setup_prometheus.sh" if kind == "prometheus" else "setup_victoria.sh"
    out = subprocess.run(
        ["bash", str(ROOT / "tests/real_prometheus" / script)], capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1].split("=", 1)[1]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_app(url: str, seconds: float) -> dict[str, float]:
    """attach --prometheus in a 160×48 pseudo-terminal: first view, CPU after it, peak RSS."""
    import fcntl
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "48"}
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtpwatch", "attach", "--prometheus", url],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    seen = b""

    def pump(limit: float) -> None:
        nonlocal seen
        ready, _, _ = select.select([master], [], [], limit)
        if ready:
            with contextlib.suppress(OSError):
                seen = (seen + os.read(master, 1 << 16))[-200_000:]

    try:
        while HEADER.encode() not in seen:
            if time.monotonic() - t0 > 120 or proc.poll() is not None:
                raise SystemExit(f"no group table within 120 s:\n{seen[-2000:]!r}")
            pump(0.05)
        first = time.monotonic() - t0
        c0, w0 = cpu_s(proc.pid), time.monotonic()
        while time.monotonic() - w0 < seconds:
            pump(0.2)
        cpu = (cpu_s(proc.pid) - c0) / (time.monotonic() - w0) * 100
        rss = hwm_mb(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        os.close(master)
    return {"first_view_s": round(first, 2), "app_cpu_pct": round(cpu, 2), "rss_peak_mb": round(rss, 1)}


async def refresh_times(url: str, n: int = 6) -> dict[str, float]:
    source = PrometheusSource(url)
    times, last = [], None
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            last = await source.read(10.0)
            times.append(time.perf_counter() - t0)
    finally:
        await source.aclose()
    assert last is not None
    return {
        "refresh_median_s": round(statistics.median(times), 3),
        "refresh_max_s": round(max(times), 3),
        "refresh_queries": last.stats.queries,
        "refresh_series": last.stats.series,
        "refresh_kib": round(last.stats.bytes / 1024, 1),
        "rows": len(last.rows),
        "outliers": sum(1 for r in last.rows if r.outliers),
        "window_s": last.fit.window_s,
    }


def one_size(n: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        p = subprocess.Popen(argv, start_new_session=True, **kw)
        procs.append(p)
        return p

    lead = 30 + n * args.span / 1800 * 0.06  # seconds the load takes, about, on two busy cores
    fleet = fleetgen.make_fleet(n, args.span, lead_s=lead)
    t0 = time.monotonic()
    try:
        load = fleetgen.load_prometheus if args.store == "prometheus" else fleetgen.load_victoria
        url = load(start, binary(args.store), fleet, tmp, free_port())
        loaded = time.monotonic() - t0
        out: dict[str, Any] = {"instances": n, "span_s": args.span, "load_s": round(loaded, 1)}
        out.update(run_app(url, args.seconds))
        out.update(asyncio.run(refresh_times(url)))
        out["data_end_minus_now_s"] = round(fleet.end - time.time(), 1)
        return out
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sizes", default="100,1000")
    ap.add_argument("--span", type=int, default=1800)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--store", choices=("prometheus", "victoria"), default="prometheus")
    args = ap.parse_args()
    results = []
    for n in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(one_size(n, args, Path(tmp)))
            print(json.dumps(results[-1]), file=sys.stderr)
    print(json.dumps({"store": args.store, "refresh_every_s": 5.0, "sizes": results}, indent=2))


if __name__ == "__main__":
    main()
