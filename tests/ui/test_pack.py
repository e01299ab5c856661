"""`pack.cell_width`'s fast path (the panels' own tags removed, the rest measured) against Textual's
parser (`Content.from_markup(...).cell_length`), on every line the panels draw and on random text."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from textual.content import Content
from textual.markup import escape

from mtpwatch.ui.markup.panel import (
    compact_numbers,
    render_bars,
    render_header,
    render_numbers,
    render_summary,
)
from mtpwatch.ui.markup.roofline import render_bandwidth, render_roofline_hidden
from mtpwatch.ui.pack import cell_width
from tests.ui import samples

TAGS = (
    "[b]",
    "[/]",
    "[dim]",
    "[i]",
    "[$accent]",
    "[b reverse $accent]",
    "[$text-warning]",
    "[/b]",
    "[b $accent]",
)


def _library(markup: str) -> int:
    return Content.from_markup(markup).cell_length


def _panel_lines() -> list[str]:
    lines: list[str] = []
    base, mtp = samples.view_baseline(), samples.view_mtp()
    odd = replace(mtp, model="org/model[1]-v2 [beta] \\", facts=("weights [x] 1.0 GiB", "KV 2 GiB"))
    for view in (base, mtp, odd):
        assert view.bandwidth is not None
        for width in (None, 56, 76, 96, 200):
            blocks = [
                render_header(view, width=width),
                render_numbers(view, width),
                compact_numbers(view, width),
                render_bars(
                    view.per_position, view.per_position_conditional, window=view.window, columns=width
                ),
                render_bandwidth(view.bandwidth, view.window, width, method=view.method),
                render_roofline_hidden(view.bandwidth, width),
                render_summary(2, samples.summary(True), width=width),
            ]
            lines += [line for block in blocks for line in block.split("\n")]
    return lines


def test_the_fast_width_equals_the_parsed_width_on_every_panel_line() -> None:
    lines = _panel_lines()
    assert len(lines) > 200
    wrong = [(line, cell_width(line), _library(line)) for line in lines if cell_width(line) != _library(line)]
    assert not wrong, wrong[:3]
    assert any("\\[" in line for line in lines)  # escaped server text was among them (parsed)


@given(
    st.lists(
        st.one_of(
            st.sampled_from(TAGS), st.text(max_size=12).map(escape), st.text(alphabet="[]\\ab/$ ", max_size=6)
        ),
        max_size=8,
    )
)
def test_the_fast_width_equals_the_parsed_width_on_random_markup(parts: list[str]) -> None:
    markup = "".join(parts)
    try:
        expected = _library(markup)
    except Exception:  # not markup Textual accepts: the panels never write it
        return
    assert cell_width(markup) == expected, markup
