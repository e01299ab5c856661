"""ThroughputChart: client and server tok/s over the last minute, drawn in braille by `render_line`.

A plotext chart rebuilt its whole figure on every repaint (~20 ms for a panel-sized chart, more
than everything else the idle monitor does), so this chart rasterises its two series itself: one
pass over ≤ 60 points per series into a dot grid (≈0.5 ms), cached as strips until the data or
the size change. It redraws at most `REDRAW_HZ` times a second, only when the series changed and
it is visible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

from rich.segment import Segment
from textual import events
from textual.geometry import Region
from textual.strip import Strip

from mtpwatch.render.numbers import fixed
from mtpwatch.ui.fastpaint.plain import PlainLines
from mtpwatch.ui.widgets.cells import changed_regions

POINTS = 60
"""Seconds of history (one point per second)."""
_BRAILLE = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""Dot bits of a braille cell by (row 0-3, column 0-1)."""


def nice_ceiling(value: float) -> float:
    """The smallest 1/2/2.5/5 × 10^n at or above `value` (an axis maximum), at least 1."""
    if value <= 1:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    return next(step * scale for step in (1.0, 2.0, 2.5, 5.0, 10.0) if step * scale >= value)


def rasterise(
    series: Sequence[Sequence[float]], width: int, height: int, y_max: float, span: int = POINTS
) -> list[list[tuple[int, int]]]:
    """Dots of each series on a `width`×`height` cell grid: per cell (braille bits, last series drawn).

    Point i of a series sits at its age in seconds, right-aligned (the newest point is at the right
    edge, `span` seconds span the width); consecutive points are joined dot column by dot column.
    """
    grid = [[(0, -1)] * width for _ in range(height)]
    dots_x, dots_y = 2 * width, 4 * height

    def plot(x: int, y: int, index: int) -> None:
        row = dots_y - 1 - y
        cy, cx = row // 4, x // 2
        bits = grid[cy][cx][0]
        grid[cy][cx] = (bits | _BRAILLE[row % 4][x % 2], index)

    for index, values in enumerate(series):
        n = len(values)
        prev: tuple[int, int] | None = None
        for i, v in enumerate(values):
            age = n - 1 - i
            x = round((span - 1 - age) * (dots_x - 1) / (span - 1))
            y = round(min(max(v / y_max, 0.0), 1.0) * (dots_y - 1))
            if x < 0:
                continue
            if prev is None:
                plot(x, y, index)
            else:
                x0, y0 = prev
                last = y0
                for xx in range(x0 + 1, x + 1):
                    yy = round(y0 + (y - y0) * (xx - x0) / (x - x0))
                    for fill in range(min(last, yy), max(last, yy) + 1):
                        plot(xx, fill, index)
                    last = yy
            prev = (x, y)
    return grid


LEGEND_SCOPES = (("engine, all requests", "this prompt, decode"), ("engine-wide", "this prompt"))
"""The legend's scopes, in full and where the full legend (`LEGEND_CELLS`) is wider than the chart."""
LEGEND_CELLS = len("tok/s  ⣿ server (engine, all requests)  ⣿ client (this prompt, decode)")


