"""`within(seconds, awaitable)`: one deadline helper that runs the same on Python 3.10 and 3.11+.

On 3.11+ it is `asyncio.timeout` (no extra task); on 3.10, which lacks it, `asyncio.wait_for`, whose
`asyncio.TimeoutError` is re-raised as the builtin `TimeoutError` that 3.11+ raises, so callers
catch one exception either way."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(seconds: float, awaitable: Awaitable[T]) -> T:
    """Await `awaitable`; raise `TimeoutError` (and cancel it) when it takes more than `seconds`."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await awaitable
    try:
        return await asyncio.wait_for(awaitable, seconds)
    except asyncio.TimeoutError as exc:  # not the builtin TimeoutError before Python 3.11
        raise TimeoutError(f"no result within {seconds:g} s") from exc
