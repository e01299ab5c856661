"""HTTP to a vLLM server (or the simulator): /metrics, /v1/models, /version and streaming generation.

`VllmClient` is the one entry point; every failure is a one-line `ServerError` (`errors.py`, worded by
`failures.py`). Scrapes: GET /metrics (or the filtered tiers of `core.metrics.filtered`) on the
kept-alive `core.http.fastget` socket or through httpx. Streams: POST a streaming completion on the
plain-http fast path (`core.http.faststream`) or through httpx, decode its SSE events into
`StreamEvent` batches, and drop a vLLM extension the server refuses (HTTP 400) and send again.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import httpx

from mtpwatch.core.http import tls
from mtpwatch.core.http.engines import ModelEntry, parse_model_list
from mtpwatch.core.http.errors import (
    HttpStatusError,
    NotVllmError,
    ServerError,
    StreamError,
    describe_transport,
)
from mtpwatch.core.http.failures import (
    NOT_PROMETHEUS,
    not_prometheus,
    parse_metrics_page,
    status_error,
    transport_error,
)
from mtpwatch.core.http.fastget import FastGet, FastGetUnsupported
from mtpwatch.core.http.faststream import open_sse, proxy_for
from mtpwatch.core.http.generation import (
    ChunkDecoder,
    ChunkError,
    GenerationRequest,
    GenerationResult,
    GenerationStats,
    StreamEvent,
)
from mtpwatch.core.http.sse import DONE, SseDecoder
from mtpwatch.core.http.urls import normalize_url
from mtpwatch.core.metrics.filtered import FULL_PATH, FilterRefused, ScrapeFilter, ScrapeState, TieredScraper
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.core.timeouts import within

_Payloads = AsyncGenerator[list[tuple[float, bytes]], None]
"""Batches of (arrival clock, SSE payload), from either path."""


class VllmClient:
    """Async HTTP client for one vLLM server (or the simulator): scrape, models, stream."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
        stream_timeout: float = 300.0,
        clock: Callable[[], float] = time.perf_counter,
        fast_stream: bool | None = None,
        read_interval: float = 0.0,
        scrape_filter: ScrapeFilter | None = None,
    ) -> None:
        """Make a client; nothing connects until the first request.

        Args:
            base_url: anything `normalize_url` accepts.
            api_key: Bearer token; None: $VLLM_API_KEY, then $OPENAI_API_KEY (what OpenAI clients
                and `vllm bench serve` read).
            timeout: seconds for connect/read of the small GETs.
            transport: an httpx transport (tests, the demo); None = real network.
            stream_timeout: seconds a generation stream may stay silent (long prefills) before it fails.
            clock: monotonic clock stamped on stream events (tests inject a fake).
            fast_stream: stream through `core.http.faststream` (True) or httpx (False). None: the fast
                path for plain http:// without an injected transport or an environment proxy.
            read_interval: `core.http.faststream.open_sse`'s; 0 (benchmarks) stamps every chunk on
                arrival, a live view can pass e.g. 0.02 (its late stamps bias short runs' tok/s).
            scrape_filter: scrape through `/metrics/?name[]=…` (`core.metrics.filtered`): the
                monitor, the fleet and `snapshot`; None: always the whole page (bench, start).
        """
        self.base_url = normalize_url(base_url)
        if api_key is None:
            api_key = os.environ.get("VLLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self.api_key = api_key or None
        self._auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._timeout = timeout
        self._stream_timeout = stream_timeout
        self._clock = clock
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        if fast_stream is None:
            fast_stream = (
                transport is None and self.base_url.startswith("http://") and proxy_for(self.base_url) is None
            )
        self._fast = fast_stream
        self._fast_get: FastGet | None = FastGet(self.base_url, api_key=self.api_key) if fast_stream else None
        """None once a plain answer needed httpx (an encoding or framing `FastGet` does not read)."""
        self._read_interval = read_interval
        self._tiers = TieredScraper(self._metrics_text, scrape_filter, clock=clock) if scrape_filter else None
        self._fresh = False

    @property
    def _http(self) -> httpx.AsyncClient:
        """httpx's client, made at its first use: httpcore's import and the CA store's load (~0.1 s
        of CPU a client) come then, not in the app's first frame (issue 39)."""
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=self._auth,
                timeout=httpx.Timeout(self._timeout),
                transport=self._transport,
                # Some vLLM builds mount /metrics as an ASGI sub-app that redirects /metrics → /metrics/.
                follow_redirects=True,
                limits=httpx.Limits(max_connections=8, max_keepalive_connections=4),
                verify=tls.verify(),
            )
        return self._client

    @property
    def fast_stream(self) -> bool:
        """True when generations stream through `core.http.faststream`, False through httpx."""
        return self._fast

    async def aclose(self) -> None:
        if self._fast_get is not None:
            self._fast_get.close()
        if self._client is not None:
            await self._client.aclose()

    async def __aenter__(self) -> VllmClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _get(self, path: str, url: str | None = None) -> httpx.Response:
        url = url or self.base_url + path
        try:
            return await self._http.get(path)
        except httpx.RequestError as exc:
            raise transport_error(self.base_url, url, exc, self._timeout) from exc

    def _check_ok(self, response: httpx.Response, url: str, not_found: str) -> None:
        """A 200, else the one-line error: `not_found` says what a 404 means there."""
        if response.status_code == 404:
            raise NotVllmError(f"{url} answered 404 Not Found — {not_found}", url=url)
        if response.status_code != 200:
            raise status_error(self.api_key, url, response.status_code, response.reason_phrase, response.text)

    @property
    def scrape_state(self) -> ScrapeState | None:
        """How the last scrape was made (filtered or the full page, and why); None without a filter."""
        return self._tiers.state if self._tiers is not None else None

    def fresh_next(self) -> None:
        """Fetch every tier at the next scrape (the scrape that closes a prompt's window)."""
        self._fresh = True

    async def scrape_text(self) -> str:
        """GET /metrics → the Prometheus text (with a `scrape_filter`: the tiers' text or the whole
        page, `scrape_state` says which). Raises ServerError: unreachable, timeout, 401/403, 404 (not
        vLLM), 5xx, or a page that is not Prometheus text."""
        if self._tiers is None:
            return await self._metrics_text(FULL_PATH)
        fresh, self._fresh = self._fresh, False
        return await self._tiers.scrape(fresh=fresh)

    async def _metrics_text(self, path: str) -> str:
        """GET `path` → its Prometheus text: a `filtered.Fetch` (raises as it says, else as `scrape_text`)."""
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
        self._check_ok(response, url, "not a vLLM server? (vLLM serves Prometheus metrics there)")
        ctype = response.headers.get("content-type", "")
        if not_prometheus(ctype, response.text):
            got = ctype.split(";")[0] or "no content type"
            if path != FULL_PATH:
                # not a filtered page (a web app's HTML): the full page decides, and its error says /metrics
                raise FilterRefused(f"not Prometheus text ({got})")
            raise NotVllmError(
                f"{url} did not return Prometheus text (got {got}) — is this a vLLM server?", url=url
            )
        return response.text

    async def scrape_page(self, model: str | None = None) -> tuple[str | None, MetricsSnapshot]:
        """GET /metrics → (the page's text, its snapshot): what a recording keeps and what is shown. A
        page without vLLM families gives schema "none" (the caller decides whether that is an error);
        `UnknownModelError` passes through."""
        text = await self.scrape_text()
        return text, parse_metrics_page(text, model, self.base_url)

    async def scrape(self, model: str | None = None) -> MetricsSnapshot:
        """`scrape_page` without the text."""
        return (await self.scrape_page(model))[1]

    async def models(self) -> list[ModelEntry]:
        """GET /v1/models → the served models (first = default), vLLM's or llama-server's list."""
        url = self.base_url + "/v1/models"
        response = await self._get("/v1/models")
        self._check_ok(response, url, "not an OpenAI-compatible server?")
        try:
            return parse_model_list(response.json())  # vLLM's shape or llama-server's
        except ValueError as exc:
            raise NotVllmError(
                f"{url} did not return an OpenAI model list — is this a vLLM server?", url=url
            ) from exc

    async def get_json(self, path: str) -> Any:
        """GET `path` → its JSON; None on another status than 200 or a body that is not JSON
        (engine-specific pages such as llama-server's /props and /slots; see `core.http.engines`).
        Raises ServerError when the server cannot be reached."""
        response = await self._get(path)
        if response.status_code != 200:
            return None
        try:
            return response.json()
        except ValueError:
            return None

    async def version(self) -> str | None:
        """GET /version → vLLM's version string; None when the server has no such endpoint."""
        body = await self.get_json("/version")
        value = body.get("version") if isinstance(body, dict) else None
        return value if isinstance(value, str) else None

    # -- generation

    async def generate(
        self,
        request: GenerationRequest,
        *,
        stats: GenerationStats | None = None,
        on_event: Callable[[StreamEvent], None] | None = None,
    ) -> GenerationResult:
        """Stream `request` to the end and return its result; failures become `result.error` (one line).
        Cancellation propagates (the response is closed); pass your own `stats` and call
        `stats.finish(cancelled=True)` to keep what arrived."""
        stats = stats if stats is not None else GenerationStats(clock=self._clock)
        try:
            # One resumption per batch of chunks, not per chunk (the stream can be 1,000 chunks/s).
            async with aclosing(self._batches(request, stats)) as batches:
                async for batch in batches:
                    if on_event is not None:
                        for event in batch:
                            on_event(event)
        except ServerError as exc:
            return stats.finish(error=str(exc))
        return stats.finish()

    async def _batches(
        self, request: GenerationRequest, stats: GenerationStats | None
    ) -> AsyncGenerator[list[StreamEvent], None]:
        """The events of `request`, one list per network read (fast path: per event-loop wake-up), with
        continuous usage (and token ids) asked for until an HTTP 400 names one (`_refusal`). Every
        event is added to `stats` before its list is yielded; events decoded before a broken chunk are
        yielded before the `StreamError`. Closing the iterator (`contextlib.aclosing`) or cancelling
        the task closes the response at once. Raises ServerError before the first event (unreachable,
        4xx/5xx), `StreamError` mid-way."""
        url = self.base_url + request.path
        flags = _Extensions(True, True, request.return_token_ids, stats)
        attempts = 0
        while attempts < 4:
            attempts += 1
            body = request.body(
                include_usage=flags.include_usage,
                continuous_usage=flags.continuous,
                return_token_ids=flags.token_ids,
            )
            if stats is not None:
                stats.start(self._clock())
            if self._fast:
                payloads = self._fast_payloads(url, body, flags)
            else:
                payloads = self._httpx_payloads(request.path, url, body, flags)
            try:
                async with aclosing(self._events(url, payloads, stats)) as batches:
                    async for batch in batches:
                        yield batch
                return
            except _Retry:
                continue
            except _UseHttpx:
                self._fast = False  # a redirect: httpx follows it
                attempts -= 1
                continue
        raise HttpStatusError(f"{url} kept rejecting the request (HTTP 400)", url=url)

    async def _refusal(
        self, url: str, status: int, reason: str, body: Awaitable[bytes], flags: _Extensions
    ) -> Exception:
        """Read a refused answer's `body`: `_Retry` when a 400 names an extension (now dropped from
        `flags`), else the one-line error."""
        try:
            text = (await body).decode("utf-8", "replace")
        except httpx.RequestError as exc:
            raise transport_error(self.base_url, url, exc, self._timeout) from exc
        if status == 400:
            low = text.lower()
            if flags.continuous and ("continuous_usage" in low or "stream_options" in low):
                flags.continuous = False
                if flags.stats is not None:
                    flags.stats.fallback = (
                        "the server refused continuous_usage_stats (HTTP 400); "
                        "per-chunk token counts are estimated"
                    )
                return _Retry()
            if flags.include_usage and ("stream_options" in low or "include_usage" in low):
                flags.include_usage = False
                return _Retry()
            if flags.token_ids and "return_token_ids" in low:
                flags.token_ids = False
                return _Retry()
        return status_error(self.api_key, url, status, reason, text)

    async def _events(
        self, url: str, payloads: _Payloads, stats: GenerationStats | None
    ) -> AsyncGenerator[list[StreamEvent], None]:
        """Payload batches → event batches (see `_batches`)."""
        decoder = ChunkDecoder()
        done = False
        add = stats.add if stats is not None else None
        async with aclosing(payloads):
            while True:
                try:
                    batch = await anext(payloads, None)
                except httpx.RequestError as exc:
                    if isinstance(exc, httpx.ReadTimeout):
                        why = f"no data for {self._stream_timeout:g} s"
                    else:
                        why = f"connection lost ({describe_transport(exc)})"
                    raise StreamError(
                        f"the stream from {self.base_url} broke after {decoder.count} tokens: {why}", url=url
                    ) from exc
                if batch is None:
                    break
                events: list[StreamEvent] = []
                for t, payload in batch:
                    if done or payload == DONE:
                        done = True
                        continue
                    try:
                        event = decoder.decode(payload, t)
                    except ChunkError as exc:
                        if events:
                            yield events
                        raise StreamError(str(exc), url=url) from exc.__cause__
                    if event is not None:
                        if add is not None:
                            add(event)
                        events.append(event)
                if events:
                    yield events
        if not done and decoder.finish_reason is None:
            raise StreamError(
                f"the stream from {self.base_url} ended before the server finished"
                f" (no [DONE]) after {decoder.count} tokens",
                url=url,
            )

    async def _fast_payloads(self, url: str, body: dict[str, object], flags: _Extensions) -> _Payloads:
        """The payloads through `core.http.faststream`; a read failing mid-stream raises httpx's error."""
        try:
            conn = await open_sse(
                url,
                body,
                headers=self._auth,
                connect_timeout=self._timeout,
                read_timeout=self._stream_timeout,
                read_interval=self._read_interval,
                clock=self._clock,
            )
        except httpx.RequestError as exc:
            raise transport_error(self.base_url, url, exc, self._timeout) from exc
        try:
            if conn.status != 200:
                if 300 <= conn.status < 400 and "location" in conn.headers:
                    raise _UseHttpx
                raise await self._refusal(url, conn.status, conn.reason, conn.read_body(), flags)
            while payloads := await conn.batch():
                yield payloads
        finally:
            conn.close()

    async def _httpx_payloads(
        self, path: str, url: str, body: dict[str, object], flags: _Extensions
    ) -> _Payloads:
        """The payloads through httpx, stamped per network read; a read failing mid-stream raises
        httpx's error."""
        timeout = httpx.Timeout(self._timeout, read=self._stream_timeout)
        clock = self._clock
        request = self._http.build_request("POST", path, json=body, timeout=timeout)
        try:
            response = await self._http.send(request, stream=True)
        except httpx.RequestError as exc:
            raise transport_error(self.base_url, url, exc, self._timeout) from exc
        try:
            if response.status_code != 200:
                status, reason = response.status_code, response.reason_phrase
                raise await self._refusal(url, status, reason, response.aread(), flags)
            sse = SseDecoder()
            async for chunk in response.aiter_bytes():
                if payloads := sse.feed(chunk):
                    yield [(clock(), p) for p in payloads]
            if payloads := sse.close():
                yield [(clock(), p) for p in payloads]
        finally:
            await response.aclose()


@dataclass(slots=True)
class _Extensions:
    """The vLLM extensions a stream request still asks for (dropped one by one on HTTP 400), and the
    stats whose `fallback` says when continuous usage was."""

    include_usage: bool
    continuous: bool
    token_ids: bool
    stats: GenerationStats | None


class _Retry(Exception):
    """The server refused an extension; send the request again without it."""


class _UseHttpx(Exception):
    """The fast path met a redirect; httpx follows redirects."""
