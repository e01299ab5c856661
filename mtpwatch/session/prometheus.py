"""A monitor fed from Prometheus: the single-server view of a fleet row read through `--prometheus`.

The feed is the monitor's own `ServerFeed`; only its scrapes differ (`PrometheusScrapes`, a
`session.scrapes.Scrapes`): a page is the target's cumulative counters as Prometheus last saw them
(`core.sources.prometheus_target.target_snapshot`), so the same `Collector` takes the same windows,
restarts and charts from them. The first page carries the last minutes from a range query, so the
history chart and the 60 s window start full, with data from before mtpwatch started. The server is
identified, and prompts go, through the server itself (the address in Prometheus' `instance`
label), which only works where that address is reachable.
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
from mtpwatch.session.scrapes import Identity, LiveScrapes, Page
from mtpwatch.session.watch import ServerFeed

BACKFILL_S = 170.0
"""History read on open (the feed's collector keeps 180 s)."""


class PrometheusScrapes:
    """One target's counters read from Prometheus (`source`, `row`: instance, model, engine); the
    server's identity from its own API (`identify_with`)."""

    def __init__(
        self,
        source: PrometheusSource,
        row: tuple[str, str | None, str | None],
        identify_with: LiveScrapes,
        *,
        clock: Callable[[], float],
        step_s: float,
    ) -> None:
        self.source = source
        self.row = row
        self._server = identify_with
        self._clock = clock
        self._step_s = step_s
        self._backfilled = False
        self._history: tuple[tuple[float, MetricsSnapshot], ...] = ()
        """The last minutes, read on the first fetch, handed on with the first page that comes."""

    async def fetch(self, model: str | None) -> Page:
        """The numbers come from Prometheus: no page of the server's own to show or record."""
        instance, row_model, engine = self.row
        try:
            if not self._backfilled:
                self._backfilled = True
                self._history = await self._backfill()
            snap = await target_snapshot(self.source, instance, row_model, engine)
        except PrometheusError as exc:
            raise ServerError(str(exc), url=self.source.url) from None
        if snap.schema == "none":
            raise ServerError(f"Prometheus has no series of {instance} (any more)", url=self.source.url)
        history, self._history = self._history, ()
        return Page(snap, history=history)

    async def _backfill(self) -> tuple[tuple[float, MetricsSnapshot], ...]:
        instance, model, engine = self.row
        step = max(1.0, self._step_s)
        points = await target_history(self.source, instance, model, engine, span_s=BACKFILL_S, step_s=step)
        wall, mono = time.time(), self._clock()
        return tuple((mono - (wall - t), snap) for t, snap in points[:-1])  # the newest: the first page

    async def identify(self, model: str | None) -> Identity | None:
        return await self._server.identify(model)

    async def aclose(self) -> None:
        await self.source.aclose()


def prometheus_feed_factory(
    prometheus: str, selector: str, row: tuple[str, str | None, str | None]
) -> Callable[..., ServerFeed]:
    """A source factory (`session/drivers.LiveDriver(factory=…)`) for one fleet row read from Prometheus."""

    def make(
        spec: ServerSpec, display: DisplaySettings, *, clock: Callable[[], float], **kw: Any
    ) -> ServerFeed:
        client = VllmClient(spec.url, api_key=spec.api_key, timeout=5.0, clock=clock)
        source = PrometheusSource(prometheus, selector=selector)
        scrapes = PrometheusScrapes(
            source, row, LiveScrapes(client), clock=clock, step_s=display.scrape_interval_s
        )
        return ServerFeed(spec, display, clock=clock, client=client, scrapes=scrapes, **kw)

    return make
