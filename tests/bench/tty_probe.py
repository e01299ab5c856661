"""Runs `mtpwatch …` unchanged, plus a probe for token arrival → frame written latency (benchmarks only).

    python tests/bench/tty_probe.py attach http://127.0.0.1:8000   (MTPWATCH_PROBE_OUT=latency.json)

Each streamed chunk carries the client's socket-read time (`StreamEvent.t`, the app's monotonic
clock). The probe follows its text into the answer pane: when the pane's flush takes every
character up to that chunk's last one (a flush takes all that was fed), the chunk waits for the next
frame, which the flush itself may write (`frame_now`); the time of the next terminal write
(`LinuxDriver.write`, what goes to the pty) minus the read time is its latency. At exit the
latencies (s) are written as JSON to $MTPWATCH_PROBE_OUT. The console reads its stream at most
every 10 ms (`session.watch.LIVE_READ_INTERVAL_S`): a chunk that follows another within 10 ms can
wait up to that long in the kernel before its read, and that wait is not in the figure (at one MTP
server's ~15 bursts a second there is none; in the race, at ~1,000 chunks a second a pane, it is
5 ms on average, 10 ms at most).

MTPWATCH_PROBE_FULL_PAGE=1 makes the app read the whole `/metrics` page at every scrape, as before
filtered scraping (server_cpu.py's comparison): its servers' clients get no scrape filter.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from textual.drivers.linux_driver import LinuxDriver

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import StreamEvent
from mtpwatch.ui.widgets.token_stream import TokenStream

_batch: deque[float] = deque()
_fed: dict[int, int] = {}
_arrivals: dict[int, deque[tuple[float, int]]] = {}
_waiting: list[float] = []
_latencies: list[float] = []

_events = VllmClient._events
_feed = TokenStream.feed
_flush = TokenStream.flush
_write = LinuxDriver.write


async def events(self: VllmClient, *args: Any, **kwargs: Any) -> AsyncGenerator[list[StreamEvent], None]:
    async with aclosing(_events(self, *args, **kwargs)) as batches:
        async for batch in batches:
            # The client hands this batch to on_event (→ the pane's feed) before it reads again.
            _batch.clear()
            _batch.extend(e.t for e in batch if e.text)
            yield batch


def feed(self: TokenStream, text: str) -> None:
    key = id(self)
    total = _fed.get(key, 0) + len(text)
    _fed[key] = total
    if _batch:
        _arrivals.setdefault(key, deque()).append((_batch.popleft(), total))
    _feed(self, text)


def flush(self: TokenStream, *, final: bool = True) -> None:
    # A flush takes every character fed so far, and its frame may be written before it returns
    # (`frame_now`): its chunks wait for the next write from now on.
    key = id(self)
    done = _fed.get(key, 0)
    queue = _arrivals.get(key)
    while queue and queue[0][1] <= done:
        _waiting.append(queue.popleft()[0])
    _flush(self, final=final)


def write(self: LinuxDriver, data: str) -> None:
    _write(self, data)
    if _waiting:
        now = time.monotonic()
        _latencies.extend(now - t for t in _waiting)
        _waiting.clear()


def _dump() -> None:
    path = os.environ.get("MTPWATCH_PROBE_OUT")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(_latencies, fh)


VllmClient._events = events  # type: ignore[method-assign]
TokenStream.feed = feed  # type: ignore[method-assign]
TokenStream.flush = flush  # type: ignore[method-assign]
LinuxDriver.write = write  # type: ignore[method-assign]
atexit.register(_dump)
if os.environ.get("MTPWATCH_PROBE_FULL_PAGE"):
    import mtpwatch.session.watch

    mtpwatch.session.watch.ScrapeFilter = lambda: None  # type: ignore[assignment,misc,attr-defined]

if __name__ == "__main__":
    from mtpwatch.cli import main

    sys.exit(main(sys.argv[1:]))
