"""Record the regions a widget asks to repaint (its `refresh` calls), for tests of what is repainted."""

from __future__ import annotations

from typing import Any

from textual.geometry import Region
from textual.widget import Widget


def record_refreshes(widget: Widget) -> list[tuple[Region, ...]]:
    """From now on, each `widget.refresh(*regions)` call appends its regions to the returned list.

    A call with no regions appends the widget's `_rows` when it has them (a `RowStatic`'s
    `update` refreshes the rows `update_lines` chose), else ()."""
    calls: list[tuple[Region, ...]] = []
    refresh = widget.refresh

    def spy(*regions: Region, **kwargs: Any) -> Any:
        calls.append(regions or getattr(widget, "_rows", None) or ())
        return refresh(*regions, **kwargs)

    widget.refresh = spy  # type: ignore[method-assign]
    return calls
