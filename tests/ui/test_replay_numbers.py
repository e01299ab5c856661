"""Replay numbers each pane's prompts as the recording does, whatever the seeks (issue 40, item 4a).

The panes' `#N` came from the panel's own counter, which every summary advanced, seek or not: after
← four times the panes showed #5 and then #6; after `p p n` A showed #3 and B #4, where live had shown
#2 in both. The number of a prompt is now the recording's count of that server's prompts done.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from textual.widgets import Static

from mtpwatch.session.replay import ReplaySource
from mtpwatch.ui.app import make_app
from mtpwatch.ui.screens.replay import ReplayScreen
from tests.ui.recorded import PROMPTS, Recorded

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil


def _done_by(source: ReplaySource, server: int) -> int:
    """Prompts the server had finished by the player's time, counted in the recording's records."""
    return sum(
        1
        for r in source.recording.records
        if r["kind"] == "done" and int(r["s"]) == server and float(r["t"]) <= source.now
    )


def _numbers_shown(screen: ReplayScreen) -> list[list[int]]:
    return [
        # a line's own number starts it (`#3 …`); `vllm#56101` in a note is not one
        [int(n) for n in re.findall(r"(?m)^\s*#(\d+)", str(panel.query_one(".summary", Static).render()))]
        for panel in screen.panels
    ]


def _check(screen: ReplayScreen, where: str) -> None:
    source = screen.source
    for server, panel in enumerate(screen.panels):
        expected = _done_by(source, server)
        assert panel.prompt_count == expected, (where, server, panel.prompt_count, expected)
        shown = _numbers_shown(screen)[server]
        # The summary lines that fit, newest at the bottom: the last is the recording's number.
        assert (shown[-1] if shown else 0) == expected, (where, server, shown, expected)
        assert shown == sorted(set(shown)), (where, server, shown)


async def test_seeks_keep_the_recorded_prompt_numbers(sim_recording: Recorded, wait_until: WaitUntil) -> None:
    source = ReplaySource.open(sim_recording.path)
    app = make_app(dataclasses.replace(source.config, speed=16.0), replay=source)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await pilot.press("space")  # pause: only the keys move the player
        while screen.playing:
            await pilot.press("space")
        while not source.at_end:  # → to the end, as a user would
            await pilot.press("right")
        _check(screen, "end")
        assert [p.prompt_count for p in screen.panels] == [len(PROMPTS)] * 2  # live ended at #2 in both
        for i in range(4):
            await pilot.press("left")
            _check(screen, f"left {i + 1}")
        for key in ("p", "p", "n", "n", "right", "p", "full_stop", "home", "n"):
            await pilot.press(key)
            _check(screen, key)
        await pilot.press("space")  # play on to the end
        await wait_until(pilot, lambda: source.at_end, limit_s=60)
        _check(screen, "played to the end")
        assert [p.prompt_count for p in screen.panels] == [len(PROMPTS)] * 2
        await pilot.press("ctrl+q")
