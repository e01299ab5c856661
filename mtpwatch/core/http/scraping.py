"""The scrape path of `VllmClient`: GET /metrics (or the filtered `/metrics/?name[]=…` tiers of
`core.metrics.filtered`) on the kept-alive fast socket or through httpx, checked to be Prometheus text,
parsed into a `MetricsSnapshot`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx

from mtpwatch.core.http.errors import NotVllmError, one_line
from mtpwatch.core.http.failures import (
    NOT_PROMETHEUS,
    check_prometheus,
    not_prometheus,
    status_error,
    transport_error,
)
from mtpwatch.core.http.fastget import FastGet, FastGetUnsupported
from mtpwatch.core.metrics.filtered import FULL_PATH, FilterRefused, ScrapeState, TieredScraper
from mtpwatch.core.metrics.parse import MetricsFormatError
from mtpwatch.core.metrics.snapshot import MetricsSnapshot, parse_snapshot
from mtpwatch.core.timeouts import within


class ScrapeMethods:
    """GET /metrics → text → `MetricsSnapshot` (a mixin of `VllmClient`)."""

    base_url: str
    api_key: str | None
    _timeout: float
    _fast_get: FastGet | None
    _tiers: TieredScraper | None
    _fresh: bool

    if TYPE_CHECKING:

        async def _get(self, path: str, url: str | None = None) -> httpx.Response: ...

    @property
    def scrape_state(self) -> ScrapeState | None:
        """How the last scrape was made (filtered or the full page, and why); None without a filter."""
        return self._tiers.state if self._tiers is not None else None

    def fresh_next(self) -> None:
        """Fetch every tier at the next scrape (the scrape that closes a prompt's window)."""
        self._fresh = True

    async def scrape_text(self) -> str:
        """GET /metrics → the Prometheus text (with a `scrape_filter`: the filtered tiers' text, or
        the whole page where the filter is not honoured; `scrape_state` says which).

        Raises:
            ServerError: unreachable, timeout, 401/403, 404 (not vLLM), 5xx, or a page that is not
                Prometheus text.
        """
        if self._tiers is None:
            return await self._metrics_text(FULL_PATH)
        fresh, self._fresh = self._fresh, False
        return await self._tiers.scrape(fresh=fresh)

    async def _metrics_text(self, path: str) -> str:
        """GET `path` (`/metrics` or a filtered `/metrics/?…`) → its Prometheus text.

        Raises:
            FilterRefused: a filtered path answered another status than 200.
            ServerError: as `scrape_text`.
        """
        filtered = path != FULL_PATH
        # errors name the filtered path short: the whole query is two dozen names long
        url = self.base_url + ("/metrics/?name[]=…" if filtered else path)
        fast = self._fast_get
        if fast is not None:
            try:
                text = await within(self._timeout, fast.get(path))
                if not NOT_PROMETHEUS.match(text):
                    return text
                # Not Prometheus text: httpx asks once more and words it with the content type.
            except TimeoutError:
                raise transport_error(
                    self.base_url, url, httpx.ReadTimeout("no answer"), self._timeout
                ) from None
            except FastGetUnsupported:
                # Not the plain case (an error status, a redirect, an encoding): httpx asks once more
                # and words the answer. A plain full page it needed httpx for stays on httpx; a
                # filtered path's odd answer (a 404 of an older vLLM) says nothing about the page.
                text = await self._scrape_text_httpx(url, path)
                if not filtered:
                    self._fast_get = None
                    fast.close()
                return text
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                pass  # refused, reset, cut: httpx retries and, if it fails too, says why
        return await self._scrape_text_httpx(url, path)

    async def _scrape_text_httpx(self, url: str, path: str = FULL_PATH) -> str:
        response = await self._get(path, url)
        if path != FULL_PATH and response.status_code != 200:
            raise FilterRefused(f"{response.status_code} {response.reason_phrase}".strip())
        if response.status_code == 404:
            raise NotVllmError(
                f"{url} answered 404 Not Found — not a vLLM server? (vLLM serves Prometheus metrics there)",
                url=url,
            )
        if response.status_code != 200:
            raise status_error(self.api_key, url, response.status_code, response.reason_phrase, response.text)
        ctype = response.headers.get("content-type", "")
        if path != FULL_PATH and not_prometheus(ctype, response.text):
            # not a filtered page (a web app's HTML): the full page decides, and its error says /metrics
            raise FilterRefused(f"not Prometheus text ({ctype.split(';')[0] or 'no content type'})")
        return check_prometheus(url, ctype, response.text)

    async def scrape(self, model: str | None = None) -> MetricsSnapshot:
        """GET /metrics → `MetricsSnapshot` (core.metrics.parse_snapshot).

        A page without vLLM families gives a snapshot with schema "none"; the caller decides whether
        that is an error (`no_metrics_message` has the text). `UnknownModelError` passes through.
        """
        return parse_metrics_page(await self.scrape_text(), model, self.base_url)

    async def scrape_page(self, model: str | None = None) -> tuple[str | None, MetricsSnapshot]:
        """GET /metrics → (the page's text, its snapshot): what a recording keeps and what is shown."""
        text = await self.scrape_text()
        return text, parse_metrics_page(text, model, self.base_url)


def parse_metrics_page(text: str, model: str | None, base_url: str) -> MetricsSnapshot:
    """A /metrics page of the server at `base_url` → `MetricsSnapshot` (a recorded page too).

    Raises:
        NotVllmError: the text is not Prometheus text.
    """
    try:
        return parse_snapshot(text, model)
    except MetricsFormatError as exc:
        url = base_url + "/metrics"
        raise NotVllmError(
            f"{url} did not return valid Prometheus text: {one_line(str(exc))}", url=url
        ) from exc
