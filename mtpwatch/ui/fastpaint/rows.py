"""RowRefresh: a widget whose whole-widget `refresh()` can be narrowed to chosen rows for one call.

Textual repaints a widget whole when its content is updated (`Static.update`) or its border title
or subtitle is assigned. A widget that knows which rows changed wraps that call in
`with self.refreshing_rows(regions):`. This leans on where Textual calls `refresh()` (an
implementation detail), so it narrows only while the fast paint is on (`gate`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from textual.geometry import Region
from textual.widget import Widget
from typing_extensions import Self

from mtpwatch.ui.fastpaint.gate import gate


class RowRefresh(Widget):
    """`refreshing_rows(regions)`: within it, a `refresh()` with no regions repaints `regions` (in
    content coordinates; none with an area: nothing; None: the whole widget)."""

    refresh_rows: tuple[Region, ...] | None = None

    @contextmanager
    def refreshing_rows(self, regions: tuple[Region, ...] | None) -> Iterator[None]:
        self.refresh_rows = regions if gate().on else None
        try:
            yield
        finally:
            self.refresh_rows = None

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        rows = self.refresh_rows
        if rows is not None and not regions and not layout and not recompose:
            regions = tuple(row for row in rows if row.area)
            if not regions:
                return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
