"""The first frame's floor: a minimal Textual app of the demo's shape (title bar, two panes, an input,
a footer), titled as the demo is so that `first_frame.py --floor` times it on the same pty harness."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.widgets import Footer, Header, Input, Static


class Floor(App[None]):
    TITLE = "mtpwatch demo"
    BINDINGS = [("ctrl+q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield Static("A\n" * 20)
            yield Static("B\n" * 20)
        yield Input(placeholder="prompt")
        yield Footer()


if __name__ == "__main__":
    Floor().run()
