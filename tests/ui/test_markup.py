"""ui/markup/ is the one place plain text becomes markup: text from a user, a recording or a server
shows as it was written, brackets included."""

from __future__ import annotations

from textual.content import Content

from mtpwatch.session.views import Answer, PromptSummary
from mtpwatch.ui.markup.ab import render_lossless
from mtpwatch.ui.markup.titles import render_fleet_status, render_replay_title, render_title


def _plain(markup: str) -> str:
    return Content.from_markup(markup).plain


def test_a_title_with_brackets_is_shown_as_written() -> None:
    title = "[b]lab[/b] [red]box"
    live = render_title("10 s", title=title, schedule="alternate", paused=True, demo_sent=None, suggest=False)
    assert _plain(live).startswith("window 10 s  ·  A/B alternate  ·  ")
    assert f"  ·  {title}  ·  " in _plain(live)
    replay = render_replay_title(("▶", "00:01.0", "00:30.0", "1×"), "prompt", title=title, paused=False)
    assert _plain(replay).startswith("▶ replay 00:01.0 / 00:30.0 · 1×  ·  window this prompt  ·  ")
    assert title in _plain(replay)


def test_the_fleet_status_line_shows_errors_and_names_as_written() -> None:
    line = render_fleet_status("HTTP 400: [bad] query", ["gpu[0] (tok/s)"], 12.4, 3, 4)
    assert _plain(line) == (
        "HTTP 400: [bad] query  ·  ⚠ outliers: gpu[0] (tok/s)  ·  scrape cycle 12 ms (median of the last 40)"
        "  ·  3/4 rows answering · rule: F1"
    )
    assert "scrape cycle" not in _plain(render_fleet_status("", [], None, 0, 0))


def test_the_lossless_line_quotes_the_diverging_text_as_written() -> None:
    summary = PromptSummary(tokens=3, ttft_s=0.1, decode_tok_s=10.0)
    a = Answer(summary=summary, text="same [b]start then A")
    b = Answer(summary=summary, text="same [b]start then B")
    assert _plain(render_lossless(a, b)).endswith("after “same [b]start then ”: 'A' vs 'B'")
    assert _plain(render_lossless(a, a)).startswith("lossless: outputs identical")


def test_under_lossy_verification_a_difference_is_marked_expected_and_identical_stays_identical() -> None:
    summary = PromptSummary(tokens=3, ttft_s=0.1, decode_tok_s=10.0)
    a = Answer(summary=summary, text="one two", token_ids=(1, 2, 3))
    b = Answer(summary=summary, text="one six", token_ids=(1, 2, 4))
    lossy = "fly verification is lossy"
    plain = render_lossless(a, b, lossy=lossy)
    assert _plain(plain) == f"expected, {lossy}: lossless: outputs differ at token 3 (id 3 vs 4)"
    assert "$error" not in plain  # not shown as a failure
    assert "$error" in render_lossless(a, b)  # standard verification: the same difference is one
    assert _plain(render_lossless(a, a, lossy=lossy)).startswith("lossless: outputs identical")
