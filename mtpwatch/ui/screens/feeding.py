"""PanelFeeds: each panel of a monitor screen fed by its source.

One `MonitorScreen`'s: start a server its spec launches (the log in the panel's start-up pane),
poll it forever (the GPU sampled only while the panel shows the roofline), and pace the views
(`tick_views`, by `session/view_pacing.ViewPacer`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual.timer import Timer

from mtpwatch.session.sources import Source
from mtpwatch.session.view_pacing import VIEW_HZ, ViewPacer
from mtpwatch.ui.widgets.server_panel import ServerPanel

if TYPE_CHECKING:
    from mtpwatch.ui.screens.monitor import MonitorScreen


class PanelFeeds:
    def __init__(self, screen: MonitorScreen, max_fps: float) -> None:
        self.screen = screen
        self.pacer = ViewPacer(min(VIEW_HZ, max_fps))
        """Panels whose feed changed since their last view, and when each may get its next one."""
        self._timer: Timer | None = None

    async def run_server(self, index: int) -> None:
        """Start the server if its spec says so, then poll it forever."""
        screen = self.screen
        feed, panel = screen.feeds[index], screen.panels[index]
        if feed.state().spec.launch is not None:
            ok = await feed.launch(panel.startup_progress)
            if not ok:
                self.views_due(index, now=True)
                panel.show_pane("startup")
                screen.gate.check()
                return
            panel.show_pane("monitor")
        await self.poll_forever(feed, panel)

    async def poll_forever(self, feed: Source, panel: ServerPanel) -> None:
        """Scrape, sample the GPU only while the roofline panel shows; the view tick draws the result."""
        index = self.screen.feeds.index(feed)
        while True:
            delay = await feed.poll()
            feed.sample_hardware(panel.bandwidth_visible)
            shown = panel.view
            status = feed.state().status
            self.views_due(index, now=shown is None or shown.status != status)  # up → down: at once
            self.screen.gate.check()
            await feed.rest(delay)

    def views_due(self, index: int | None = None, *, now: bool = False) -> None:
        """Feed `index` (None: every feed) changed: its panel gets a fresh view as soon as `ViewPacer`
        allows (at once when its last view is a view period old: a scrape is drawn as it lands)."""
        self.pacer.mark(range(len(self.screen.feeds)) if index is None else (index,))
        self.tick_views(force=now)

    def tick_views(self, *, force: bool = False) -> None:
        """The one way into a panel: build the views of the due feeds whose panels' last view is a
        view period old (all with `force`) over the shown window at the screen's clock (live:
        monotonic; replay: the recording's), shown in one update; a timer takes the others when they
        come of age. Not while paused (collection goes on; the first view after shows the newest)."""
        screen = self.screen
        if screen.is_paused():
            return
        wall = time.monotonic()
        ready = self.pacer.take(wall, force=force)
        if ready:
            panels, feeds = screen.panels, screen.feeds
            with screen.app.batch_update():
                for index in ready:
                    if index < len(feeds) and index < len(panels):
                        panels[index].show(feeds[index].view(screen.window))
        wait = self.pacer.next_in(wall)
        if wait is not None and self._timer is None:
            self._timer = screen.set_timer(wait, self._timer_fired, name="views")

    def _timer_fired(self) -> None:
        self._timer = None
        self.tick_views()