class ThroughputChart(PlainLines):
    """Server tok/s (Δgeneration_tokens, engine-wide) and client decode tok/s (this prompt): `show`
    its series (one point per second, oldest first); `replot()` redraws now (tests, screenshots)."""

    REDRAW_HZ = 1.0
    LABEL_WIDTH = 6

    COMPONENT_CLASSES = {"chart--server", "chart--client", "chart--axis"}

    DEFAULT_CSS = """
    ThroughputChart {
        height: 10;
        & > .chart--server { color: $secondary; }
        & > .chart--client { color: $success; }
        & > .chart--axis { color: $text-muted; }
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.server_series: tuple[float, ...] = ()
        self.client_series: tuple[float, ...] = ()
        self._drawn: tuple[Any, ...] | None = None
        self._strips: list[Strip] = []

    def show(self, server: tuple[float, ...], client: tuple[float, ...]) -> None:
        self.server_series = server
        self.client_series = client

    def on_mount(self) -> None:
        self.set_interval(1 / self.REDRAW_HZ, self.redraw_if_needed, name="chart-redraw")

    def redraw_if_needed(self) -> None:
        if self._key() != self._drawn and self.is_on_screen:
            self.replot()

    def _key(self) -> tuple[Any, ...]:
        return (self.server_series, self.client_series, self.content_region.size)

    def replot(self) -> None:
        """Rasterise the series into strips now and repaint the runs of cells that changed
        (`cells.changed_regions`: over SSH every repainted cell is bytes; a steady rate moves few
        dots from one second to the next)."""
        self._drawn = self._key()
        old, self._strips = self._strips, self._build()
        if len(old) != len(self._strips):
            self.refresh()
            return
        width = self.content_region.width
        pairs = enumerate(zip(old, self._strips, strict=True))
        changed = [region for y, (a, b) in pairs if a != b for region in changed_regions(y, a, b, width)]
        if changed:
            self.refresh(*changed)

    def on_resize(self, event: events.Resize) -> None:
        self.replot()

    def _build(self) -> list[Strip]:
        width, height = self.content_region.size
        if width < self.LABEL_WIDTH + 10 or height < 3:
            return []
        base = self.rich_style
        axis = base + self.get_component_rich_style("chart--axis")
        styles = [base + self.get_component_rich_style(f"chart--{name}") for name in ("server", "client")]
        plot_w, plot_h = width - self.LABEL_WIDTH, height - 2
        top = max([*self.server_series, *self.client_series, 0.0])
        y_max = nice_ceiling(top * 1.1)
        series = (self.server_series, self.client_series)
        # The x axis spans the longest series (first sample to now), at most `POINTS`, at least 2: with
        # less than a minute of history the chart spans what there is instead of leaving most of it empty.
        span = max(2, min(POINTS, max(len(values) for values in series)))
        grid = rasterise(series, plot_w, plot_h, y_max, span)
        # A 56-cell A/B pane (120 columns) takes the shorter words: the scopes stay, the detail goes.
        engine, prompt = LEGEND_SCOPES[0] if width >= LEGEND_CELLS else LEGEND_SCOPES[1]
        legend = [
            Segment("tok/s  ", axis),
            Segment("⣿ server", styles[0]),
            Segment(f" ({engine})  ", axis),
            Segment("⣿ client", styles[1]),
            Segment(f" ({prompt})", axis),
        ]
        strips = [Strip(legend).crop_extend(0, width, base)]
        for row in range(plot_h):
            top_label = fixed(y_max, 0 if y_max >= 10 else 1)  # whole numbers from 10 up
            label = top_label if row == 0 else "0" if row == plot_h - 1 else ""
            segments = [Segment(f"{label:>{self.LABEL_WIDTH - 1}}┤", axis)]
            dots = ((chr(0x2800 + bits), styles[index]) if bits else (" ", base) for bits, index in grid[row])
            for style, run in groupby(dots, key=itemgetter(1)):  # one segment per run of a style
                segments.append(Segment("".join(char for char, _ in run), style))
            strips.append(Strip(segments).crop_extend(0, width, base))
        left, mid = f"-{span - 1} s", f"-{(span - 1) / 2:.0f} s"
        labels = f"{left:<{plot_w // 2}}{mid:<{plot_w - plot_w // 2 - 3}}now"
        strips.append(Strip([Segment(" " * self.LABEL_WIDTH + labels, axis)]).crop_extend(0, width, base))
        return strips

    def render_lines(self, crop: Region) -> list[Strip]:
        if self._drawn is None:  # first paint; later ones come from `replot`
            self._drawn = self._key()
            self._strips = self._build()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.content_region.width, self.rich_style)
