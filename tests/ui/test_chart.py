"""The throughput chart repaints the cells that changed, not its rows (bytes over SSH)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip

from mtpwatch.ui.widgets.throughput_chart import ThroughputChart, changed_cells


def test_changed_cells_spans_the_first_to_the_last_difference() -> None:
    red, blue = Style(color="red"), Style(color="blue")
    row = Strip([Segment("  ⣀⣀  ", red), Segment("ab", blue)])
    assert changed_cells(row, row) is None
    assert changed_cells(row, Strip([Segment("  ⣀⣤  ", red), Segment("ab", blue)])) == (3, 4)
    assert changed_cells(row, Strip([Segment("  ⣀⣀  ", red), Segment("ab", red)])) == (6, 8)  # style
    assert changed_cells(row, Strip([Segment("x ⣀⣀  ", red), Segment("aB", blue)])) == (0, 8)
    assert changed_cells(row, Strip([Segment("  ⣀⣀  ", red)])) == (6, 8)  # shorter: the cells it lost
    assert changed_cells(Strip([]), Strip([])) is None


async def test_a_new_second_repaints_only_where_the_curve_moved() -> None:
    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield ThroughputChart()

    app = Host()
    async with app.run_test(size=(80, 12)) as pilot:
        chart = app.query_one(ThroughputChart)
        chart.server_series = (30.0,) * 50 + (40.0,) * 10  # a steady rate that stepped up 10 s ago
        chart.replot()
        await pilot.pause()
        dirty: list[tuple[Region, ...]] = []
        refresh = chart.refresh

        def spy(*regions: Region, **kwargs: bool) -> ThroughputChart:
            dirty.append(regions)
            return refresh(*regions, **kwargs)

        chart.refresh = spy  # type: ignore[method-assign]
        chart.server_series = (30.0,) * 49 + (40.0,) * 11  # one second later: the step moved left
        chart.replot()
        width = chart.content_region.width
        (regions,) = dirty
        assert regions and all(r.height == 1 for r in regions)
        assert all(r.width <= 4 for r in regions), regions  # around the step, not whole rows
        assert sum(r.width for r in regions) < width
        assert chart._strips == chart._build()  # what is kept is what a fresh build draws
