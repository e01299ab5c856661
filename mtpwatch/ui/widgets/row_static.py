"""RowStatic: a Static whose update can repaint only the rows whose text changed.

A `Static.update` repaints the whole widget. Over SSH every repainted cell is bytes, and the panel's
number blocks change a few digits twice a second while the rest stays put.
"""

from __future__ import annotations

from textual.content import Content
from textual.geometry import Region
from textual.widgets import Static
from typing_extensions import Self


class RowStatic(Static):
    """`update_lines(previous, markup)` repaints only the rows whose markup line changed, when every
    line fits on one row (otherwise, and when the line count changes, it is a plain `update`)."""

    _rows: tuple[int, ...] | None = None

    def update_lines(self, previous: str | None, markup: str) -> None:
        """Show `markup`; `previous` is the markup shown before (None: unknown)."""
        content = Content.from_markup(markup)
        old = previous.split("\n") if previous is not None else None
        new = markup.split("\n")
        width = self.content_region.width
        if old is None or len(old) != len(new) or not width:
            self.update(content, layout=old is None or len(old) != len(new))
            return
        if any(line.cell_length > width for line in content.split("\n")):
            self.update(content, layout=False)  # wrapped lines: rows do not map to lines
            return
        self._rows = tuple(y for y, (a, b) in enumerate(zip(old, new, strict=True)) if a != b)
        try:
            self.update(content, layout=False)
        finally:
            self._rows = None

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        rows = self._rows
        if rows is not None and not regions and not layout and not recompose:
            width = self.content_region.width
            regions = tuple(Region(0, y, width, 1) for y in rows)
            if not regions:
                return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
