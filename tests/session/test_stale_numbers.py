"""Numbers of a server that went away, or whose last scrape is old, say their age, never "now"
(issue 40, item 7)."""

from __future__ import annotations

import time

from textual.content import Content

from mtpwatch.commands.options import free_port
from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.session.views import STALE_AFTER_S, stale_age
from mtpwatch.session.watch import ServerFeed
from mtpwatch.sim.harness import SimThread
from mtpwatch.ui.markup.panel import compact_numbers, render_gauges, render_numbers


def _plain(markup: str) -> str:
    return " ".join(Content.from_markup(markup).plain.split())


def test_stale_age_is_none_only_while_up_and_recent() -> None:
    assert stale_age("up", 100.0, 105.0) is None
    assert stale_age("up", 100.0, 100.0 + STALE_AFTER_S + 5) == STALE_AFTER_S + 5
    assert stale_age("down", 100.0, 103.0) == 3.0
    assert stale_age("down", None, 103.0) is None  # nothing scraped: nothing to date
    assert stale_age("up", 100.0, 125.0, after_s=30.0) is None  # scrapes 15 s apart (--interval 15)


async def test_a_killed_servers_gauges_and_rates_say_their_age() -> None:
    port = free_port()
    t = [time.monotonic()]
    feed = ServerFeed(
        ServerSpec(label="A", url=f"http://127.0.0.1:{port}"), DisplaySettings(), clock=lambda: t[0]
    )
    with SimThread(preset="gemma4-e4b-gb10", spec=True, port=port):
        for _ in range(2):
            await feed.poll()
            t[0] += 1.0
        assert feed.watch.status == "up"
        live = feed.view("10 s")
        assert live.as_of_s is None and "(server, now)" in _plain(render_numbers(live, 200))
    deadline = time.monotonic() + 60
    while feed.watch.status != "down":  # the server is gone: the next scrapes fail
        assert time.monotonic() < deadline, "the feed never saw the server down"
        await feed.poll()
    t[0] += 15.0
    dead = feed.view("10 s")
    assert dead.as_of_s is not None and dead.as_of_s >= 15.0
    age = f"as of {dead.as_of_s:.0f} s ago"
    for text in (render_numbers(dead, 200), compact_numbers(dead, 78), render_gauges(dead)):
        plain = _plain(text)
        assert "now)" not in plain and age in plain, plain
    wide = _plain(render_numbers(dead, 200))
    assert wide.count(age) == 4  # acceptance, tok/s, latency and the gauges: none reads as current
    await feed.close()
