"""PromptGate: the console sends a prompt only to arms that are up, else holds it until they are.

The demo's first frame offers "Enter sends the suggested prompt" while both servers are still
starting, where a prompt sent at once failed arm A with "connection refused" (issue 40, item 1). A
prompt submitted while an arm is starting or connecting is held (the title says "waiting for A")
and goes once every arm is up; an arm that fails or goes down meanwhile gives it back in the box
with one line saying why. An arm already down when the prompt is sent is not waited for: the
answer pane says what the stream met.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mtpwatch.ui.markup.titles import and_list
from mtpwatch.ui.widgets.prompt_input import PromptInput

if TYPE_CHECKING:
    from mtpwatch.ui.screens.monitor import MonitorScreen

COMING = ("starting", "connecting")
"""An arm in these states is on its way up: a prompt waits for it."""
GONE = ("down", "failed", "stopped")
"""An arm in these states will not come up by itself: a prompt held for it is given back."""


class PromptGate:
    def __init__(self, screen: MonitorScreen) -> None:
        self.screen = screen
        self.pending: str | None = None
        """The prompt held until every arm is up."""
        self.shown: tuple[str, ...] = ()
        """The arms the title last said were not up yet."""

    def name(self, index: int) -> str:
        """'A'/'B' in an A/B pair (the panels' letters), else the server's label."""
        if self.screen.config.mode == "ab" and index < 2:
            return "AB"[index]
        return self.screen.config.servers[index].label

    def waiting(self) -> tuple[str, ...]:
        """The arms still on their way up (none in restart mode: a measurement starts them)."""
        if self.screen.restart_mode:
            return ()
        if not self.screen.opened:  # the first frame: every arm is on its way (starting or connecting)
            return tuple(self.name(i) for i in range(len(self.screen.config.servers)))
        states = (feed.state() for feed in self.screen.feeds)
        return tuple(self.name(i) for i, state in enumerate(states) if state.status in COMING)

    def offer(self, prompt: str) -> None:
        """Send `prompt` now if every arm is up, else hold it and say which arms it waits for."""
        waiting = self.waiting()
        if not waiting:
            self.screen.send(prompt)
            return
        self.pending = prompt
        self.screen.update_title()
        self.screen.notify(f"Waiting for {and_list(waiting)} to come up: the prompt goes then.", timeout=4)

    def check(self) -> None:
        """An arm's state may have changed: redraw the title, send or give back the held prompt."""
        waiting = self.waiting()
        if waiting != self.shown:
            self.shown = waiting
            self.screen.update_title()
        if self.pending is None:
            return
        for i, feed in enumerate(self.screen.feeds):
            state = feed.state()
            if state.status in GONE:
                why = (state.reason or state.status).splitlines()[0]
                self.give_back(f"{self.name(i)} did not come up ({why}); the prompt is back in the box.")
                return
        if not waiting:
            prompt, self.pending = self.pending, None
            self.screen.send(prompt)  # redraws the title (the first prompt sent)
            self.screen.update_title()

    def cancel(self) -> bool:
        """Escape: give the held prompt back (True when one was held)."""
        if self.pending is None:
            return False
        self.give_back("Not sent: the prompt is back in the box.", severity="information")
        return True

    def give_back(self, message: str, *, severity: str = "error") -> None:
        prompt, self.pending = self.pending, None
        box = self.screen.query_one(PromptInput)
        if prompt and not box.value.strip():
            box.value = prompt
            box.cursor_position = len(prompt)
        self.screen.update_title()
        self.screen.notify(message, severity=severity, timeout=8)  # type: ignore[arg-type]
