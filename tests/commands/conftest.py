"""Fixtures shared by the command tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mtpwatch.sim.harness import SimThread


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[str, str]]:
    """Two simulated E4B servers on a GB10: MTP off (A) and on (B)."""
    with (
        SimThread(preset="gemma4-e4b-gb10", spec=False, speed=20) as a,
        SimThread(preset="gemma4-e4b-gb10", spec=True, speed=20) as b,
    ):
        yield a, b
