"""FleetTable: one row per server (and engine), sortable, outliers marked; cells drawn from `FleetRow`s.
GroupTable: one row per group of a large fleet (`core.fleet.groups`). Both build cells only for the
lines in view (a fleet of 1,000 rows costs what a screenful costs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.geometry import Region
from textual.widgets import Static

from mtpwatch.core.fleet.groups import FleetGroup, Spread
from mtpwatch.core.fleet.rows import FleetRow
from mtpwatch.render.numbers import fixed, percent

BLOCKS = " ▁▂▃▄▅▆▇█"

COLUMNS = (
    " ",
    "server",
    "model",
    "method",
    "k",
    "state",
    "tok/s",
    "accept",
    "mean len",
    "per pos",
    "KV",
    "run/wait",
    "tok/s 60 s",
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


def sparkline(points: Sequence[tuple[float, float]], width: int = 12) -> str:
    """The last `width` points scaled to their own maximum."""
    values = [v for _, v in points][-width:]
    if not values:
        return ""
    top = max(values)
    if top <= 0:
        return BLOCKS[1] * len(values)
    return "".join(BLOCKS[1 + min(7, int(v / top * 7.999))] for v in values)


def cells(row: FleetRow) -> list[Text]:
    """The table cells of one row; outlier cells reversed in the error colour."""
    bad = "bold reverse red"
    state_style = {
        "up": "green",
        "idle": "dim",
        "down": "bold red",
        "stale": "yellow",
        "restarted": "yellow",
        "missing": "bold red",
    }
    flag = Text("⚠", style="bold red") if row.outliers else Text(" ")
    run_wait = "—"
    if row.running is not None or row.waiting is not None:
        run_wait = f"{fixed(row.running, 0)}/{fixed(row.waiting, 0)}"
    why = row.reason if row.state in ("down", "stale", "missing") else "; ".join(row.why)
    state = row.state + (f" ({why})" if why else "")
    return [
        flag,
        Text(row.name, style="bold"),
        Text(row.model or "?", overflow="ellipsis"),
        Text(row.method),
        Text("—" if row.k is None else str(row.k), justify="right"),
        Text(state[:64], style=state_style.get(row.state, "")),
        Text(fixed(row.decode_tok_s, 1), justify="right", style=bad if "tok/s" in row.outliers else ""),
        Text(
            percent(row.acceptance, style="spaced"),
            justify="right",
            style=bad if "acceptance" in row.outliers else "",
        ),
        Text(fixed(row.mean_length, 2), justify="right"),
        # one block per position, its height the marginal rate (0 → blank, 1 → full block)
        Text("".join(BLOCKS[max(0, min(8, round(v * 8)))] for v in row.per_position) or "—", style="cyan"),
        Text(percent(row.kv_usage, 0, style="spaced"), justify="right"),
        Text(run_wait, justify="right"),
        Text(sparkline(row.history), style="cyan"),
    ]


class LineTable(Static, can_focus=True):
    """Rows as one text block (one line per row, a highlighted cursor line), cells built for the
    lines in view only; the cursor stays on the same server across refreshes. A `Static` rather than
    a `DataTable`: a refresh re-renders one text block instead of updating hundreds of cells, which
    kept a 32-row refresh well under the fleet view's CPU budget (tests/bench/fleet_scale.py).
    """

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="row-up"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="row-down"),
        Binding("pageup", "cursor(-10)", "Page up", show=False, id="row-page-up"),
        Binding("pagedown", "cursor(10)", "Page down", show=False, id="row-page-down"),
        Binding("home", "cursor(-100000)", "First", show=False, id="row-first"),
        Binding("end", "cursor(100000)", "Last", show=False, id="row-last"),
    ]

    DEFAULT_CSS = "LineTable { width: auto; height: auto; }"
    COLUMNS: tuple[str, ...] = COLUMNS
    EMPTY = "waiting for the first answers…"
    cells_of: staticmethod[[Any], list[Text]] = staticmethod(cells)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.rows_shown: list[Any] = []
        self.cursor_row = 0
        self.drawn = 0
        """Lines whose cells the last draw built (the lines in view)."""

    def show(self, rows: Sequence[Any]) -> None:
        """Replace the rows (already sorted), keeping the cursor on the row with the same key."""
        current = self.selected()
        self.rows_shown = list(rows)
        if current is not None:
            self.cursor_row = next((i for i, r in enumerate(rows) if r.key == current.key), self.cursor_row)
        self.cursor_row = max(0, min(self.cursor_row, len(rows) - 1))
        self.redraw()

    def in_view(self) -> range:
        """The rows on screen (the scroll container's window, a line of slack either side)."""
        parent = self.parent
        n = len(self.rows_shown)
        if isinstance(parent, ScrollableContainer) and parent.size.height > 0:
            top = max(0, int(parent.scroll_y) - 2)
            return range(top, min(n, top + parent.size.height + 3))
        return range(min(n, 60))

    def redraw(self) -> None:
        """Draw the rows in view (the screen calls it when the view scrolls)."""
        header = [Text(label, style="bold") for label in self.COLUMNS]
        view = self.in_view()
        lines = {i: self.cells_of(self.rows_shown[i]) for i in view}
        self.drawn = len(lines)
        widths = [max(cell.cell_len for cell in col) for col in zip(header, *lines.values(), strict=True)]
        out = Text(no_wrap=True, overflow="ellipsis")
        for i in range(-1, len(self.rows_shown)):
            line = header if i < 0 else lines.get(i)
            if line is None:
                out.append("\n")  # out of view: a blank line keeps the scroll height
                continue
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
            if i == self.cursor_row and self.has_focus:
                row.stylize("reverse")
            elif i == self.cursor_row:
                row.stylize("underline")
            out.append_text(row)
            out.append("\n")
        if not self.rows_shown:
            out.append_text(Text(self.EMPTY, style="dim"))
        self.update(out)

    on_focus = on_blur = on_resize = redraw  # the cursor line's style follows the focus

    def action_cursor(self, step: int) -> None:
        self.move_cursor(row=self.cursor_row + step)

    def move_cursor(self, *, row: int) -> None:
        """Put the cursor on `row` (clamped)."""
        self.cursor_row = max(0, min(row, len(self.rows_shown) - 1))
        self.redraw()
        if isinstance(self.parent, ScrollableContainer):  # keep the cursor line (and the header) in view
            self.parent.scroll_to_region(Region(0, self.cursor_row, 1, 2), animate=False)

    def selected(self) -> Any:
        """The row under the cursor (None when there is none)."""
        if 0 <= self.cursor_row < len(self.rows_shown):
            return self.rows_shown[self.cursor_row]
        return None


def _spread(s: Spread | None, fmt: str, scale: float = 1.0) -> str:
    if s is None:
        return "—"
    return " ".join(f"{v * scale:{fmt}}" for v in s)


GROUP_COLUMNS = (
    " ",
    "group (model · method k)",
    "n",
    "out",
    "stale",
    "down",
    "miss",
    "accept % p10 p50 p90",
    "mean len",
    "tok/s p10 p50 p90",
    "up/idle/rst",
)
"""The group table's columns, what needs attention leftmost (an 80-column terminal shows those)."""


def group_cells(g: FleetGroup) -> list[Text]:
    """The cells of one group; counts that need attention in the error colour."""
    c = g.counts

    def alarm(n: int) -> Text:
        return Text(str(n), justify="right", style="bold red" if n else "dim")

    return [
        Text("⚠", style="bold red") if g.attention else Text(" "),
        Text(g.name, style="bold", overflow="ellipsis"),
        Text(str(len(g.rows)), justify="right"),
        alarm(len(g.outliers)),
        alarm(c["stale"]),
        alarm(c["down"]),
        alarm(c["missing"]),
        Text(_spread(g.acceptance, "4.1f", 100), justify="right"),
        Text("—" if g.mean_length is None else f"{g.mean_length[1]:.2f}", justify="right"),
        Text(_spread(g.tok_s, "5.0f"), justify="right"),
        Text(f"{c['up']}/{c['idle']}/{c['restarted']}", justify="right"),
    ]


class FleetTable(LineTable):
    """The fleet's rows, one per server (and engine)."""


class GroupTable(LineTable):
    """A large fleet by group: Enter lists a group's instances."""

    COLUMNS = GROUP_COLUMNS
    cells_of = staticmethod(group_cells)


GROUP_SORTS: tuple[tuple[str, Callable[[FleetGroup], tuple[float, ...]]], ...] = (
    ("attention", lambda g: (-g.attention, -len(g.rows))),
    ("instances", lambda g: (-len(g.rows), -g.attention)),
    ("acceptance p50", lambda g: (g.acceptance is None, g.acceptance[1] if g.acceptance else 0.0)),
    ("tok/s p50", lambda g: (g.tok_s is None, -(g.tok_s[1] if g.tok_s else 0.0))),
)
"""Sort orders of the group table."""
