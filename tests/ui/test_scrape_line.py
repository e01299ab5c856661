"""The panel's first line says how /metrics is read: `scrape: filtered, 3.4 KB` or `full page (why)`."""

from __future__ import annotations

import pytest

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.session.views import ServerView
from mtpwatch.session.watch import ServerFeed
from mtpwatch.sim.harness import running_sim
from mtpwatch.ui.markup.panel import render_header


def test_header_shows_the_scrape_source_when_known() -> None:
    view = ServerView(label="A", url="http://h:8000", status="up", scrape="full page (filter ignored)")
    line1 = render_header(view).splitlines()[0]
    assert line1.endswith("[dim]scrape: full page (filter ignored)[/]")
    assert "scrape:" not in render_header(ServerView(label="A", url="http://h:8000", status="up"))


@pytest.mark.parametrize(
    ("mode", "start"), [("honour", "filtered, "), ("empty", "full page (filtered answer")]
)
async def test_feed_view_carries_the_clients_scrape_state(mode: str, start: str) -> None:
    async with running_sim(speed=400, metrics_filter=mode) as url:
        feed = ServerFeed(ServerSpec(label="A", url=url), DisplaySettings())
        try:
            assert feed.view("10 s").scrape == ""
            await feed.poll()
            await feed.poll()
            assert feed.state().status == "up"
            assert feed.view("10 s").scrape.startswith(start)
        finally:
            await feed.client.aclose()
