"""The framework's floor: a minimal Textual app of the monitor's shape, for watch_cost.py to measure.

    python tests/bench/floor_app.py [--pane lines|static|log] [--idle] [--race] [--cell HZ]

A bordered pane whose text grows 15 times a second (~2.5 tokens a burst, ~37 tok/s, as one E4B
server with MTP streams), beside 20 one-line rows whose numbers change twice a second, on a full
screen. Nothing else: no scraping, no parsing, no views. What mtpwatch costs above this is its own.
The pane (`--pane lines`, the default) draws its lines with Textual's line API and repaints the row
a burst extends; `--pane static` grows a `Static` instead (its text updated without a relayout, so
the whole pane repaints) and `--pane log` writes to a `Log`. The pane's text starts again at the
top when the pane is full. `--idle` keeps the pane still (only the rows change). `--race` is the
A/B race's shape: two bordered panels side by side, each 32 rows above a text pane (14 rows at
160×48), each pane growing 25 times a second by ~40 words a burst (two servers at ~1,000 tok/s
each, painted at the app's default 25 fps, both panes in the same frame), and scrolling as a
terminal does (every row of both panes repainted every frame). `--cell HZ` is the least any Textual
app can show: one `Static` whose number changes HZ times a second, alone on the screen (what a frame
costs the framework whatever is in it: 15 is one server's bursts, 25 the race's frame rate). Ctrl+Q
quits.
"""

from __future__ import annotations

import argparse
import itertools

from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.driver import Driver
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Log, Static

from mtpwatch.ui.fastpaint.driver import terminal_driver

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
RACE_BURST_HZ = 25.0
RACE_WORDS = 40
RACE_ROWS = 32
"""The race at 160×48: each panel's 32 rows of figures above 14 rows of text."""


class LinesPane(Widget):
    """Textual's line API at its simplest: the text's lines drawn by `render_line`; a burst repaints
    the rows it extends (all rows when the pane is full and scrolls or starts again at the top)."""

    def __init__(self, scroll: bool = False, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.lines = [""]
        self.scroll = scroll
        """Full: scroll up (a terminal's tail, every row repainted); else start again at the top."""

    def write(self, burst: str) -> None:
        width, height = self.content_region.size
        first = len(self.lines) - 1
        for word in burst.split(" ")[:-1]:
            if len(self.lines[-1]) + len(word) + 1 > width:
                self.lines.append("")
            self.lines[-1] += word + " "
        if len(self.lines) > height:
            self.lines = self.lines[-height:] if self.scroll else self.lines[first + 1 :]
            self.refresh()
            return
        self.refresh(Region(0, first, width, len(self.lines) - first))

    def render_line(self, y: int) -> Strip:
        line = self.lines[y] if y < len(self.lines) else ""
        style = self.rich_style
        return Strip([Segment(line, style)]).extend_cell_length(self.content_region.width, style)


class FloorApp(App[None]):
    CSS = """
    .rows { width: 1fr; }
    .rows Static { height: 1; }
    .pane { width: 1fr; height: 1fr; border: round $primary; }
    .panel { width: 1fr; border: round $primary; }
    .panel Static { height: 1; }
    .panel .pane { height: 1fr; border: none; }
    """
    BINDINGS = [("ctrl+q", "quit", "Quit")]

    def __init__(self, pane: str, idle: bool, race: bool = False, cell_hz: float = 0.0) -> None:
        super().__init__()
        self.cell_hz = cell_hz
        self.pane_kind = pane
        self.idle = idle
        self.race = race
        self.burst_hz = RACE_BURST_HZ if race else BURST_HZ
        self.burst_words = RACE_WORDS if race else 2
        self.text: list[str] = []
        self.words = itertools.cycle(WORDS)
        self.tick = 0
        self.column = 0

    def get_driver_class(self) -> type[Driver]:
        """mtpwatch's terminal driver (as the app it is the floor of): the app ends with its pty,
        never spins at 100 % of a core on a closed one (an interrupted overhead.py)."""
        return terminal_driver(super().get_driver_class())

    def compose(self) -> ComposeResult:
        if self.cell_hz:
            yield Static("0", id="cell")
            return
        if self.race:
            # The race's shape: two panels side by side, each its rows above a text pane.
            with Horizontal():
                for _ in range(2):
                    with Vertical(classes="panel"):
                        for i in range(RACE_ROWS):
                            yield Static(f"row {i:2d}: {0:8.1f} tok/s", classes="row")
                        yield LinesPane(scroll=True, classes="pane")
            return
        with Horizontal():
            with Vertical(classes="rows"):
                for i in range(ROWS):
                    yield Static(f"row {i:2d}: {0:8.1f} tok/s", classes="row")
            if self.pane_kind == "log":
                yield Log(classes="pane")
            elif self.pane_kind == "lines":
                yield LinesPane(classes="pane")
            else:
                yield Static("", classes="pane")

    def on_mount(self) -> None:
        if self.cell_hz:
            self.cell = self.query_one("#cell", Static)
            self.set_interval(1 / self.cell_hz, self.count)
            return
        self.rows = list(self.query(".row").results(Static))
        self.panes = list(self.query(".pane"))
        self.set_interval(1 / ROWS_HZ, self.update_rows)
        if not self.idle:
            self.set_interval(1 / self.burst_hz, self.grow)

    def count(self) -> None:
        self.tick += 1
        self.cell.update(str(self.tick), layout=False)

    def update_rows(self) -> None:
        self.tick += 1
        for i, row in enumerate(self.rows):
            row.update(f"row {i:2d}: {self.tick * 1.7 + i:8.1f} tok/s", layout=False)

    def grow(self) -> None:
        burst = " ".join(next(self.words) for _ in range(self.burst_words + self.tick % 2)) + " "
        for pane in self.panes:
            self.write(pane, burst)

    def write(self, pane: Widget, burst: str) -> None:
        if isinstance(pane, LinesPane):
            pane.write(burst)
            return
        if isinstance(pane, Log):
            # Lines end before the pane's edge (an answer pane wraps its lines).
            self.column += len(burst)
            if self.column > pane.content_region.width - 2:
                burst, self.column = "\n" + burst, len(burst)
            pane.write(burst)
            return
        self.text.append(burst)
        assert isinstance(pane, Static)
        width, height = pane.content_region.size
        if len("".join(self.text)) > width * (height - 2):
            self.text = [burst]  # about full: start again at the top (a jump, as a pager does)
        pane.update("".join(self.text), layout=False)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pane", choices=("lines", "static", "log"), default="lines")
    p.add_argument("--idle", action="store_true")
    p.add_argument("--race", action="store_true", help="the A/B race's shape: two columns, fast panes")
    p.add_argument(
        "--cell", type=float, default=0.0, metavar="HZ", help="one cell, changing HZ times a second"
    )
    args = p.parse_args()
    if args.race and args.pane != "lines":
        p.error("--race draws its panes with the line API only (--pane lines)")
    if args.cell < 0 or (args.cell and (args.race or args.idle)):
        p.error("--cell HZ takes a positive rate and stands alone (no --race, no --idle)")
    FloorApp(args.pane, args.idle, args.race, args.cell).run()
