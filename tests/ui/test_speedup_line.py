"""The A/B speed-up line at any width: the k advisor and the warnings take a row of their own rather
than be cut at the screen's edge (`ui.widgets.packed_line`, `markup.speedup_groups`)."""

from __future__ import annotations

import pytest
from rich.cells import cell_len
from textual.app import App, ComposeResult

from mtpwatch.core.sweeps.advisor import advise
from mtpwatch.session.diagnosis import MTP_SLOWER, ab_warnings
from mtpwatch.ui.markup.ab import advice_groups, speedup_groups
from mtpwatch.ui.pack import Group
from mtpwatch.ui.widgets.packed_line import PackedLine
from tests.waits import wait_for

KEEP = advise([0.9, 0.85], step_s=0.022, baseline_step_s=0.020)
LOWER = advise([0.6, 0.2, 0.05, 0.01], step_s=0.060, baseline_step_s=0.020)


class _Host(App[None]):
    """A `PackedLine` alone, to resize."""

    CSS = "PackedLine { height: auto; max-height: 3; text-wrap: nowrap; text-overflow: ellipsis; }"

    def compose(self) -> ComposeResult:
        yield PackedLine()


def _line(*, compact: bool, slower: bool = False) -> tuple[Group, ...]:
    speedups = [0.8, 0.9, 0.85] if slower else [2.07]
    warnings = ab_warnings(speedups, method="MTP", race=False, models=("m", "m"), tokens=(300, 300))
    return speedup_groups(2.07, 2.07, 12, race=False, label="B/A", warnings=warnings, compact=compact)


@pytest.mark.parametrize(
    ("size", "advice", "slower", "rows"),
    [
        ((80, 24), KEEP, False, 2),  # the advice on the second row, whole
        ((80, 24), LOWER, True, 3),  # the warning and the advice each on a row
        ((80, 24), None, False, 1),
        ((160, 48), KEEP, False, 1),  # wide: one row, as before
    ],
)
async def test_the_speedup_line_takes_the_rows_it_needs_and_cuts_no_label(
    size: tuple[int, int], advice: object, slower: bool, rows: int
) -> None:
    from mtpwatch.ui.app import make_app
    from tests.ui import samples

    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=size) as pilot:
        await samples.load(app, "ab")
        screen = app.screen
        compact = screen.has_class("-narrow")
        assert compact is (size[0] == 80)
        groups = _line(compact=compact, slower=slower) + advice_groups(advice)  # type: ignore[arg-type]
        console = screen.query_one("#console")
        await wait_for(pilot, lambda: console.region, "the console's rows")
        console_rows = console.region
        line = screen.query_one("#speedup", PackedLine)
        line.show(groups)
        await wait_for(pilot, lambda: line.size.height == rows, f"the line's {rows} rows")
        shown = str(line.render()).split("\n")
        assert len(shown) == rows == line.size.height, shown
        assert all(cell_len(row) <= line.content_region.width for row in shown)  # nothing cut
        joined = " ".join(shown)
        assert "(decode tok/s, client)" in shown[0]
        if advice is KEEP:
            assert "k advisor: keep k=2 (predicted best of 0…2, 1 request at a time)" in joined
        if advice is LOWER:
            assert f"k advisor: k={LOWER.best_k} predicted" in joined and "1 request at a time)" in joined
        assert (MTP_SLOWER in joined) is slower
        # The rows it took came from the panels above (a relayout), not from the console below.
        assert console.region == console_rows
        assert screen.query_one("#panels").region.bottom == line.region.y


async def test_a_resize_packs_the_line_again() -> None:
    app = _Host()
    async with app.run_test(size=(200, 10)) as pilot:
        line = app.query_one(PackedLine)
        line.show(_line(compact=True) + advice_groups(KEEP))
        await pilot.pause()
        assert line.size.height == 1
        await pilot.resize_terminal(80, 10)
        await pilot.pause()
        assert line.size.height == 2
        assert str(line.render()).split("\n")[1].startswith("k advisor: keep k=2")
        line.update("speed-up B/A (paired runs) — waiting for the first pair")  # a plain update: one row
        await pilot.pause()
        assert line.size.height == 1
        await pilot.resize_terminal(200, 10)
        await pilot.pause()
        assert "waiting for the first pair" in str(line.render())  # a resize keeps a plain update


async def test_a_resize_chooses_the_wording_again() -> None:
    """After a resize from 80 columns to 200 the line said `of 12` (its 80-column wording) until the
    next prompt; it takes `over 12 prompt(s)` where that fits, and `of 12` where it saves a row (76
    columns: with the label `B/A` both wordings take two rows at 80)."""
    app = _Host()
    async with app.run_test(size=(76, 10)) as pilot:
        line = app.query_one(PackedLine)
        advice = advice_groups(KEEP)
        line.show(_line(compact=False) + advice, _line(compact=True) + advice)
        await pilot.pause()
        rows = str(line.render()).split("\n")
        assert "median 2.07× of 12 (decode tok/s, client)" in rows[0] and len(rows) == line.size.height == 2
        await pilot.resize_terminal(200, 10)
        await pilot.pause()
        assert "median 2.07× over 12 prompt(s) (decode tok/s, client)" in str(line.render())
        assert line.size.height == 1
        await pilot.resize_terminal(76, 10)
        await pilot.pause()
        assert "of 12 (decode tok/s, client)" in str(line.render()).split("\n")[0]
