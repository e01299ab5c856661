"""Shared helpers of the UI tests: an event-driven wait (no fixed sleeps), as the `wait_until` fixture."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import pytest
from textual.pilot import Pilot

from mtpwatch.ui.fastpaint.gate import gate
from tests.waits import DEFAULT_LIMIT_S, wait_for

if TYPE_CHECKING:
    from mtpwatch.ui.widgets.server_panel import ServerPanel

needs_fast_paint = pytest.mark.skipif(
    not gate().on, reason=f"holds the fast paint itself, which is off here ({gate().words()})"
)
"""For a test of the fast paint itself (rows narrowed, frames composed at once, plain rows): it
needs the fast paint on, so it skips on a Textual release the fast paint was not checked against
(tests/lowest_textual.sh runs the UI tests on the lowest release the pin allows)."""


class WaitUntil(Protocol):
    def __call__(
        self, pilot: Pilot[Any], predicate: Callable[[], bool], limit_s: float = ...
    ) -> Awaitable[None]: ...


async def _wait_until(
    pilot: Pilot[Any], predicate: Callable[[], bool], limit_s: float = DEFAULT_LIMIT_S
) -> None:
    """Re-check `predicate` after each short pause; fail with a clear message at the timeout."""
    await wait_for(pilot, predicate, "the condition", limit_s)


@pytest.fixture
def wait_until() -> WaitUntil:
    """`await wait_until(pilot, lambda: ..., limit_s=60)`."""
    return _wait_until


@pytest.fixture(scope="session")
def sim_recording(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`tests.ui.recorded.Recorded`: the app recorded two simulators once for the whole session."""
    from tests.ui.recorded import make_recording

    return make_recording(tmp_path_factory.mktemp("recording") / "session.mtpw.gz")


@pytest.fixture(scope="session")
def mid_stream_recording(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`tests.ui.recorded.Recorded`: a demo's end, quit while B streams a long answer."""
    from tests.ui.recorded import make_mid_stream_recording

    return make_mid_stream_recording(tmp_path_factory.mktemp("recording") / "mid-stream.mtpw.gz")


ROWS = {
    "header": ".panel-header",
    "verdict": ".verdict",
    "numbers": ".numbers",
    "bars": ".bars",
    "bandwidth": ".bandwidth",
}
"""A server panel's text rows (name: selector), as `panel_rows` returns them."""


def panel_rows(panel: ServerPanel) -> dict[str, str]:
    """The markup of the panel's rows now (header, verdict, numbers, bars, roofline), by row."""
    return {name: panel._shown.get(selector, "") for name, selector in ROWS.items()}
