"""Wide-layout lines in a narrower panel (an A/B pane at 160 columns is 76 cells): shorter words,
then wraps between labelled parts, never a label cut at the panel's edge (`ui.pack.fit`)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.content import Content

from mtpwatch.ui.app import make_app
from mtpwatch.ui.markup.panel import SUMMARY_FULL_CELLS, render_header, render_numbers, render_summary
from mtpwatch.ui.markup.roofline import render_bandwidth
from mtpwatch.ui.pack import Group, fit
from mtpwatch.ui.widgets.server_panel import CHART_ROWS_AB, MIN_ANSWER_ROWS, ServerPanel
from mtpwatch.ui.widgets.throughput_chart import ThroughputChart
from tests.ui import samples
from tests.ui.conftest import ROWS, panel_rows

A_B_PANE = 76
"""Cells of a row in an A/B pane at 160 columns (80 a panel, less its border and padding)."""
NARROW_A_B_PANE = 56
"""The same at 120 columns."""


def _plain(markup: str) -> list[str]:
    return Content.from_markup(markup).plain.split("\n")


def _widest(markup: str) -> int:
    return max(Content.from_markup(line).cell_length for line in markup.split("\n"))


def test_fit_keeps_the_full_line_takes_the_first_shorter_wording_that_fits_whole_else_packs_the_last() -> (
    None
):
    full = "speed 12.5 tok/s · steps 5.0 (server, 10 s)"
    shorter = lambda: [Group(("12.5 tok/s", "5.0 steps"), "(server, 10 s)")]  # noqa: E731
    shortest = lambda: [Group(("12.5", "5.0"), "(server, 10 s)")]  # noqa: E731
    assert fit(full, None, shorter) == full  # before the first layout: nothing is fitted
    assert fit(full, len(full), shorter) == full
    assert fit(full, 40, shorter, shortest) == "12.5 tok/s · 5.0 steps (server, 10 s)"
    assert fit(full, 30, shorter, shortest) == "12.5 · 5.0 (server, 10 s)"
    # nothing fits whole: the last wording is packed, each part with its label
    assert fit(full, 20, shorter, shortest).split("\n") == ["12.5 (server, 10 s)", "5.0 (server, 10 s)"]


@pytest.mark.parametrize("size", [(120, 40), (160, 48), (200, 50)], ids=["120x40", "160x48", "200x50"])
@pytest.mark.parametrize("mode", ["ab", "single"])
async def test_no_panel_line_is_wider_than_its_row(mode: str, size: tuple[int, int]) -> None:
    """At 160×48 an A/B pane cut 9 of its lines (labels, scopes, the GPU's peak), at 200×50 four;
    a single server's metrics column at 160×48 cut six. At 120×40 (56-cell A/B panes) the compact
    summary line and the chart's legend were cut."""
    app = make_app(samples.config(mode), autostart=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await samples.load(app, mode)
        await pilot.pause(0.2)
        for panel in app.screen.query(ServerPanel):
            shown = panel_rows(panel) | {"summary": panel._shown.get(".summary", "")}
            for name, selector in [*ROWS.items(), ("summary", ".summary")]:
                widget = panel.query_one(selector)
                if not widget.display or not shown[name]:
                    continue
                width = widget.content_region.width
                assert _widest(shown[name]) <= width, (name, width, _plain(shown[name]))
            chart = panel.query_one(ThroughputChart)
            if chart.display:  # the legend's last scope ends inside the chart, not at its edge
                legend = chart._build()[0].text.rstrip()
                assert legend.endswith(")") and len(legend) < chart.content_region.width, legend
            if mode == "ab" and size == (160, 48):
                assert panel.stream.region.height >= 8  # and the answer keeps its rows


def test_a_narrow_roofline_names_the_gpu_and_its_peak_and_says_its_regime_instead_of_the_summary() -> None:
    view = samples.view_mtp()
    assert view.bandwidth is not None
    wide = render_bandwidth(view.bandwidth, "10 s", None, method="mtp")
    assert "of GB10 (simulated)'s 273 GB/s peak (analytic, while decoding, 10 s)" in "\n".join(_plain(wide))
    assert view.bandwidth.summary.split()[0] in wide  # the sentence, wrapped under the terms
    narrow = render_bandwidth(view.bandwidth, "10 s", A_B_PANE, method="mtp")
    lines = _plain(narrow)
    assert _widest(narrow) <= A_B_PANE
    assert lines[0] == "roofline · GB10 (simulated) 273 GB/s peak (analytic, 10 s)"
    assert any(
        line.startswith("bandwidth ") and line.endswith("of peak (analytic, while decoding)")
        for line in lines
    )
    assert view.bandwidth.regime and any(line.endswith(view.bandwidth.regime) for line in lines)
    assert any(line.startswith("→ acceptance binds") for line in lines)  # what binds, and why
    assert not any(view.bandwidth.summary[:30] in line for line in lines)


def test_an_idle_narrow_roofline_keeps_the_assumed_tau_on_one_row() -> None:
    """Before the first prompt τ is assumed (k + 1): its note wrapped the ceiling to a second row,
    a row the block then held while the answer streamed (`ServerPanel._set`)."""
    view = samples.view_mtp()
    assert view.bandwidth is not None
    idle = replace(view.bandwidth, tau_source="assumed: every draft accepted (upper bound)", tok_s=None)
    lines = _plain(render_bandwidth(idle, "10 s", A_B_PANE, method="mtp"))
    ceiling = [line for line in lines if line.startswith("ceiling")]
    assert ceiling == [f"ceiling tok/s: baseline 29.3 · MTP at τ {idle.tau:.2f} (assumed: τ = k + 1): 67.3"]


def test_a_narrow_header_shows_the_facts_that_fit_whole_and_counts_the_rest() -> None:
    view = samples.view_mtp()
    assert len(view.facts) == 4
    wide = _plain(render_header(view))[1]
    assert wide.endswith(" · ".join(view.facts) + " (server log)")
    line = _plain(render_header(view, width=96))[1]  # an A/B pane at 200 columns
    assert len(line) <= 96
    assert line.startswith("google/gemma-4-E4B-it · vLLM 0.32.0 · MTP k=2 · ")
    shown = line.split(" · ")[3:-1]
    assert shown and all(fact in view.facts for fact in shown)  # whole facts only
    assert line.endswith(f" · +{len(view.facts) - len(shown)} more (server log)")
    narrow = _plain(render_header(view, width=A_B_PANE))[1]
    assert narrow == "google/gemma-4-E4B-it · vLLM 0.32.0 · MTP k=2 · +4 more (server log)"


def test_narrow_numbers_take_shorter_words_and_keep_every_label() -> None:
    view = samples.view_mtp()
    lines = _plain(render_numbers(view, A_B_PANE))
    assert all(len(line) <= A_B_PANE for line in lines)
    assert lines[0] == "accept 66 % · len 2.31 · 169 drafts (server, 10 s, this request)"
    assert [line.rsplit(" (", 1)[1] for line in lines] == [
        "server, 10 s, this request)",
        "server, 10 s, engine-wide)",
        "server, 10 s)",
        "server, now)",
    ]
    assert render_numbers(view, None) == render_numbers(view, 200)  # wide: the wording is unchanged


def test_a_summary_line_wider_than_its_row_takes_the_compact_form() -> None:
    summary = samples.summary(True)
    wide = render_summary(2, summary)
    assert _widest(wide) > A_B_PANE
    assert render_summary(2, summary, width=A_B_PANE) == render_summary(2, summary, compact=True)
    assert _widest(render_summary(2, summary, width=A_B_PANE)) <= A_B_PANE
    assert render_summary(2, summary, width=200) == wide


def test_a_summary_wider_than_its_row_even_compact_wraps_between_its_labelled_parts() -> None:
    summary = samples.summary(True)
    compact = render_summary(2, summary, compact=True)
    assert _widest(compact) > NARROW_A_B_PANE  # 74 cells
    lines = _plain(render_summary(2, summary, width=NARROW_A_B_PANE))
    assert lines == [
        "#2 256 tok · TTFT 43 ms · 39.0 tok/s (client)",
        "acc 66 % (server, request)",
    ]
    assert render_summary(2, summary, compact=True, width=A_B_PANE) == compact  # fits: one line


async def test_a_short_ab_pane_gives_the_roofline_rows_to_the_answer_and_takes_them_back() -> None:
    """At 160×40 the A/B view's B pane showed 2 rows of its answer under the metrics: the roofline
    block gives its rows to the answer there (its one phrase stays in the numbers, and says so),
    and comes back when the terminal grows."""
    from tests.waits import wait_for

    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        await samples.load(app, "ab")
        b = app.screen.query(ServerPanel).last()
        await wait_for(pilot, lambda: b.has_class("-roomless"), "the roofline to give way")
        await wait_for(pilot, lambda: b.stream.region.height >= MIN_ANSWER_ROWS, "the answer's rows")
        assert not b.bandwidth_visible  # and the GPU sampler stops with it (`PanelFeeds.poll_forever`)
        numbers = _plain(panel_rows(b)["numbers"])
        assert numbers[-1] == "BW 58 % of 273 GB/s (analytic) · roofline hidden: too few rows"
        await pilot.resize_terminal(160, 48)
        await wait_for(pilot, lambda: not b.has_class("-roomless"), "the roofline back at 160×48")
        await wait_for(pilot, lambda: b.bandwidth_visible, "the roofline block shown")
        assert "roofline hidden" not in panel_rows(b)["numbers"]
        assert b.stream.region.height >= 8


async def test_shorter_ab_panes_give_the_chart_then_the_bars_then_the_verdict_to_the_answer() -> None:
    """At 120×40 B's answer kept 4 rows beside its metrics even without the roofline, at 120×36 one,
    and stacked at 110×36 two: the chart gives way next (its tok/s are in the numbers), then the bars
    with the wide numbers (k = 8), and stacked the verdict. Each comes back on a larger terminal."""
    from tests.waits import wait_for

    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await samples.load(app, "ab")
        a, b = app.screen.query(ServerPanel)
        chart = b.query_one(ThroughputChart)
        await wait_for(
            pilot, lambda: b.has_class("-chartless") and not chart.display, "the chart to give way"
        )
        assert not b.has_class("-cramped") and b.query_one(".bars").display
        await wait_for(pilot, lambda: b.stream.region.height >= MIN_ANSWER_ROWS, "the answer's rows")
        # the newest prompt's summary, wrapped in the 2 rows the summary has at this size
        assert _plain(b._shown[".summary"]) == [
            "#2 256 tok · TTFT 43 ms · 39.0 tok/s (client)",
            "acc 66 % (server, request)",
        ]
        assert a.query_one(ThroughputChart).display  # A's metrics leave it the rows: it keeps its chart

        eight = replace(
            samples.view_mtp(),
            per_position=(0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.15),
            per_position_conditional=(0.8, 0.87, 0.86, 0.83, 0.8, 0.75, 0.67, 0.75),
        )
        b.show(eight)
        await wait_for(
            pilot,
            lambda: b.has_class("-cramped") and not b.query_one(".bars").display,
            "the bars to give way at k = 8",
        )
        await wait_for(pilot, lambda: b.stream.region.height >= MIN_ANSWER_ROWS, "the answer's rows")
        assert "pos 80 70 60 50 40 30 20 15 %" in "\n".join(_plain(panel_rows(b)["numbers"]))  # compact
        await pilot.resize_terminal(110, 36)  # stacked
        await wait_for(
            pilot,
            lambda: not b.query_one(".verdict").display and b.stream.region.height > 2,
            "the verdict to give way to the answer",
        )
        b.show(samples.view_mtp())  # k = 2 again
        await pilot.resize_terminal(200, 50)
        # one condition, not a wait then asserts: after a resize the classes and the layout settle
        # over several refreshes, which a loaded machine spreads apart
        await wait_for(
            pilot,
            lambda: (
                not b.has_class("-roomless")
                and chart.display
                and b.query_one(".bars").display
                and b.query_one(".verdict").display
                and chart.outer_size.height == CHART_ROWS_AB
            ),  # the rows `_roomless` counts for it
            "the chart, the bars and the verdict back",
        )


def test_summaries_in_rows_of_one_width_take_one_form() -> None:
    """A's line (no acceptance) fitted its row whole and said "decode 18.1 tok/s" where B's took the
    compact "38.2 tok/s": the form follows the row's width, so both panes read alike."""
    from mtpwatch.session.views import PromptSummary

    widest = PromptSummary(999, 9.999, 999.9, 1.0, 9.99, scope="this request")
    assert _widest(render_summary(12, widest)) <= SUMMARY_FULL_CELLS  # the full form fits its threshold
    baseline = PromptSummary(tokens=128, ttft_s=0.05, decode_tok_s=18.1)
    for width in (A_B_PANE, NARROW_A_B_PANE, SUMMARY_FULL_CELLS - 1):
        a = _plain(render_summary(1, baseline, width=width))[0]
        b = _plain(render_summary(1, samples.summary(True), width=width))[0]
        assert "decode" not in a and "decode" not in b, (a, b)  # one form: compact, both
    assert "decode 18.1 tok/s" in _plain(render_summary(1, baseline, width=SUMMARY_FULL_CELLS))[0]
