"""A browser for `textual serve`: it loads the page, opens the websocket the app is served through,
reads the frames until the self-running demo shows its numbers, then closes the page.

Shared by the README's browser line (tests/readme/test_readme_commands.py) and
tests/ui/test_textual_serve.py.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import aiohttp


def children_of(pid: int) -> set[int]:
    """Every process below `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().split(")")[-1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - out
        out |= frontier
    return out


def wait_listening(port: int, timeout: float = 120) -> None:
    """Until something accepts on 127.0.0.1:`port` (the web server's start is slow on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on 127.0.0.1:{port}"
            time.sleep(0.1)


async def _browse(port: int, server_pid: int) -> tuple[bytes, set[int]]:
    seen = b""
    started: set[int] = set()
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/") as response:
            assert response.status == 200 and "textual" in (await response.text()).lower()
        async with session.ws_connect(f"http://127.0.0.1:{port}/ws?width=80&height=24") as ws:
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                try:
                    msg = await asyncio.wait_for(ws.receive(), 1.0)
                except TimeoutError:
                    continue
                if msg.type == aiohttp.WSMsgType.BINARY:
                    seen += msg.data
                elif msg.type != aiohttp.WSMsgType.TEXT:
                    break
                started |= children_of(server_pid)
                if b"self-running" in seen and b"\xe2\x96\xb6" in seen and b"tok/s" in seen:
                    break  # ▶: the loop has sent its first prompt
    return seen, started


def browse_demo(port: int, server_pid: int) -> None:
    """Open the page of the `textual serve` (process `server_pid`) on `port`, see the self-running
    demo (the app and its two simulators started below the server), close the page and see every
    process it started stop."""
    wait_listening(port)
    seen, started = asyncio.run(_browse(port, server_pid))
    assert b"self-running" in seen and b"tok/s" in seen and b"MTP k=" in seen, seen[-2000:]
    assert len(started) >= 3, started  # the app and its two simulators
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and children_of(server_pid) & started:
        time.sleep(0.2)
    assert not (children_of(server_pid) & started), "closing the page must stop the demo"


def clean_exit(output: str) -> None:
    """What `textual serve` printed (the app's stderr included) holds no traceback."""
    needles = ("Traceback", "Event loop is closed", "that handles pid", "Application failed to start")
    for needle in needles:
        assert needle not in output, output[-3000:]
