"""The replay screen: the live app's panels driven by a recording, with play/pause, seek, step,
jump to a prompt, speed and the time shown."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

from mtpwatch.session.replay import ReplaySource
from mtpwatch.ui.app import make_app
from mtpwatch.ui.screens.replay import ReplayScreen
from tests.ui.recorded import PROMPTS, Recorded

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil


def _title(screen: ReplayScreen) -> str:
    from textual.widgets import Static

    return str(screen.query_one("#title-bar", Static).render())


async def test_replay_keys_move_the_player_and_the_panels_follow(
    sim_recording: Recorded, wait_until: WaitUntil
) -> None:
    source = ReplaySource.open(sim_recording.path)
    app = make_app(dataclasses.replace(source.config, speed=16.0), replay=source)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        assert re.search(r"replay \d\d:\d\d\.\d / \d\d:\d\d\.\d · 16×", _title(screen))
        # Playing at 16×: the first answer arrives in both panes with its summary line.
        await wait_until(pilot, lambda: all(p.prompt_count >= 1 for p in screen.panels), limit_s=30)
        assert screen.panels[1].last_summary is not None and screen.panels[1].last_summary.tokens > 0
        # The speed-up line is the live one: the arms' views say which one speculates.
        assert "speed-up B/A: last" in str(screen.query_one("#speedup").render())  # as before the first
        await pilot.press("space")  # pause
        # A loaded machine may have played it all at 16× (the end stops it): Space then played it again.
        while screen.playing:
            await pilot.press("space")
        assert not screen.playing and "❚❚" in _title(screen)
        t = source.now
        await pilot.pause(0.5)
        assert source.now == t  # paused: time stands still
        await pilot.press("minus")
        assert screen.speed == 8.0
        await pilot.press("left")  # −10 s: replayed from the start up to there
        assert abs(source.now - max(source.t_start, t - 10)) < 1e-6
        await pilot.press("home")
        assert source.now == source.t_start and source.pos <= 2
        await pilot.press("n")  # jump to the first prompt
        assert source.now == source.prompt_times[0]
        assert PROMPTS[0][:30] in "\n".join(screen.panels[0].stream.lines) or PROMPTS[0][:30] in "\n".join(
            screen.panels[1].stream.lines
        )
        await pilot.press("full_stop")  # step: the next scrape
        assert source.now in source.scrape_times and not screen.playing
        await pilot.press("right")
        assert "replay 00:" in _title(screen)
        # The panels show what the feeds compute at that moment (same code as live).
        view = source.feeds[1].view(screen.window)
        # Paused: the view stands still; the panel draws it at its next tick (later on a loaded machine).

        def shown() -> bool:
            drawn = screen.panels[1].view
            return drawn is not None and drawn.acceptance_rate == view.acceptance_rate

        await wait_until(pilot, shown, limit_s=30)
        await pilot.press("f4")  # a replay sends nothing: no server, no network
        assert not screen.generating
        actions = {active.binding.action for active in screen.active_bindings.values()}
        assert not {"sample_prompt", "measure"} & actions and "play_pause" in actions  # F4, F6: not offered
        await pilot.press("question_mark")  # help opens: the prompt box is disabled in a replay
        assert app.screen.__class__.__name__ == "HelpScreen"
        await pilot.press("escape")
        await pilot.press("ctrl+q")
