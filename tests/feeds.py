"""`server_feeds`: a monitor's feeds as the live `ServerFeed`s they are.

The monitor holds its feeds as `session.sources.Source`s; a test that looks behind the protocol (the
process mtpwatch started, the prompt's own numbers, whether the server was identified) asks for them
here, and fails plainly if one is not a live feed.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from mtpwatch.core.launch.process import ServerProcess
from mtpwatch.session.watch import ServerFeed
from mtpwatch.ui.screens.monitor import MonitorScreen
from tests.waits import wait_for


def monitor_of(screen: object) -> MonitorScreen:
    """`screen` (an app's `app.screen`), checked to be a monitor."""
    assert isinstance(screen, MonitorScreen), f"not a monitor: {screen!r}"
    return screen


def server_feeds(screen: object) -> list[ServerFeed]:
    """A monitor's feeds (`app.screen.feeds`), each checked to be a live `ServerFeed`."""
    screen = monitor_of(screen)
    assert screen.opened, "the monitor opens its driver after its first frame: await opened_feeds(pilot)"
    feeds = [feed for feed in screen.feeds if isinstance(feed, ServerFeed)]
    assert len(feeds) == len(screen.feeds), f"not all live feeds: {screen.feeds!r}"
    return feeds


async def opened_feeds(pilot: Pilot[Any]) -> list[ServerFeed]:
    """`server_feeds` once the monitor's driver has built them (just after the first frame)."""
    await wait_for(pilot, lambda: monitor_of(pilot.app.screen).opened, "the monitor's driver to open")
    return server_feeds(pilot.app.screen)


def server_process(feed: ServerFeed) -> ServerProcess:
    """The server process `feed` started (it must have started one)."""
    assert feed.process is not None, f"{feed.spec.label}: no process"
    return feed.process
