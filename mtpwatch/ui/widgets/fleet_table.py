"""FleetTable: one row per server (and engine), sortable, outliers marked; cells drawn from `FleetRow`s."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.widgets import DataTable

from mtpwatch.core.fleet.rows import FleetRow

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


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def cells(row: FleetRow) -> list[Text]:
    """The table cells of one row; outlier cells reversed in the error colour."""
    bad = "bold reverse red"
    state_style = {"up": "green", "idle": "dim", "down": "bold red", "stale": "yellow", "restarted": "yellow"}
    flag = Text("⚠", style="bold red") if row.outliers else Text(" ")
    run_wait = "—"
    if row.running is not None or row.waiting is not None:
        run_wait = f"{_num(row.running, '.0f')}/{_num(row.waiting, '.0f')}"
    state = row.state + (f" ({row.reason})" if row.state in ("down", "stale") and row.reason else "")
    return [
        flag,
        Text(row.name, style="bold"),
        Text(row.model or "?", overflow="ellipsis"),
        Text(row.method),
        Text("—" if row.k is None else str(row.k), justify="right"),
        Text(state[:48], style=state_style.get(row.state, "")),
        Text(_num(row.decode_tok_s, ".1f"), justify="right", style=bad if "tok/s" in row.outliers else ""),
        Text(
            "—" if row.acceptance is None else f"{row.acceptance * 100:.1f} %",
            justify="right",
            style=bad if "acceptance" in row.outliers else "",
        ),
        Text(_num(row.mean_length, ".2f"), justify="right"),
        Text(mini_bar(row.per_position) or "—", style="cyan"),
        Text("—" if row.kv_usage is None else f"{row.kv_usage * 100:.0f} %", justify="right"),
        Text(run_wait, justify="right"),
        Text(sparkline(row.history), style="cyan"),
    ]


class FleetTable(DataTable[Text]):
    """The fleet's rows; keeps the cursor on the same server across refreshes."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self.rows_shown: list[FleetRow] = []
        self._cells: list[list[Text]] = []

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def show(self, rows: Sequence[FleetRow]) -> None:
        """Replace the rows (already sorted), keeping the cursor on the row with the same key.

        When the same rows come in the same order (the usual refresh), only cells whose text or
        style changed are updated: a full rebuild of 32 rows × 13 cells costs several ms a frame.
        """
        new_cells = [cells(row) for row in rows]
        keys = [row.key for row in rows]
        if keys == [r.key for r in self.rows_shown] and len(self._cells) == len(rows):
            for row_key, old, new in zip(keys, self._cells, new_cells, strict=True):
                for (col_key, _), a, b in zip(COLUMNS, old, new, strict=True):
                    if a.plain != b.plain or a.style != b.style:
                        self.update_cell(row_key, col_key, b)
            self.rows_shown = list(rows)
            self._cells = new_cells
            return
        current = None
        if self.rows_shown and 0 <= self.cursor_row < len(self.rows_shown):
            current = self.rows_shown[self.cursor_row].key
        self.clear()
        for row, row_cells in zip(rows, new_cells, strict=True):
            self.add_row(*row_cells, key=row.key)
        self.rows_shown = list(rows)
        self._cells = new_cells
        if current is not None:
            for i, row in enumerate(rows):
                if row.key == current:
                    self.move_cursor(row=i, animate=False)
                    break

    def selected(self) -> FleetRow | None:
        """The row under the cursor."""
        if 0 <= self.cursor_row < len(self.rows_shown):
            return self.rows_shown[self.cursor_row]
        return None
