"""`--load N`: the simulator keeps N requests in flight by itself; `--count N`: N servers, one process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import httpx

from mtpwatch.commands.options import free_port
from mtpwatch.core.metrics.snapshot import MetricsSnapshot, parse_snapshot
from mtpwatch.sim.harness import running_sim


async def test_background_load_moves_the_counters_without_a_client() -> None:
    async with running_sim(load=3, speed=10) as url, httpx.AsyncClient(timeout=10) as client:

        async def scrape_until(moved: Callable[[MetricsSnapshot], bool]) -> MetricsSnapshot:
            """Scrape until the counters moved (a condition, not a fixed sleep: later when loaded)."""
            deadline = asyncio.get_running_loop().time() + 60
            while True:
                snap = parse_snapshot((await client.get(url + "/metrics")).text)
                if moved(snap) or asyncio.get_running_loop().time() > deadline:
                    return snap
                await asyncio.sleep(0.1)

        first = await scrape_until(lambda s: s.generation_tokens > 0)
        second = await scrape_until(
            lambda s: s.generation_tokens > first.generation_tokens and s.drafts > first.drafts
        )
    # 3 in flight; a scrape between one request's end and the next one's start sees 2
    assert all(s.requests_running in (2.0, 3.0) for s in (first, second))
    assert second.generation_tokens > first.generation_tokens > 0
    assert second.drafts > first.drafts
    # every background token is counted like a client's: accepted drafts + one token per step
    assert second.accepted <= second.draft_tokens


def test_count_serves_independent_servers_from_one_process() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mtpwatch",
            "sim",
            "--port",
            "0",
            "--count",
            "3",
            "--load",
            "1",
            "--speed",
            "10",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        urls = [proc.stdout.readline().rsplit(" on ", 1)[1].strip() for _ in range(3)]
        assert len(set(urls)) == 3
        pages = [parse_snapshot(httpx.get(u + "/metrics", timeout=10).text) for u in urls]
        assert all(p.schema == "vllm" and p.num_speculative_tokens == 2 for p in pages)
        created = {p.created for p in pages}
        assert None not in created
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_count_past_the_last_port_is_one_error_line() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mtpwatch", "sim", "--port", "65534", "--count", "4"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 2 and "runs past port 65535" in out.stderr and "Traceback" not in out.stderr


def test_count_from_a_given_port_uses_consecutive_ports() -> None:
    for _ in range(3):
        base = free_port()
        if base > 65000:
            continue
        proc = subprocess.Popen(
            [sys.executable, "-m", "mtpwatch", "sim", "--count", "3", "--port", str(base), "--load", "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            urls = [proc.stdout.readline() for _ in range(3)]
            if not all(urls):  # a neighbouring port was taken: try another base
                continue
            ports = [int(u.strip().rsplit(":", 1)[1]) for u in urls]
            assert ports == [base, base + 1, base + 2]
            page = parse_snapshot(httpx.get(f"http://127.0.0.1:{base + 2}/metrics", timeout=10).text)
            assert page.schema == "vllm"
            return
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
    raise AssertionError("no free run of 3 ports found")
