"""ThroughputChart: client and server tok/s over time, drawn with plotext at most twice a second."""

from __future__ import annotations

from typing import Any

from textual.reactive import var
from textual_plotext import PlotextPlot


class ThroughputChart(PlotextPlot):
    """Client decode tok/s (this prompt) and server tok/s (generation_tokens), one point per second.

    A plotext redraw costs milliseconds to tens of milliseconds, so the chart redraws on
    its own timer, only when its data changed and it is visible.
    """

    REDRAW_INTERVAL = 1.0

    server_series: var[tuple[float, ...]] = var(())
    """Server tok/s from Δgeneration_tokens, oldest first; assigning never repaints."""
    client_series: var[tuple[float, ...]] = var(())
    """Client decode tok/s of the current prompt, oldest first."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._drawn: tuple[tuple[float, ...], tuple[float, ...]] | None = None

    def on_mount(self) -> None:
        self.set_interval(self.REDRAW_INTERVAL, self.redraw_if_needed, name="chart-redraw")
        self.replot()

    def redraw_if_needed(self) -> None:
        """Replot when the data changed and the chart is on screen."""
        if (self.server_series, self.client_series) != self._drawn and self.is_on_screen:
            self.replot()

    def replot(self) -> None:
        """Draw the series now (tests and screenshots call this directly)."""
        plt = self.plt
        plt.clear_figure()
        plt.title("tok/s — server (engine, all requests) · client (this prompt, decode)")
        plt.xlabel("seconds ago")
        drew = False
        for series, label, marker in (
            (self.server_series, "server", "braille"),
            (self.client_series, "client", "hd"),
        ):
            if series:
                n = len(series)
                plt.plot([i - n + 1 for i in range(n)], list(series), label=label, marker=marker)
                drew = True
        if drew:
            plt.ylim(0, None)
        self._drawn = (self.server_series, self.client_series)
        self.refresh()
