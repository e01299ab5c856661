"""The A/B view at 80×24 (issue 40, item 6): laid out stacked from the first frame, the suggested
prompt shown from its start, title and footer whole, the answer's hint gone once an answer
streams and its rows given to the answer meanwhile, the bandwidth with its window; the help with
no scrollbar glyphs in its margin (item 10)."""

from __future__ import annotations

import dataclasses
import re

from rich.console import Console
from textual import events
from textual.content import Content
from textual.pilot import Pilot

from mtpwatch.ui.app import MtpWatchApp, make_app
from mtpwatch.ui.markup.panel import ANSWERS_HINT, compact_numbers
from mtpwatch.ui.markup.titles import render_replay_title, render_title
from mtpwatch.ui.screens.monitor import MonitorScreen
from mtpwatch.ui.widgets.prompt_input import PromptInput
from mtpwatch.ui.widgets.server_panel import ServerPanel
from tests.ui import samples
from tests.waits import wait_for

TITLE = "mtpwatch demo (gemma4-e4b-gb10, simulated)"


def _screen_text(app: MtpWatchApp, width: int) -> list[str]:
    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text().rstrip("\n").split("\n")


async def test_the_first_frame_is_laid_out_for_the_terminal_it_opens_in() -> None:
    """The layout classes were set on the screen's first Resize, after its panels were mounted and a
    first frame drawn side by side at 80×24: now they are there when the panels mount."""
    app = make_app(samples.config("ab"), autostart=False)
    seen: list[frozenset[str]] = []

    def hook(message: object) -> None:
        screen = app.screen_stack[-1] if app.screen_stack else None
        mounted = isinstance(message, events.Mount)
        if mounted and isinstance(screen, MonitorScreen) and not seen and screen.query(ServerPanel):
            seen.append(frozenset(screen.classes))

    async with app.run_test(size=(80, 24), message_hook=hook) as pilot:
        await wait_for(pilot, lambda: bool(seen), "the panels mounted")
        assert {"-narrow", "-short"} <= seen[0] and not {"-wide", "-tall"} & seen[0], seen[0]


