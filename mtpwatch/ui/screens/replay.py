"""ReplayScreen: the monitor screen driven by a recording (`mtpwatch replay FILE`).

The panels, lines and windows are the live screen's; a `ReplaySource` stands in for the network.
Its feeds run on the recording's clock, and the panels get their views the live way: the player
marks the feeds changed, the screen's view tick (`PanelFeeds.tick_views`) builds and shows them.
Its keys: `screens/keys.PLAYER_KEYS`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from textual.content import Content
from textual.widgets import Static

from mtpwatch.config import AppConfig
from mtpwatch.session.drivers import Action
from mtpwatch.session.replay import ReplayDriver, ReplaySource
from mtpwatch.session.views import Answer
from mtpwatch.ui.markup.titles import render_replay_title
from mtpwatch.ui.screens.keys import PLAYER_KEYS
from mtpwatch.ui.screens.monitor import MonitorScreen
from mtpwatch.ui.widgets.prompt_input import PromptInput

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
TICK_S = 0.1
LOOP_PAUSE_S = 3.0
"""`--loop`: seconds the last frame stays before the recording starts over."""


def _clock_text(seconds: float) -> str:
    m, s = divmod(max(seconds, 0.0), 60.0)
    return f"{int(m):02d}:{s:04.1f}"


class ReplayScreen(MonitorScreen):
    """The monitor screen with a player instead of servers."""

    BINDINGS = [*PLAYER_KEYS]  # the monitor's and the app's keys too; the monitor's help lists them

    def __init__(self, config: AppConfig, source: ReplaySource) -> None:
        """`config.loop` and `config.speed`: the player's (`replay --loop/--speed`); the monitor's
        schedule is the recording's."""
        monitor = replace(config, schedule=source.schedule, loop=False)  # type: ignore[arg-type]
        super().__init__(monitor, autostart=False, clock=source.clock, driver=ReplayDriver(source))
        self.source = source
        self.replay_loop = config.loop
        self.playing = True
        self.speed_index = SPEEDS.index(config.speed) if config.speed in SPEEDS else SPEEDS.index(1.0)
        self.player_clock: Callable[[], float] = time.monotonic
        """The wall clock playback moves by (seconds × speed of recording per second of it)."""
        self._last_tick = self.player_clock()
        self._ended_at: float | None = None
        self._answers: dict[int, Answer] = {}

    @property
    def speed(self) -> float:
        """Playback speed, ¼× … 16×."""
        return SPEEDS[self.speed_index]

    def on_mount(self) -> None:
        super().on_mount()
        prompt = self.query_one(PromptInput)
        prompt.placeholder = "replay: Space play/pause · ←/→ 10 s · n/p prompt · . step · +/- speed"
        prompt.disabled = True
        if self.config.mode == "ab":
            self.query_one("#measure", Static).display = False  # F6 measures servers, not files
        self.driver.open()
        for panel in self.panels:
            panel.show_pane("monitor")
        self._apply(self.source.advance(self.source.t_start))
        self.feeding.views_due(now=True)
        self._last_tick = self.player_clock()  # playing starts now, not when the screen was made
        self.set_interval(TICK_S, self._tick, name="replay")

    # -- title ------------------------------------------------------------------------------------

    def update_title(self) -> None:
        source = self.source
        state = "▶" if self.playing else "❚❚"
        speed = f"{self.speed:g}×" if self.speed >= 1 else f"{self.speed:.2g}×"
        total = _clock_text(source.t_end - source.t_start)
        player = (state, _clock_text(source.elapsed_s), total, speed)
        title = render_replay_title(
            player, self.window, title=self.config.title, paused=self.is_paused(), width=self.title_width()
        )
        self.query_one("#title-bar", Static).update(Content.from_markup(title))

    # -- playing ----------------------------------------------------------------------------------

    def _tick(self) -> None:
        now = self.player_clock()
        dt, self._last_tick = now - self._last_tick, now
        if not self.playing:
            return
        source = self.source
        if source.at_end or source.now >= source.t_end:
            if not self.replay_loop:
                self.playing = False
                self.update_title()
                return
            if self._ended_at is None:
                self._ended_at = now
            if now - self._ended_at >= LOOP_PAUSE_S:
                self._ended_at = None
                self.seek_to(source.t_start)
            return
        self._apply(source.advance(min(source.now + dt * self.speed, source.t_end)))
        self.feeding.views_due()  # the recording's clock moved: the view tick draws it, as a scrape live
        self.update_title()

    def _apply(self, actions: list[Action], *, from_index: dict[int, int] | None = None) -> None:
        """Show `actions` in the answer panes (after a seek, only each pane's current prompt)."""
        panels = self.panels
        for i, action in enumerate(actions):
            quiet = from_index is not None and i < from_index.get(action.server, 0)
            if action.kind == "answer" and action.answer is not None and self.config.mode == "ab":
                self._answers[action.server] = action.answer
                if len(self._answers) == 2:
                    self.ab.show_comparison(self._answers[0], self._answers[1])
                    self._answers = {}
            if action.server >= len(panels):
                continue
            panel = panels[action.server]
            if quiet:  # before the prompt shown: its summary line only, numbered by the recording
                if action.kind == "answer" and action.answer is not None:
                    panel.keep_summary(action.answer.summary, action.number)
            elif action.kind == "begin":
                panel.begin_answer(action.text)
            elif action.kind == "text":
                panel.stream.feed(action.text)
            elif action.kind == "answer" and action.answer is not None:
                panel.add_summary(action.answer.summary, action.number)
        if from_index is not None:
            for panel in panels:
                panel.draw_summaries()

    def seek_to(self, t: float) -> None:
        """Jump to time `t`: the panes show each server's prompt at that moment."""
        source = self.source
        backwards = t < source.now
        if backwards:
            for panel in self.panels:
                panel.stream.reset()
                panel.clear_summaries()
            self.ab.speedups.clear()
            self._answers = {}
        actions = self.driver.seek(t)
        last_begin = {action.server: i for i, action in enumerate(actions) if action.kind == "begin"}
        self._apply(actions, from_index=last_begin)
        self.feeding.views_due(now=True)
        self.update_title()

    # -- keys -------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """F4 and F6 are not offered (Textual hides a binding whose action is checked False): the
        replay's driver refuses to send or measure (`session/replay.REFUSALS`)."""
        return action not in ("sample_prompt", "measure")

    def action_play_pause(self) -> None:
        self.playing = not self.playing
        if self.playing and self.source.at_end:
            self.seek_to(self.source.t_start)
        self._last_tick = self.player_clock()
        self.update_title()

    def action_seek(self, seconds: float) -> None:
        self.seek_to(self.source.now + seconds)

    def action_jump(self, direction: int) -> None:
        """Next (+1) or previous (−1) prompt start."""
        now = self.source.now
        times = self.source.prompt_times
        if direction > 0:
            later = [t for t in times if t > now + 1e-6]
            if later:
                self.seek_to(later[0])
        else:
            earlier = [t for t in times if t < now - 0.5]
            self.seek_to(earlier[-1] if earlier else self.source.t_start)

    def action_step(self) -> None:
        """Pause and move to the next scrape."""
        self.playing = False
        later = [t for t in self.source.scrape_times if t > self.source.now + 1e-9]
        if later:
            self.seek_to(later[0])

    def action_speed(self, step: int) -> None:
        self.speed_index = min(max(self.speed_index + step, 0), len(SPEEDS) - 1)
        self.update_title()

    def action_restart(self) -> None:
        self.seek_to(self.source.t_start)
