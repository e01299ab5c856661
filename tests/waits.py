"""Waiting in an app test: on a condition with a generous deadline, never for a fixed time.

The suite runs on developers' machines next to other work: a fixed pause that is long enough on an
idle machine is too short on a loaded one, and a count of frames or scrapes in a fixed time depends
on the machine's speed. Wait for what the test needs, and fail with what it waited for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from textual.pilot import Pilot

DEFAULT_LIMIT_S = 60.0  # generous: only a failing test waits this long


async def wait_for(
    pilot: Pilot[Any], predicate: Callable[[], Any], what: str, limit_s: float = DEFAULT_LIMIT_S
) -> None:
    """Re-check `predicate` after each short pause of the app; fail naming `what` after `limit_s`."""
    await until(predicate, what, limit_s, pause=lambda: pilot.pause(0.05))


async def until(
    predicate: Callable[[], Any],
    what: str,
    limit_s: float = DEFAULT_LIMIT_S,
    pause: Callable[[], Awaitable[Any]] = lambda: asyncio.sleep(0.02),
) -> None:
    """Re-check `predicate` after each `pause` (without an app: a short sleep of the running loop);
    fail naming `what` after `limit_s`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {limit_s:g} s waiting for {what}")
        await pause()
