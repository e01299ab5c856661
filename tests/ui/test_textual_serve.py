"""`textual serve "mtpwatch demo --loop"` (README): the demo in a browser on loopback.

The test is the browser: it loads the page, opens the websocket textual-serve serves the app
through, and reads the frames until the self-running demo shows its numbers; closing the socket
must stop the app and its two simulators.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from mtpwatch.commands.options import free_port


def _children_of(pid: int) -> set[int]:
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


async def _browse(port: int, server: subprocess.Popen[bytes]) -> tuple[bytes, set[int]]:
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
                started |= _children_of(server.pid)
                if b"self-running" in seen and b"\xe2\x96\xb6" in seen and b"tok/s" in seen:
                    break  # ▶: the loop has sent its first prompt
    return seen, started


def test_textual_serve_runs_the_self_running_demo_and_stops_it() -> None:
    textual = shutil.which("textual", path=os.path.dirname(sys.executable))
    assert textual is not None, "textual-dev is a dev dependency (pyproject)"
    mtpwatch = os.path.join(os.path.dirname(sys.executable), "mtpwatch")
    port = free_port()
    server = subprocess.Popen(
        [textual, "serve", "-c", "--host", "127.0.0.1", "--port", str(port), f"{mtpwatch} demo --loop"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120  # the web server is up (its start takes long on a loaded machine)
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.1)
        seen, started = asyncio.run(_browse(port, server))
        assert b"self-running" in seen and b"tok/s" in seen and b"MTP k=" in seen
        assert len(started) >= 3  # the app and its two simulators
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _children_of(server.pid) & started:
            time.sleep(0.2)
        assert not (_children_of(server.pid) & started), "closing the page must stop the demo"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
