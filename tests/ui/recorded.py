"""A recording of the simulator made by the app itself (--record), every view the app computed and
every panel text it showed while it recorded: the ground truth of the replay tests. Made once per
test session."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.session.views import ServerView
from mtpwatch.session.watch import ServerFeed
from mtpwatch.sim.harness import SimThread
from mtpwatch.ui.app import make_app
from mtpwatch.ui.screens.monitor import SAMPLE_PROMPT, MonitorScreen
from mtpwatch.ui.widgets.server_panel import ServerPanel
from tests.feeds import monitor_of, opened_feeds
from tests.ui.conftest import _wait_until, panel_rows

KEY = "sk-test-0123456789abcdef-never-in-a-recording"
PROMPTS = (SAMPLE_PROMPT, "Write a haiku about bandwidth.")


@dataclass
class Recorded:
    path: Path
    seen: list[tuple[float, int, str, ServerView]] = field(default_factory=list)
    """(time, server, window, view) of every view the live app computed."""
    shown: list[tuple[float, int, str, dict[str, str]]] = field(default_factory=list)
    """(time, server, window, rows) each time the live app drew a view: the panel's row texts, at
    the time the view was built."""


def _capture(feed: ServerFeed, index: int, seen: list[tuple[float, int, str, ServerView]]) -> None:
    live_view = feed.view
    clock = feed.watch.clock

    def view(window: str) -> ServerView:
        # The view reads the clock (its window ends now): pin it, so the time kept is the one used.
        t = clock()
        feed.watch.clock = lambda: t
        try:
            result = live_view(window)
        finally:
            feed.watch.clock = clock
        seen.append((t, index, window, result))
        return result

    feed.view = view  # type: ignore[method-assign]


def _capture_panels(screen: MonitorScreen, out: Recorded) -> None:
    """Keep each panel's rows after every view it draws, with the time that view was built at."""
    for index, panel in enumerate(screen.panels):
        panel.watch_view = _drawn(index, panel, out)  # type: ignore[method-assign]


class _Draws(Protocol):
    """`ServerPanel.watch_view`'s shape, named parameter and all, so it can stand in for it."""

    def __call__(self, view: ServerView | None) -> None: ...


def _drawn(index: int, panel: ServerPanel, out: Recorded) -> _Draws:
    draw = panel.watch_view

    def drawn(view: ServerView | None) -> None:  # one parameter: Textual passes the new value
        draw(view)
        built = next((e for e in reversed(out.seen) if e[1] == index and e[3] is view), None)
        if built is not None:  # None: the panel's first view (before any scrape)
            t, _, window, _ = built
            out.shown.append((t, index, window, panel_rows(panel)))

    return drawn


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
            screen = monitor_of(app.screen)
            feeds = await opened_feeds(pilot)
            for i, feed in enumerate(feeds):
                _capture(feed, i, out.seen)
            _capture_panels(screen, out)
            await _wait_until(
                pilot, lambda: all(f.watch.status == "up" and f.watch.identified for f in feeds)
            )
            for prompt in PROMPTS:
                done = [p.prompt_count for p in screen.panels]
                screen.send(prompt)

                def answered(done: list[int] = done) -> bool:
                    return not screen.generating and all(
                        p.prompt_count > d for p, d in zip(screen.panels, done, strict=True)
                    )

                await _wait_until(pilot, answered, limit_s=60)
            screen.action_cycle_window()  # 60 s
            screen.action_cycle_window()  # this prompt
            n = len(out.seen)
            await _wait_until(pilot, lambda: len(out.seen) > n + 4)
            await pilot.press("ctrl+q")
    return out


async def record_mid_stream(path: Path) -> Recorded:
    """The end of a demo: A has answered a long prompt, B is streaming it when the user quits."""
    out = Recorded(path)
    with (
        SimThread(preset="gemma4-e4b-gb10", spec=False, speed=8) as url_a,
        SimThread(preset="gemma4-e4b-gb10", spec=True, speed=1) as url_b,  # B: a long stream
    ):
        config = AppConfig(
            servers=[ServerSpec(label="A · MTP off", url=url_a), ServerSpec(label="B · MTP on", url=url_b)],
            display=DisplaySettings(max_tokens=900, spec_method="mtp"),
            mode="ab",
            title="record test, mid-stream",
            record=str(path),
        )
        app = make_app(config)
        async with app.run_test(size=(160, 48)) as pilot:
            screen = monitor_of(app.screen)
            feeds = await opened_feeds(pilot)
            for i, feed in enumerate(feeds):
                _capture(feed, i, out.seen)
            _capture_panels(screen, out)
            await _wait_until(
                pilot, lambda: all(f.watch.status == "up" and f.watch.identified for f in feeds)
            )
            screen.send(PROMPTS[0])  # alternate: A first, then B

            def b_streams() -> bool:
                # B's engine runs a request and has for a while: several views of B while it does.
                streaming = [t for t, i, _, v in out.seen if i == 1 and v.running and v.server_tok_s]
                return screen.panels[0].prompt_count == 1 and len(streaming) >= 4

            await _wait_until(pilot, b_streams, limit_s=120)
            assert screen.generating and screen.panels[1].prompt_count == 0, "B finished: make it longer"
            await pilot.press("ctrl+q")
    return out


def make_recording(path: Path) -> Recorded:
    return asyncio.run(record_ab(path))


def make_mid_stream_recording(path: Path) -> Recorded:
    return asyncio.run(record_mid_stream(path))