async def test_the_suggested_prompt_shows_its_start_and_typing_replaces_it() -> None:
    prompt = (
        "Explain in three short paragraphs how speculative decoding with a multi-token-prediction drafter"
    )
    app = make_app(dataclasses.replace(samples.config("ab"), prefill=prompt), autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        box = app.screen.query_one(PromptInput)
        await wait_for(pilot, lambda: box.has_focus, "the prompt box focused")
        await pilot.pause()
        assert box.value == prompt and box.scroll_x == 0 and box.cursor_position == 0
        line = _screen_text(app, 80)[box.region.y]
        assert line.strip().startswith("Explain in three short paragraphs"), line  # was `…culative decoding`
        await pilot.press("h")
        assert box.value == "h"  # the selection was the whole suggestion


async def _ab_80x24(pilot: Pilot[int], app: MtpWatchApp) -> None:
    await pilot.pause()
    await samples.load(app, "ab")
    await pilot.pause()


async def test_title_and_footer_fit_80_columns() -> None:
    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await _ab_80x24(pilot, app)
        lines = _screen_text(app, 80)
        assert lines[-1].rstrip().endswith("esc Cancel"), lines[-1]  # every key whole, none cut
        title = Content.from_markup(str(app.screen.query_one("#title-bar").render())).plain
        assert len(title) <= 78 and "window 10 s" in title, title
    for suggest, demo in ((True, None), (False, 3)):
        line = render_title("10 s", title=TITLE, schedule="alternate", paused=False, demo_sent=demo,
                            suggest=suggest, width=78)  # fmt: skip
        plain = Content.from_markup(line).plain
        assert len(plain) <= 78 and TITLE in plain and "window 10 s" in plain, plain
        assert ("Enter" in plain) is suggest and ("#3" in plain) is (demo is not None)
        # paused too: what says the state comes first; the bar cuts the title's end (…)
        paused = render_title("10 s", title=TITLE, schedule="alternate", paused=True, demo_sent=demo,
                              suggest=suggest, width=78)  # fmt: skip
        assert re.search(r"window 10 s · +PAUSED +· mtpwatch demo", Content.from_markup(paused).plain), paused
    replay = render_replay_title(
        ("▶", "00:12.0", "01:30.0", "1×"), "10 s", title=TITLE, paused=False, width=78
    )
    # the player and the window first, whole; the bar cuts the recording's title at its end (…)
    assert Content.from_markup(replay).plain.startswith("▶ 00:12.0/01:30.0 1× · window 10 s · mtpwatch demo")
    wide = render_title("10 s", title=TITLE, schedule="alternate", paused=False, demo_sent=None, suggest=True)
    assert wide.endswith("? or F1 help · Ctrl+Q quit[/]")  # without a width: all of it, as before


async def test_the_hint_goes_and_the_summary_row_goes_to_the_answer_while_it_streams() -> None:
    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        a = app.screen.query(ServerPanel).first()
        summary, answer = a.query_one(".summary"), a.query_one(".answer")
        # Geometry, not a row count taken once: the panel's other rows may still be settling (a
        # loaded machine lays the metrics out later), which moves the answer pane but not this rule.
        await wait_for(
            pilot,
            lambda: summary.region.height == 1 and a.stream.region.bottom == summary.region.y,
            "the summary's one row under the answer",
        )
        assert "answers and a summary line" in str(summary.render())
        a.begin_answer("hello")
        a.stream.feed("some text")
        await wait_for(
            pilot,
            lambda: not summary.region and a.stream.region.bottom == answer.content_region.bottom,
            "the summary's row to the answer",
        )
        assert "answers and a summary line" not in str(summary.render())
        a.add_summary(samples.summary(False))
        await wait_for(
            pilot,
            lambda: summary.region.height == 1 and a.stream.region.bottom == summary.region.y,
            "the summary's row back",
        )
        assert str(summary.render()).startswith("#1 ")
    assert ANSWERS_HINT.startswith("[dim]answers")


def test_the_bandwidth_says_its_window_at_80_columns_in_two_rows() -> None:
    base, mtp = samples.view_baseline(), samples.view_mtp()
    a = Content.from_markup(compact_numbers(base, 78, gauges=False)).plain.split("\n")
    b = Content.from_markup(compact_numbers(mtp, 78, gauges=False)).plain.split("\n")
    assert any(re.search(r"BW \d+ % of 273 GB/s \(analytic, 10 s\)", line) for line in a), a
    assert len(b) == 2 and all(len(line) <= 78 for line in b), b
    assert re.search(r"BW \d+ % of 273 GB/s \(server \+ analytic, 10 s\)$", b[1]), b


async def test_the_help_has_no_scrollbar_glyphs_and_says_where_the_reader_is() -> None:
    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("f1")
        await wait_for(pilot, lambda: app.screen.query("#help-body"), "the help")
        body = app.screen.query_one("#help-body")
        await wait_for(pilot, lambda: bool(body.border_subtitle), "the position line")
        assert str(body.border_subtitle).startswith("lines 1–")
        lines = _screen_text(app, 160)[body.region.y + 1 : body.region.bottom - 1]
        inside = [line[body.region.x : body.region.right] for line in lines]
        assert not any(re.search("[▁▂▃▄▅▆▇]", line) for line in inside), inside
        await pilot.press("pagedown")
        await wait_for(pilot, lambda: not str(body.border_subtitle).startswith("lines 1–"), "scrolled")


def test_a_simulated_clock_is_noted_on_the_border_and_takes_no_row_at_80x24() -> None:
    """`sim ×10 clock` beside BW took a third row of numbers in each A/B pane (their answers had 3)."""
    from mtpwatch.ui.markup.panel import render_gauges

    for view in (samples.view_baseline(), samples.view_mtp()):
        sped = dataclasses.replace(view, bandwidth=dataclasses.replace(view.bandwidth, clock_speed=10.0))
        lines = Content.from_markup(compact_numbers(sped, 78, gauges=False)).plain.split("\n")
        assert len(lines) == 2 and all(len(line) <= 78 for line in lines), lines
        assert "sim ×10" not in "\n".join(lines) and "BW" in "\n".join(lines)
        assert Content.from_markup(render_gauges(sped)).plain.endswith("(server, now) · sim ×10 clock")
        # where the gauges stay in the numbers (wider panes), the phrase keeps its note
        assert "(sim ×10 clock)" in compact_numbers(sped, 200)


async def test_the_replay_footer_is_whole_at_80_columns() -> None:
    """Replay's footer ended `^p paletten` at 80 columns: its player keys are on the console's row."""
    from pathlib import Path

    from mtpwatch.session.replay import ReplaySource

    source = ReplaySource.open(
        Path(__file__).parents[1] / "data" / "recordings" / "vllm-0.32-cpu-ngram-k4.mtpw.gz"
    )
    app = make_app(source.config, replay=source)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await wait_for(pilot, lambda: _screen_text(app, 80)[-1].strip(), "the footer drawn")
        footer = _screen_text(app, 80)[-1].rstrip()
        assert footer.endswith("esc Cancel") or footer.endswith(("Clear", "Measure", "Window", "Help")), (
            footer
        )
        assert "palette" not in footer and "Play/pause" not in footer, footer
        console = _screen_text(app, 80)[-2]
        assert "Space play/pause" in console and "←/→ 10 s" in console, console
