"""PromptInput: the console's one-line prompt with shell-like history on up/down."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Input
from textual.widgets.input import Selection


class PromptInput(Input):
    """An `Input` that remembers submitted prompts; up/down walk the history.

    `?` opens help while the box is empty or holds the untouched suggested prompt (F1 is taken by
    VS Code Remote terminals); inside a prompt being typed it is a question mark.
    """

    BINDINGS = [
        Binding("enter", "submit", "Send", show=False, id="send"),  # Input's own, with an id for the help
        Binding("up", "history(-1)", "Previous prompt", show=False, id="history-previous"),
        Binding("down", "history(1)", "Next prompt", show=False, id="history-next"),
    ]

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)
    """Textual's `Input` sets its virtual size to its text's width on every change of its value, a
    layout reactive: every keystroke, paste and clear relaid out the whole screen (~5–20 ms at
    160×48, while the panels stream). The box's one row never depends on its text: a repaint is
    enough (the horizontal scroll reads the new size at once)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # A steady cursor: a blinking one repaints the whole input twice a second, ~2 KB/s over SSH
        # on an otherwise idle screen, and keeps a timer running.
        self.cursor_blink = False
        self.history: list[str] = []
        """Submitted prompts, oldest first."""
        self._cursor = 0
        self._draft = ""
        self.suggestion = str(kwargs.get("value") or "")
        """The suggested prompt the box started with ('?' on it opens help instead of typing)."""

    async def _on_key(self, event: events.Key) -> None:
        if event.character == "?" and self.value.strip() in ("", self.suggestion.strip()):
            event.stop()
            event.prevent_default()
            await self.app.run_action("help")
            return
        await super()._on_key(event)

    def on_focus(self, event: events.Focus) -> None:
        """The untouched suggested prompt is selected from its end back to its start: the box shows
        its start (an 80-column box showed its end, `culative decoding with a…`) and typing replaces
        it; any other text is selected whole, as Textual's `Input` does (it runs after this)."""
        untouched = bool(self.value) and self.value == self.suggestion
        self.select_on_focus = not untouched
        if untouched:
            self.selection = Selection(len(self.value), 0)

    def remember(self, prompt: str) -> None:
        """Add a submitted prompt to the history (consecutive duplicates once)."""
        if prompt and (not self.history or self.history[-1] != prompt):
            self.history.append(prompt)
        self._cursor = len(self.history)
        self._draft = ""

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self._cursor == len(self.history):
            self._draft = self.value
        self._cursor = min(max(self._cursor + step, 0), len(self.history))
        self.value = self._draft if self._cursor == len(self.history) else self.history[self._cursor]
        self.cursor_position = len(self.value)
