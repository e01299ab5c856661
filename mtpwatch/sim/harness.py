"""Simulators for tests: `running_sim(**options)` in the current event loop (async tests), `SimThread` in a
background thread with its own loop (sync tests). Both listen on 127.0.0.1, port 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

from mtpwatch.sim.options import make_options
from mtpwatch.sim.server import SimServer


@contextlib.asynccontextmanager
async def running_sim(**options: Any) -> AsyncIterator[str]:
    """Yields the base URL. Options are `SimOptions` fields (preset, spec, k, speed, ...) and `Faults`
    fields; log lines go nowhere unless ``log=<stream>`` is given."""
    log = options.pop("log", None)
    server = SimServer(make_options(**{"host": "127.0.0.1", "port": 0, **options}), log=log)
    url = await server.start()
    try:
        yield url
    finally:
        await server.stop()


class SimThread:
    """``with SimThread(preset="gemma4-e4b-gb10", speed=20) as url: ...`` (options: `running_sim`)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.url = ""

    def __enter__(self) -> str:
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._amain(),), name="mtpwatch-sim", daemon=True
        )
        self._thread.start()
        if not self._started.wait(timeout=60):
            raise RuntimeError("simulator did not start within 60 s")
        if self._error is not None:
            raise RuntimeError(f"simulator failed to start: {self._error}") from self._error
        return self.url

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=30)

    async def _amain(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            async with running_sim(**self._options) as self.url:
                self._started.set()
                await self._stop.wait()
        except BaseException as exc:  # reported to the caller's thread
            self._error = exc
            self._started.set()
