"""The chart and the number rows repaint the runs of cells that changed, not their rows (bytes over SSH)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip

from mtpwatch.ui.widgets.cells import MERGE_GAP, cells, changed_runs
from mtpwatch.ui.widgets.row_static import RowStatic
from mtpwatch.ui.widgets.throughput_chart import ThroughputChart
from tests.ui.conftest import needs_fast_paint
from tests.ui.refreshes import record_refreshes


def test_changed_runs_are_the_cells_that_differ_with_close_runs_merged() -> None:
    red, blue = Style(color="red"), Style(color="blue")
    row = Strip([Segment("  ⣀⣀  ", red), Segment("ab", blue)])

    def runs(new: Strip, gap: int = MERGE_GAP) -> list[tuple[int, int]]:
        a, b = cells(row), cells(new)
        assert a is not None and b is not None
        return changed_runs(a, b, gap)

    assert runs(row) == []
    assert runs(Strip([Segment("  ⣀⣤  ", red), Segment("ab", blue)])) == [(3, 4)]
    assert runs(Strip([Segment("  ⣀⣀  ", red), Segment("ab", red)])) == [(6, 8)]  # a style is a change
    assert runs(Strip([Segment("x ⣀⣀  ", red), Segment("aB", blue)])) == [(0, 8)]  # 6 apart: merged
    assert runs(Strip([Segment("x ⣀⣀  ", red), Segment("aB", blue)]), gap=3) == [(0, 1), (7, 8)]
    assert runs(Strip([Segment("  ⣀⣀  ", red)])) == [(6, 8)]  # shorter: the cells it lost
    wide = Strip([Segment("界", red)])
    assert cells(wide) is None  # a character two columns wide: not a cell a character
    assert changed_runs([], []) == []


async def test_a_new_second_repaints_only_where_the_curve_moved() -> None:
    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield ThroughputChart()

    app = Host()
    async with app.run_test(size=(80, 12)) as pilot:
        chart = app.query_one(ThroughputChart)
        chart.show((30.0,) * 50 + (40.0,) * 10, ())  # a steady rate that stepped up 10 s ago
        chart.replot()
        await pilot.pause()
        dirty = record_refreshes(chart)
        chart.show((30.0,) * 49 + (40.0,) * 11, ())  # one second later: the step moved left
        chart.replot()
        width = chart.content_region.width
        (regions,) = dirty
        assert regions and all(r.height == 1 for r in regions)
        assert all(r.width <= 4 for r in regions), regions  # around the step, not whole rows
        assert sum(r.width for r in regions) < width
        assert chart._strips == chart._build()  # what is kept is what a fresh build draws


@needs_fast_paint
async def test_a_row_with_two_numbers_apart_repaints_each_number() -> None:
    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield RowStatic()

    first = "acceptance [b]65 %[/b] · mean length 2.30 tokens/step · [b]96[/b] drafts\nKV cache 0 %"
    second = "acceptance [b]66 %[/b] · mean length 2.30 tokens/step · [b]99[/b] drafts\nKV cache 0 %"
    app = Host()
    async with app.run_test(size=(100, 4)) as pilot:
        row = app.query_one(RowStatic)
        row.update_lines(None, first)
        await pilot.pause()
        row.update_lines(first, first)  # known rows: drawn line by line from now on
        await pilot.pause()
        dirty = record_refreshes(row)  # `update` refreshes the rows `update_lines` chose
        row.update_lines(first, second)
        assert dirty == [(Region(12, 0, 1, 1), Region(50, 0, 1, 1))]  # "65"→"66", "96"→"99"
