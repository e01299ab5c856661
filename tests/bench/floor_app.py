"""The framework's floor: a minimal Textual app of the monitor's shape, for watch_cost.py to measure.

    python tests/bench/floor_app.py [--pane lines|static|log] [--idle]

A bordered pane whose text grows 15 times a second (~2.5 tokens a burst, ~37 tok/s, as one E4B
server with MTP streams), beside 20 one-line rows whose numbers change twice a second, on a full
screen. Nothing else: no scraping, no parsing, no views. What mtpwatch costs above this is its own.
The pane (`--pane lines`, the default) draws its lines with Textual's line API and repaints the row
a burst extends; `--pane static` grows a `Static` instead (its text updated without a relayout, so
the whole pane repaints) and `--pane log` writes to a `Log`. The pane's text starts again at the
top when the pane is full. `--idle` keeps the pane still (only the rows change). Ctrl+Q quits.
"""

from __future__ import annotations

import argparse
import itertools

from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Log, Static

WORDS = tuple(
    [
        "memory",
        "bandwidth",
        "bounds",
        "decoding",
        "because",
        "every",
        "generated",
        "token",
        "reads",
        "all",
        "the",
        "weights",
        "once",
        "while",
        "speculative",
        "drafts",
        "verified",
        "in",
        "one",
        "pass",
        "amortise",
        "that",
        "read",
        "over",
        "several",
        "tokens",
    ]
)
BURST_HZ = 15.0
ROWS_HZ = 2.0
ROWS = 20


class LinesPane(Widget):
    """Textual's line API at its simplest: the text's lines drawn by `render_line`; a burst repaints
    the row it extends (all rows when the pane is full and starts again at the top)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.lines = [""]

    def write(self, burst: str) -> None:
        width, height = self.content_region.size
        if len(self.lines[-1]) + len(burst) > width:
            self.lines.append("")
            if len(self.lines) > height:
                self.lines = [""]
                self.refresh()
        self.lines[-1] += burst
        self.refresh(Region(0, len(self.lines) - 1, width, 1))

    def render_line(self, y: int) -> Strip:
        line = self.lines[y] if y < len(self.lines) else ""
        style = self.rich_style
        return Strip([Segment(line, style)]).extend_cell_length(self.content_region.width, style)


class FloorApp(App[None]):
    CSS = """
    #rows { width: 1fr; }
    #rows Static { height: 1; }
    #pane { width: 1fr; height: 1fr; border: round $primary; }
    """
    BINDINGS = [("ctrl+q", "quit", "Quit")]

    def __init__(self, pane: str, idle: bool) -> None:
        super().__init__()
        self.pane_kind = pane
        self.idle = idle
        self.text: list[str] = []
        self.words = itertools.cycle(WORDS)
        self.tick = 0
        self.column = 0

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="rows"):
                for i in range(ROWS):
                    yield Static(f"row {i:2d}: {0:8.1f} tok/s", classes="row")
            if self.pane_kind == "log":
                yield Log(id="pane")
            elif self.pane_kind == "lines":
                yield LinesPane(id="pane")
            else:
                yield Static("", id="pane")

    def on_mount(self) -> None:
        self.rows = list(self.query(".row").results(Static))
        self.pane = self.query_one("#pane")
        self.set_interval(1 / ROWS_HZ, self.update_rows)
        if not self.idle:
            self.set_interval(1 / BURST_HZ, self.grow)

    def update_rows(self) -> None:
        self.tick += 1
        for i, row in enumerate(self.rows):
            row.update(f"row {i:2d}: {self.tick * 1.7 + i:8.1f} tok/s", layout=False)

    def grow(self) -> None:
        burst = " ".join(next(self.words) for _ in range(2 + self.tick % 2)) + " "
        if isinstance(self.pane, LinesPane):
            self.pane.write(burst)
            return
        if isinstance(self.pane, Log):
            # Lines end before the pane's edge (an answer pane wraps its lines).
            self.column += len(burst)
            if self.column > self.pane.content_region.width - 2:
                burst, self.column = "\n" + burst, len(burst)
            self.pane.write(burst)
            return
        self.text.append(burst)
        assert isinstance(self.pane, Static)
        width, height = self.pane.content_region.size
        if len("".join(self.text)) > width * (height - 2):
            self.text = [burst]  # about full: start again at the top (a jump, as a pager does)
        self.pane.update("".join(self.text), layout=False)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pane", choices=("lines", "static", "log"), default="lines")
    p.add_argument("--idle", action="store_true")
    args = p.parse_args()
    FloorApp(args.pane, args.idle).run()
