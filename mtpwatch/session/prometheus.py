"""A monitor fed from Prometheus: the single-server view of a fleet row read through `--prometheus`.

The feed is the monitor's own `ServerFeed`; only its client's `scrape` changes: it returns the target's
cumulative counters as Prometheus last saw them (`core.sources.prometheus_target.target_snapshot`), so the
same `Collector` takes the same windows, restarts and charts from them. On the first scrape the
collector is filled with the last minutes from a range query, so the history chart and the 60 s
window start full, with data from before mtpwatch started. Prompts still go to the server itself
(the address in Prometheus' `instance` label), which only works where that address is reachable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import ServerError
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.core.sources.prometheus import PrometheusError, PrometheusSource
from mtpwatch.core.sources.prometheus_target import target_history, target_snapshot
from mtpwatch.session.watch import ServerFeed

BACKFILL_S = 170.0
"""History read on open (the feed's collector keeps 180 s)."""


class _PrometheusScrapes(VllmClient):
    """VllmClient whose `scrape` reads one target's counters from Prometheus."""

    def __init__(self, feed: ServerFeed, source: PrometheusSource, row: tuple[str, str | None, str | None]):
        super().__init__(feed.spec.url, api_key=feed.spec.api_key, timeout=5.0, clock=feed.clock)
        self.feed = feed
        self.source = source
        self.row = row
        self.backfilled = False

    async def scrape(self, model: str | None = None) -> MetricsSnapshot:
        instance, row_model, engine = self.row
        try:
            if not self.backfilled:
                self.backfilled = True
                await self._backfill()
            snap = await target_snapshot(self.source, instance, row_model, engine)
        except PrometheusError as exc:
            raise ServerError(str(exc), url=self.source.url) from None
        if snap.schema == "none":
            raise ServerError(f"Prometheus has no series of {instance} (any more)", url=self.source.url)
        return snap

    async def scrape_page(self, model: str | None = None) -> tuple[str | None, MetricsSnapshot]:
        """The numbers come from Prometheus: no page of the server's own to show or record."""
        return None, await self.scrape(model)

    async def _backfill(self) -> None:
        instance, model, engine = self.row
        step = max(1.0, self.feed.display.scrape_interval_s)
        points = await target_history(self.source, instance, model, engine, span_s=BACKFILL_S, step_s=step)
        wall, mono = time.time(), self.feed.clock()
        for t, snap in points[:-1]:  # the newest comes from the first live scrape
            self.feed.collector.add(snap, mono - (wall - t))

    async def aclose(self) -> None:
        await self.source.aclose()
        await super().aclose()


def prometheus_feed_factory(
    prometheus: str, selector: str, row: tuple[str, str | None, str | None]
) -> Callable[..., ServerFeed]:
    """A `MonitorScreen.feed_factory` for one fleet row read from Prometheus."""

    def make(
        spec: ServerSpec, display: DisplaySettings, *, clock: Callable[[], float], **kw: Any
    ) -> ServerFeed:
        feed = ServerFeed(spec, display, clock=clock, **kw)
        source = PrometheusSource(prometheus, selector=selector)
        feed.client = _PrometheusScrapes(feed, source, row)
        return feed

    return make
