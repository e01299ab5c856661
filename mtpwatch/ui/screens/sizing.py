"""A screen's layout from the terminal's size: the app's breakpoint classes before the first paint,
and the cells of the title bar."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen


def size_classes(screen: Screen[Any], width: int, height: int) -> None:
    """Set the app's breakpoint classes (HORIZONTAL_/VERTICAL_BREAKPOINTS) for a `width`×`height`
    terminal on `screen`, as Textual sets them on a Resize. Called from `compose`: Textual sets
    them on the screen's first Resize, after a first frame drawn side by side at 80×24."""
    for breakpoints, size in (
        (screen.app.HORIZONTAL_BREAKPOINTS or [], width),
        (screen.app.VERTICAL_BREAKPOINTS or [], height),
    ):
        reached = [name for at, name in breakpoints if size >= at]
        for _, name in breakpoints:
            screen.set_class(bool(reached) and name == reached[-1], name)


def title_width(screen: Screen[Any]) -> int | None:
    """The title bar's cells: the terminal's, less its padding (None before there is one)."""
    width = screen.app.size.width
    return max(width - 2, 1) if width else None
