"""`start --headless`'s status line: drawn from the feed's `ServerView` through `render.numbers`."""

from __future__ import annotations

from mtpwatch.commands.start_headless import status_line
from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.session.scrapes import Page
from mtpwatch.session.views import ServerView
from mtpwatch.session.watch import ServerFeed


def view(**fields: object) -> ServerView:
    return ServerView(label="status", url="http://127.0.0.1:8000", **fields)  # type: ignore[arg-type]


def test_a_speculating_server_shows_the_window_and_the_whole_life() -> None:
    line = status_line(
        view(status="up", speculative=True, server_tok_s=123.45, running=2.0, acceptance_rate=0.625,
             mean_acceptance_length=2.875, acceptance_since_start=0.5, window="10 s")
    )  # fmt: skip
    assert line == (
        "status: 123.45 tok/s over 10 s | running 2 | acceptance 62.5% | mean length 2.88 | since start 50.0%"
    )


def test_no_window_yet_says_nothing_and_a_plain_server_says_so() -> None:
    assert status_line(view(status="up", speculative=True)) is None  # one scrape: no window
    line = status_line(view(status="up", speculative=False, server_tok_s=10.0, running=0.0))
    assert line is not None and line.endswith("| no speculative decoding")
    assert status_line(view(status="down", status_detail="disconnected since 12:00:01 (refused)")) == (
        "status: disconnected since 12:00:01 (refused)"
    )


def test_since_start_is_the_counters_totals_through_the_one_formula() -> None:
    feed = ServerFeed(ServerSpec(label="s", url="http://127.0.0.1:9"), DisplaySettings())
    feed.watch.take(Page(MetricsSnapshot(draft_tokens=400.0, accepted=100.0, drafts=100.0)), 1.0)
    assert feed.view("10 s").acceptance_since_start == 0.25
