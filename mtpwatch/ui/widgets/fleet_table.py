"""FleetTable: one row per server (and engine), sortable, outliers marked; cells drawn from `FleetRow`s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.geometry import Region
from textual.widgets import Static

from mtpwatch.core.fleet.rows import FleetRow
from mtpwatch.render.numbers import fixed

BLOCKS = " ▁▂▃▄▅▆▇█"
SPARK = "▁▂▃▄▅▆▇█"

COLUMNS: tuple[tuple[str, str], ...] = (
    ("flag", " "),
    ("server", "server"),
    ("model", "model"),
    ("method", "method"),
    ("k", "k"),
    ("state", "state"),
    ("tok_s", "tok/s"),
    ("acceptance", "accept"),
    ("mean_length", "mean len"),
    ("per_pos", "per pos"),
    ("kv", "KV"),
    ("run_wait", "run/wait"),
    ("history", "tok/s 60 s"),
)

SORTS: tuple[tuple[str, Callable[[FleetRow], tuple[int, float | str]]], ...] = (
    ("server", lambda r: (0, r.name)),
    ("tok/s", lambda r: (r.decode_tok_s is None, -(r.decode_tok_s or 0.0))),
    ("acceptance", lambda r: (r.acceptance is None, r.acceptance or 0.0)),
    ("mean length", lambda r: (r.mean_length is None, r.mean_length or 0.0)),
    ("outliers first", lambda r: (0 if r.outliers else 1, r.name)),
    ("state", lambda r: (0, r.state)),
)
"""Sort orders `s` cycles through: name, key (missing values last)."""


def mini_bar(values: Sequence[float]) -> str:
    """One block per position, its height the marginal rate (0 → blank, 1 → full block)."""
    return "".join(BLOCKS[max(0, min(8, round(v * 8)))] for v in values)


def sparkline(points: Sequence[tuple[float, float]], width: int = 12) -> str:
    """The last `width` points scaled to their own maximum."""
    values = [v for _, v in points][-width:]
    if not values:
        return ""
    top = max(values)
    if top <= 0:
        return SPARK[0] * len(values)
    return "".join(SPARK[min(7, int(v / top * 7.999))] for v in values)


def cells(row: FleetRow) -> list[Text]:
    """The table cells of one row; outlier cells reversed in the error colour."""
    bad = "bold reverse red"
    state_style = {"up": "green", "idle": "dim", "down": "bold red", "stale": "yellow", "restarted": "yellow"}
    flag = Text("⚠", style="bold red") if row.outliers else Text(" ")
    run_wait = "—"
    if row.running is not None or row.waiting is not None:
        run_wait = f"{fixed(row.running, 0)}/{fixed(row.waiting, 0)}"
    state = row.state + (f" ({row.reason})" if row.state in ("down", "stale") and row.reason else "")
    return [
        flag,
        Text(row.name, style="bold"),
        Text(row.model or "?", overflow="ellipsis"),
        Text(row.method),
        Text("—" if row.k is None else str(row.k), justify="right"),
        Text(state[:48], style=state_style.get(row.state, "")),
        Text(fixed(row.decode_tok_s, 1), justify="right", style=bad if "tok/s" in row.outliers else ""),
        Text(
            "—" if row.acceptance is None else f"{row.acceptance * 100:.1f} %",
            justify="right",
            style=bad if "acceptance" in row.outliers else "",
        ),
        Text(fixed(row.mean_length, 2), justify="right"),
        Text(mini_bar(row.per_position) or "—", style="cyan"),
        Text("—" if row.kv_usage is None else f"{row.kv_usage * 100:.0f} %", justify="right"),
        Text(run_wait, justify="right"),
        Text(sparkline(row.history), style="cyan"),
    ]


class FleetTable(Static, can_focus=True):
    """The fleet's rows as one text block (one line per row, a highlighted cursor line).

    Drawn as a single `Static` rather than a `DataTable`: a refresh re-renders one text block instead
    of updating hundreds of cells, which kept a 32-row refresh well under the CPU budget of the fleet
    view (tests/bench/fleet_scale.py). The cursor stays on the same server across refreshes.
    """

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor(-10)", "Page up", show=False),
        Binding("pagedown", "cursor(10)", "Page down", show=False),
        Binding("home", "cursor(-100000)", "First", show=False),
        Binding("end", "cursor(100000)", "Last", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.rows_shown: list[FleetRow] = []
        self.cursor_row = 0
        self._lines: list[list[Text]] = []

    def show(self, rows: Sequence[FleetRow]) -> None:
        """Replace the rows (already sorted), keeping the cursor on the row with the same key."""
        current = self.selected()
        self.rows_shown = list(rows)
        self._lines = [cells(row) for row in rows]
        if current is not None:
            for i, row in enumerate(rows):
                if row.key == current.key:
                    self.cursor_row = i
                    break
        self.cursor_row = max(0, min(self.cursor_row, len(rows) - 1))
        self._draw()

    def _draw(self) -> None:
        header = [Text(label, style="bold") for _, label in COLUMNS]
        table = [header, *self._lines]
        widths = [max(cell.cell_len for cell in col) for col in zip(*table, strict=True)]
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, line in enumerate(table):
            row = Text(no_wrap=True)
            for j, (cell, width) in enumerate(zip(line, widths, strict=True)):
                pad = width - cell.cell_len
                if j:
                    row.append("  ")
                if cell.justify == "right":
                    row.append(" " * pad)
                    row.append_text(cell)
                else:
                    row.append_text(cell)
                    row.append(" " * pad)
            if i - 1 == self.cursor_row and self.has_focus:
                row.stylize("reverse")
            elif i - 1 == self.cursor_row:
                row.stylize("underline")
            out.append_text(row)
            out.append("\n")
        if not self._lines:
            out.append_text(Text("waiting for the first answers…", style="dim"))
        self.update(out)

    def on_focus(self) -> None:
        self._draw()

    def on_blur(self) -> None:
        self._draw()

    def action_cursor(self, step: int) -> None:
        self.move_cursor(row=self.cursor_row + step)

    def move_cursor(self, *, row: int) -> None:
        """Put the cursor on `row` (clamped)."""
        self.cursor_row = max(0, min(row, len(self.rows_shown) - 1))
        self._draw()
        if isinstance(self.parent, ScrollableContainer):  # keep the cursor line (and the header) in view
            self.parent.scroll_to_region(Region(0, self.cursor_row, 1, 2), animate=False)

    def selected(self) -> FleetRow | None:
        """The row under the cursor."""
        if 0 <= self.cursor_row < len(self.rows_shown):
            return self.rows_shown[self.cursor_row]
        return None
