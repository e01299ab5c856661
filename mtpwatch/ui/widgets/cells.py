"""Which cells of a row changed between two strips: the runs a repaint writes (bytes over SSH; the
screens' `ui/fastpaint/compositor.RowCompositor` writes each dirty span from its first cell).
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.geometry import Region
from textual.strip import Strip

Cell = tuple[str, object]
"""(character, style) of one cell."""

MERGE_GAP = 8
"""Unchanged cells between two changed runs below which they are written as one: moving the cursor
(`ESC[row;colH`, 6–8 bytes) and starting the next run's style again cost about as much as writing
those cells."""


def cells(strip: Strip) -> list[Cell] | None:
    """(character, style) per cell; None when a character is not one column wide."""
    out: list[Cell] = []
    for segment in strip:
        if segment.control:
            continue
        out.extend((char, segment.style) for char in segment.text)
    return out if len(out) == strip.cell_length else None


def changed_regions(y: int, old: Strip | None, new: Strip | None, width: int) -> list[Region]:
    """Row `y`'s runs of cells drawn differently in `new` than in `old` (`changed_runs`); the whole
    row (`width` cells) when either is unknown (None) or holds a character that is not one column wide."""
    cells_old = None if old is None else cells(old)
    cells_new = None if new is None else cells(new)
    if cells_old is None or cells_new is None:
        return [Region(0, y, width, 1)]
    return [Region(x0, y, x1 - x0, 1) for x0, x1 in changed_runs(cells_old, cells_new)]


def changed_runs(
    old: Sequence[Cell | None], new: Sequence[Cell | None], merge_gap: int = MERGE_GAP
) -> list[tuple[int, int]]:
    """The columns [x0, x1) of each run of cells that differ between two rows (the shorter one
    padded), runs less than `merge_gap` cells apart written as one; [] when none differ."""
    n = max(len(old), len(new))
    a = [*old, *([None] * (n - len(old)))]
    b = [*new, *([None] * (n - len(new)))]
    runs: list[tuple[int, int]] = []
    start = last = -1
    for x in range(n):
        if a[x] == b[x]:
            continue
        if start < 0:
            start = x
        elif x - last - 1 >= merge_gap:
            runs.append((start, last + 1))
            start = x
        last = x
    if start >= 0:
        runs.append((start, last + 1))
    return runs
