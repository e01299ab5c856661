"""The replayed panel is the live panel: the same rows at the same recording times, and it follows
playback (a seek does not freeze it; at the end the streaming arm shows its own stream's numbers)."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import pytest
from textual.content import Content

from mtpwatch.core.record.reader import read_recording
from mtpwatch.session.replay import ReplaySource
from mtpwatch.session.views import WINDOWS
from mtpwatch.session.watch import ServerFeed
from mtpwatch.ui.app import make_app
from mtpwatch.ui.screens.replay import ReplayScreen
from mtpwatch.ui.widgets.server_panel import ServerPanel
from tests.ui.conftest import panel_rows
from tests.ui.recorded import Recorded

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil

SIZE = (160, 48)
"""The size the recordings were made at: row texts wrap and shorten with the width."""


def _quit_t(recorded: Recorded) -> float:
    recording = read_recording(recorded.path)
    return next(float(r["t"]) for r in recording.records if r["kind"] == "mark" and r["what"] == "quit")


def _tok_s(rows: dict[str, str]) -> str | None:
    found = re.search(r"server tok/s (\S+)", Content.from_markup(rows["numbers"]).plain)
    return found.group(1) if found else None


def _content(rows: dict[str, str]) -> dict[str, str]:
    """The rows without the line an A/B pane adds when its roofline gives its rows to the answer
    (`ServerPanel._roomless`): the replay screen has no console, so its panes are taller and may
    keep the roofline where the live pane gave it up. The roofline's own row is compared either way."""
    return {**rows, "numbers": re.sub(r"\nBW .*\Z", "", rows["numbers"], flags=re.S)}


async def _replayed_rows_equal_live(recorded: Recorded, how: str, wait_until: WaitUntil) -> None:
    """Go to each instant the live app drew a panel at (`how`: play there, or seek there) and compare
    that panel's rows, markup and all."""
    quit_t = _quit_t(recorded)
    instants = sorted(
        (entry for entry in recorded.shown if entry[0] <= quit_t),  # after: the app closing its clients
        key=lambda entry: entry[0],
    )
    assert len(instants) >= 6, f"the live app drew {len(instants)} views"
    source = ReplaySource.open(recorded.path)
    app = make_app(source.config, replay=source)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await pilot.press("space", "home")  # pause, back to the start
        assert not screen.playing and source.now == source.t_start
        player = [0.0]  # playing: the player's clock moves only when the test moves it
        screen.player_clock = lambda: player[0]
        if how == "play":
            await pilot.press("space")
        compared = with_numbers = 0
        for t, index, window, live in instants:
            screen.window_index = WINDOWS.index(window)
            if how == "play":
                player[0] += t - source.now  # at 1×: the next tick plays up to t

                def played(t: float = t) -> bool:
                    return source.now >= t - 1e-9

                await wait_until(pilot, played, limit_s=30)
            else:
                screen.seek_to(t)
            assert abs(source.now - t) < 1e-9 and screen.playing == (how == "play")
            panel, feed = screen.panels[index], source.feeds[index]

            def shown(panel: ServerPanel = panel, feed: ServerFeed = feed) -> bool:
                return panel.view == feed.view(screen.window)

            await wait_until(pilot, shown)
            replayed = _content(panel_rows(panel))
            live = _content(live)
            diff = {row: (live[row], replayed[row]) for row in live if live[row] != replayed[row]}
            at = f"t={t - source.t_start:.3f} s server {index} window {window}"
            assert not diff, f"{at}: live, replay {diff}"
            compared += 1
            with_numbers += _tok_s(live) not in (None, "—") and "acceptance " in live["numbers"]
        assert with_numbers >= 2, f"{compared} instants compared, {with_numbers} with numbers"
        await pilot.press("ctrl+q")


@pytest.mark.parametrize("how", ["play", "seek"])
async def test_replayed_panel_rows_equal_the_live_ones(
    sim_recording: Recorded, wait_until: WaitUntil, how: str
) -> None:
    """Two simulators, two prompts, all three windows: every row of every panel the live app drew,
    at the time its view was built, equals the replay's at that recording time."""
    await _replayed_rows_equal_live(sim_recording, how, wait_until)


@pytest.mark.parametrize("how", ["play", "seek"])
async def test_replayed_panel_rows_equal_the_live_ones_mid_stream(
    mid_stream_recording: Recorded, wait_until: WaitUntil, how: str
) -> None:
    await _replayed_rows_equal_live(mid_stream_recording, how, wait_until)


async def test_the_replayed_panel_follows_playback_after_a_seek(
    sim_recording: Recorded, wait_until: WaitUntil
) -> None:
    """After a seek the panel goes on following the recording's clock: paused at three moments of
    playback, it shows the feed's view at that moment (not the one drawn at the seek)."""
    source = ReplaySource.open(sim_recording.path)
    app = make_app(dataclasses.replace(source.config, speed=0.5), replay=source)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await pilot.press("space", "home", "n")  # pause, back to the start, seek to the first prompt
        assert not screen.playing
        t_seek = source.now
        assert t_seek == source.prompt_times[0]
        rest = source.t_end - t_seek  # both prompts stream in it
        drawn_at = panel_rows(screen.panels[1])["numbers"]
        seen: list[str] = []
        await pilot.press("space")  # play
        for offset in (0.15 * rest, 0.4 * rest, 0.8 * rest):

            def reached(offset: float = offset) -> bool:
                return source.now >= t_seek + offset

            await wait_until(pilot, reached, limit_s=60)
            await pilot.press("space")  # pause
            assert not screen.playing
            t = source.now

            def drawn_now() -> bool:
                return all(
                    panel.view == feed.view(screen.window)
                    for panel, feed in zip(screen.panels, source.feeds, strict=True)
                )

            await wait_until(pilot, drawn_now, limit_s=30)
            assert source.now == t
            seen.append(panel_rows(screen.panels[1])["numbers"])
            await pilot.press("space")  # play on
        assert len({drawn_at, *seen}) >= 3, seen
        await pilot.press("ctrl+q")


@pytest.mark.parametrize("how", ["play", "seek"])
async def test_at_the_end_the_streaming_arm_shows_its_stream(
    mid_stream_recording: Recorded, wait_until: WaitUntil, how: str
) -> None:
    """Quit while B streams: at the end of the replay B's server tok/s is its stream's (the 10 s
    window at the recording's end), not a number left from before it streamed."""
    recorded = mid_stream_recording
    quit_t = _quit_t(recorded)
    live_b = [rows for t, i, _, rows in recorded.shown if i == 1 and t <= quit_t]
    live_last = live_b[-1]
    source = ReplaySource.open(recorded.path)
    app = make_app(dataclasses.replace(source.config, speed=2.0), replay=source)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        if how == "seek":
            screen.seek_to(source.t_end)
        await wait_until(pilot, lambda: source.at_end and not screen.playing, limit_s=120)
        a, b = (source.feeds[i].view(screen.window) for i in (0, 1))
        assert b.running and b.server_tok_s, "B streams at the end of the recording"
        await wait_until(pilot, lambda: screen.panels[1].view == b and screen.panels[0].view == a)
        shown = _tok_s(panel_rows(screen.panels[1]))
        assert shown == f"{b.server_tok_s:.1f}", panel_rows(screen.panels[1])["numbers"]
        # The live app showed B streaming too at its last view before the quit; no stale number.
        assert "running 1" in live_last["numbers"] and _tok_s(live_last) not in (None, "—", "0.0")
        await pilot.press("ctrl+q")
