"""A recording of the simulator made by the app itself (--record), and every view the app computed
while it recorded: the ground truth of the replay tests. Made once per test session."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.sim.server import SimThread
from mtpwatch.ui.app import make_app
from mtpwatch.ui.feed import ServerFeed
from mtpwatch.ui.screens.monitor import SAMPLE_PROMPT
from mtpwatch.ui.view import ServerView
from tests.ui.conftest import _wait_until

KEY = "sk-test-0123456789abcdef-never-in-a-recording"
PROMPTS = (SAMPLE_PROMPT, "Write a haiku about bandwidth.")


@dataclass
class Recorded:
    path: Path
    seen: list[tuple[float, int, str, ServerView]] = field(default_factory=list)
    """(time, server, window, view) of every view the live app computed."""


def _capture(feed: ServerFeed, index: int, seen: list[tuple[float, int, str, ServerView]]) -> None:
    live_view = feed.view
    clock = feed.clock

    def view(window: str) -> ServerView:
        # The view reads the clock (its window ends now): pin it, so the time kept is the one used.
        t = clock()
        feed.clock = lambda: t
        try:
            result = live_view(window)
        finally:
            feed.clock = clock
        seen.append((t, index, window, result))
        return result

    feed.view = view  # type: ignore[method-assign]


async def record_ab(path: Path) -> Recorded:
    """Two simulators (MTP off/on, keyed), two prompts, all three windows, then Ctrl+Q."""
    out = Recorded(path)
    with (
        SimThread(preset="gemma4-e4b-gb10", spec=False, speed=8, api_key=KEY) as url_a,
        SimThread(preset="gemma4-e4b-gb10", spec=True, speed=8, api_key=KEY) as url_b,
    ):
        config = AppConfig(
            servers=[
                ServerSpec(label="A · MTP off", url=url_a, api_key=KEY),
                ServerSpec(label="B · MTP on", url=url_b, api_key=KEY),
            ],
            # The user's --spec-method (as `demo` passes it): /sim/info may time out on a busy machine.
            display=DisplaySettings(max_tokens=48, spec_method="mtp"),
            mode="ab",
            title="record test",
            record=str(path),
        )
        app = make_app(config)
        async with app.run_test(size=(160, 48)) as pilot:
            screen = app.monitor
            for i, feed in enumerate(screen.feeds):
                _capture(feed, i, out.seen)
            await _wait_until(pilot, lambda: all(f.status == "up" and f.identified for f in screen.feeds))
            for prompt in PROMPTS:
                done = [p.prompt_count for p in screen.panels]
                screen.send(prompt)
                await _wait_until(
                    pilot,
                    lambda done=done: (
                        not screen.generating
                        and all(p.prompt_count > d for p, d in zip(screen.panels, done, strict=True))
                    ),
                    limit_s=60,
                )
            screen.cycle_window()  # 60 s
            screen.cycle_window()  # this prompt
            n = len(out.seen)
            await _wait_until(pilot, lambda: len(out.seen) > n + 4)
            await pilot.press("ctrl+q")
    return out


def make_recording(path: Path) -> Recorded:
    return asyncio.run(record_ab(path))
