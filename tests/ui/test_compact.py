"""80 columns: numbers packed into the width, none cut from its label (`ui.pack`, `panel.compact_numbers`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.content import Content

from mtpwatch.session.views import BandwidthView, ServerView
from mtpwatch.ui.markup.panel import compact_numbers, render_gauges
from mtpwatch.ui.pack import Group, pack
from tests.ui.conftest import WaitUntil, needs_fast_paint, panel_rows

LABELS = (
    "(server, 10 s, engine-wide)",
    "(server, 10 s)",
    "(analytic, 10 s)",
    "(server + analytic, 10 s)",
    "(server, now)",
)

H100_K8 = ServerView(
    label="B",
    url="http://127.0.0.1:8000",
    status="up",
    speculative=True,
    k=8,
    acceptance_rate=0.42,
    mean_acceptance_length=4.33,
    per_position=(0.81, 0.71, 0.43, 0.38, 0.33, 0.29, 0.19, 0.19),
    server_tok_s=125.4,
    mean_step_s=0.1571,
    kv_cache_usage=0.031,
    running=16,
    waiting=3,
    bandwidth=BandwidthView(peak_gbps=3350.0, percent_of_peak=100.0, ceiling_baseline_tok_s=54.0),
)
"""The widest numbers a panel shows: k=8, three-digit tok/s and ms, a four-digit peak."""


def _plain(markup: str) -> list[str]:
    return Content.from_markup(markup).plain.split("\n")


def test_a_group_that_does_not_fit_splits_between_items_and_each_part_keeps_its_label() -> None:
    groups = [Group(("aaaa", "bbbb", "cccc"), "(L1)", new_line=True), Group(("dd", "ee"), "(L2)")]
    assert _plain(pack(groups, None)) == ["aaaa · bbbb · cccc (L1) · dd · ee (L2)"]
    assert _plain(pack(groups, 25)) == ["aaaa · bbbb · cccc (L1)", "dd · ee (L2)"]
    assert _plain(pack(groups, 16)) == ["aaaa · bbbb (L1)", "cccc (L1)", "dd · ee (L2)"]
    # A group that fits on a line of its own starts one rather than being split.
    assert _plain(pack(groups, 21)) == ["aaaa · bbbb (L1)", "cccc (L1)", "dd · ee (L2)"]
    assert _plain(pack(groups, 23)) == ["aaaa · bbbb · cccc (L1)", "dd · ee (L2)"]
    assert _plain(pack([*groups, Group(("f",), "(L3)")], 25)) == [
        "aaaa · bbbb · cccc (L1)",
        "dd · ee (L2) · f (L3)",
    ]
    # An item wider than the line is left for the widget's ellipsis, alone on its line.
    assert _plain(pack([Group(("x" * 30,), "(L)"), Group(("y",), "(M)")], 10)) == ["x" * 30 + " (L)", "y (M)"]


def test_markup_takes_no_cells() -> None:
    groups = [Group(("[b]58 %[/]", "[$text-warning]2.16[/]"), "[dim](L)[/]")]
    assert _plain(pack(groups, len("58 % · 2.16 (L)"))) == ["58 % · 2.16 (L)"]


@pytest.mark.parametrize("width", [78, 64, 58])  # 58: the k=8 positions and their label
def test_the_widest_numbers_fit_and_every_number_keeps_its_label(width: int) -> None:
    lines = _plain(compact_numbers(H100_K8, width))
    assert all(len(line) <= width for line in lines), lines
    text = "\n".join(lines)
    figures = ("accept 42 %", "len 4.33", "pos 81 71 43 38 33 29 19 19 %", "125.4 tok/s", "ITL 157.1 ms/step")
    assert all(figure in text for figure in figures), text
    assert "BW 100 % of 3350 GB/s (analytic, 10 s)" in text
    for line in lines:  # every line ends with a label, and a label follows each group's part
        assert line.endswith(LABELS), line
    accept_lines = [line for line in lines if "accept" in line or "pos" in line]
    assert all("(server, 10 s, engine-wide)" in line for line in accept_lines)


def test_the_headline_groups_start_their_lines() -> None:
    """Acceptance first and speed second, at any width: A and B stacked read the same rows."""
    off = replace(H100_K8, speculative=False, per_position=())
    for view in (H100_K8, off):
        lines = _plain(compact_numbers(view, 200))
        assert lines[0].startswith(("accept", "acceptance —")) and lines[1].startswith("125.4 tok/s")


def test_the_gauges_for_the_border_say_what_they_are() -> None:
    gauges = Content.from_markup(render_gauges(H100_K8)).plain
    assert gauges == "KV 3 % · running 16 · waiting 3 (server, now)"
    assert "KV" not in compact_numbers(H100_K8, 78, gauges=False)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_80x24_puts_the_gauges_on_the_bottom_border(size: tuple[int, int]) -> None:
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.widgets.server_panel import ServerPanel
    from tests.ui import samples

    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=size) as pilot:
        await samples.load(app, "ab")
        await pilot.pause()
        for panel in app.screen.query(ServerPanel):
            subtitle = Content.from_markup(panel.border_subtitle or "").plain
            if size == (80, 24):
                assert subtitle.startswith("KV ") and subtitle.endswith("(server, now)"), subtitle
                assert "KV" not in panel_rows(panel)["numbers"]
            else:
                assert subtitle == "" and "(server, now)" in panel_rows(panel)["numbers"]


@pytest.mark.parametrize(
    ("scope", "label"),
    [
        ("this request", "(server, request)"),
        ("this request (vLLM per-request metrics)", "(server, request)"),
        ("engine-wide", "(server, engine)"),
    ],
)
def test_a_prompts_compact_line_says_what_its_acceptance_covers(scope: str, label: str) -> None:
    """80 columns: "(server)" alone did not say whether other requests were in the window."""
    from mtpwatch.session.views import PromptSummary
    from mtpwatch.ui.markup.panel import render_summary

    summary = PromptSummary(
        tokens=512,
        ttft_s=0.075,
        decode_tok_s=125.4,
        acceptance_rate=0.58,
        mean_acceptance_length=2.16,
        scope=scope,
    )
    line = Content.from_markup(render_summary(12, summary, compact=True)).plain
    assert line == f"#12 512 tok · TTFT 75 ms · 125.4 tok/s (client) · acc 58 % {label}"
    assert len(line) <= 78


@needs_fast_paint
async def test_a_gauge_that_changes_repaints_the_bottom_border_alone(wait_until: WaitUntil) -> None:
    """80×24: the gauges' border row is what the next frame writes; the panel is not repainted whole
    (a border title's assignment repaints all of it: ~2 KB for a digit at 80×24)."""
    from rich.console import Console
    from textual.geometry import Region

    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.fastpaint.compositor import RowCompositor
    from mtpwatch.ui.widgets.server_panel import ServerPanel
    from tests.ui import samples
    from tests.ui.refreshes import record_refreshes

    written: list[str] = []
    partial = RowCompositor.render_partial_update
    console = Console(width=80, color_system="truecolor")

    def recorded(self: RowCompositor) -> Any:
        update = partial(self)
        written.append(update.render_segments(console) if update is not None else "")
        return update

    app = make_app(samples.config("single"), autostart=False)
    RowCompositor.render_partial_update = recorded  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await samples.load(app, "single")
            await pilot.pause()
            panel = app.screen.query_one(ServerPanel)
            refreshes = record_refreshes(panel)
            written.clear()
            panel.show(replace(samples.view_mtp(), kv_cache_usage=0.57))
            await wait_until(pilot, lambda: any("KV 57 %" in out for out in written))
            offset = panel.content_offset
            border_row = Region(-offset.x, panel.region.height - 1 - offset.y, panel.region.width, 1)
            assert refreshes == [(border_row,)]
    finally:
        RowCompositor.render_partial_update = partial  # type: ignore[method-assign]
    out = next(out for out in written if "KV 57 %" in out)
    assert "running" in out and "accept" not in out  # the border's row, not the numbers above it
