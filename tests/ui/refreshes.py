"""Record the regions a widget asks to repaint (its `refresh` calls), for tests of what is repainted."""

from __future__ import annotations

from typing import Any

from textual.geometry import Region
from textual.screen import Screen
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


def record_relayouts(screen: Screen[Any]) -> list[int]:
    """From now on, each relayout of `screen` (`Screen._refresh_layout`: the whole screen laid out
    again) appends 1 to the returned list."""
    calls: list[int] = []
    relayout = screen._refresh_layout

    def spy(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        relayout(*args, **kwargs)

    screen._refresh_layout = spy  # type: ignore[method-assign]
    return calls
