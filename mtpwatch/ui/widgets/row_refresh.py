"""RowRefresh: a widget whose whole-widget `refresh()` can be narrowed to chosen rows for one call.

Textual repaints a widget whole when its content is updated (`Static.update`) or its border title
or subtitle is assigned. A widget that knows which rows changed sets `_rows` around that call;
`refresh()` with no regions then repaints those rows alone (none with an area: nothing).
"""

from __future__ import annotations

from textual.geometry import Region
from textual.widget import Widget
from typing_extensions import Self


class RowRefresh(Widget):
    """`_rows`, while set: the regions (content coordinates) a `refresh()` with none repaints."""

    _rows: tuple[Region, ...] | None = None

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        rows = self._rows
        if rows is not None and not regions and not layout and not recompose:
            regions = tuple(row for row in rows if row.area)
            if not regions:
                return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
