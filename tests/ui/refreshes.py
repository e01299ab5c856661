"""Record the regions a widget asks to repaint (its `refresh` calls), for tests of what is repainted."""

from __future__ import annotations

from typing import Any

from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget


def record_refreshes(widget: Widget) -> list[tuple[Region, ...]]:
    """From now on, each repaint the widget asks for appends its regions to the returned list: a
    `widget.refresh(*regions)` call, or a `TokenStream._repaint(*regions)` (a frame composed at
    once, `frame_now`, or a `refresh` when it declines: recorded once).

    A call with no regions appends the widget's `refresh_rows` when it has them (a `RowStatic`'s
    `update` refreshes the rows `update_lines` chose), else ()."""
    calls: list[tuple[Region, ...]] = []
    refresh = widget.refresh
    repaint = getattr(widget, "_repaint", None)
    in_repaint = False

    def spy(*regions: Region, **kwargs: Any) -> Any:
        if not in_repaint:
            calls.append(regions or getattr(widget, "refresh_rows", None) or ())
        return refresh(*regions, **kwargs)

    def repaint_spy(*regions: Region) -> None:
        nonlocal in_repaint
        calls.append(regions)
        in_repaint = True
        try:
            assert repaint is not None
            repaint(*regions)
        finally:
            in_repaint = False

    widget.refresh = spy  # type: ignore[method-assign]
    if repaint is not None:
        widget._repaint = repaint_spy  # type: ignore[attr-defined]
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
