"""HTTP to a vLLM server (or the simulator): /metrics, /health, /v1/models, /version and streaming generation.

One `httpx.AsyncClient` per server (connection pooling, timeouts, optional Bearer key). Every failure
a user can meet is a `ServerError` subclass whose `str()` is one line saying what to do.
`VllmClient` is the one entry point; its scrape path is in `scraping.py`, its generation stream in
`streaming.py`, the mapping of failures onto one-line errors in `failures.py`. Errors live in
`errors.py`, URL normalising in `urls.py`, the generation types in `generation.py` and the SSE decoder
in `sse.py`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from types import TracebackType
from typing import Any

import httpx

from mtpwatch.core.http import tls
from mtpwatch.core.http.backoff import Backoff
from mtpwatch.core.http.engines import ModelEntry, parse_model_list
from mtpwatch.core.http.errors import NotVllmError, ServerError, ServerTimeout
from mtpwatch.core.http.failures import status_error, transport_error
from mtpwatch.core.http.fastget import FastGet
from mtpwatch.core.http.faststream import proxy_for
from mtpwatch.core.http.generation import GenerationRequest, GenerationResult, GenerationStats, StreamEvent
from mtpwatch.core.http.scraping import ScrapeMethods
from mtpwatch.core.http.streaming import StreamMethods
from mtpwatch.core.http.urls import normalize_url
from mtpwatch.core.metrics.filtered import ScrapeFilter, TieredScraper


class VllmClient(ScrapeMethods, StreamMethods):
    """Async HTTP client for one vLLM server (or the simulator): scrape, health, models, stream."""

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
            api_key: Bearer token; None falls back to the VLLM_API_KEY environment variable, then
                OPENAI_API_KEY (what OpenAI clients and `vllm bench serve` read).
            timeout: seconds for connect/read of the small GETs.
            transport: an httpx transport (tests, the demo); None = real network.
            stream_timeout: seconds a generation stream may stay silent (long prefills) before it fails.
            clock: monotonic clock stamped on stream events (tests inject a fake).
            fast_stream: stream through `core.http.faststream` (True) or httpx (False). None: the fast
                path for plain http:// without an injected transport or an environment proxy.
            read_interval: fast path: read the socket at most this often during a fast stream; see
                `core.http.faststream.open_sse`. 0 reads every segment on arrival (exact chunk times,
                for benchmarks). A live view can pass e.g. 0.02: one wake-up per 20 ms instead of per
                chunk; TTFT and chunks after a quiet gap are still stamped on arrival, but a chunk that
                follows another within the interval (the last one included) is stamped up to that
                late, which biases short runs' tok/s.
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
        """/metrics on one kept-alive socket (~0.3 ms of CPU a page instead of ~2 ms through httpx);
        None once a plain answer needed httpx (an encoding or framing it does not read)."""
        self._read_interval = read_interval
        self._tiers: TieredScraper | None = None
        if scrape_filter is not None:
            self._tiers = TieredScraper(self._metrics_text, scrape_filter, clock=clock)
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

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _get(self, path: str, url: str | None = None) -> httpx.Response:
        url = url or self.base_url + path
        try:
            return await self._http.get(path)
        except httpx.RequestError as exc:
            raise transport_error(self.base_url, url, exc, self._timeout) from exc

    async def health(self) -> bool:
        """GET /health: True on 200, False on another status (503 = engine dead or starting).

        Raises:
            ServerError: the server cannot be reached (the reason is what a status line shows).
        """
        response = await self._get("/health")
        return response.status_code == 200

    async def wait_healthy(
        self,
        timeout_s: float,
        *,
        backoff: Backoff | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        """Poll /health with backed-off retries until it answers 200.

        Raises:
            ServerTimeout: not healthy within `timeout_s`; the message carries the last reason.
        """
        backoff = backoff or Backoff()
        deadline = self._clock() + timeout_s
        while True:
            try:
                if await self.health():
                    return
                reason = f"{self.base_url}/health is not ready yet"
            except ServerError as exc:
                reason = str(exc)
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise ServerTimeout(
                    f"{self.base_url} not healthy after {timeout_s:g} s: {reason}", url=self.base_url
                )
            if on_wait is not None:
                on_wait(reason)
            await sleep(min(backoff.next(), remaining))

    async def models(self) -> list[ModelEntry]:
        """GET /v1/models → the served models (first = default), vLLM's or llama-server's list."""
        url = self.base_url + "/v1/models"
        response = await self._get("/v1/models")
        if response.status_code == 404:
            raise NotVllmError(f"{url} answered 404 Not Found — not an OpenAI-compatible server?", url=url)
        if response.status_code != 200:
            raise status_error(self.api_key, url, response.status_code, response.reason_phrase, response.text)
        try:
            return parse_model_list(response.json())  # vLLM's shape or llama-server's
        except ValueError as exc:
            raise NotVllmError(
                f"{url} did not return an OpenAI model list — is this a vLLM server?", url=url
            ) from exc

    async def get_json(self, path: str) -> Any:
        """GET `path` → its JSON; None on another status than 200 or a body that is not JSON
        (engine-specific pages such as llama-server's /props and /slots; see `core.http.engines`).

        Raises:
            ServerError: the server cannot be reached.
        """
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

    async def stream(
        self, request: GenerationRequest, *, stats: GenerationStats | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """POST a streaming completion and yield one `StreamEvent` per chunk.

        Continuous usage (and token ids) are asked for; on an HTTP 400 that names the extension the
        request is sent again without it (`stats.fallback` says so). With `stats`, every event is
        added to it before it is yielded, so nothing is lost when the stream breaks. Close the
        iterator (`contextlib.aclosing`) or cancel the task to stop: the response closes at once.

        Raises:
            ServerError: before the first event (unreachable, 4xx/5xx); `StreamError` mid-way.
        """
        async with aclosing(self._batches(request, stats)) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def generate(
        self,
        request: GenerationRequest,
        *,
        stats: GenerationStats | None = None,
        on_event: Callable[[StreamEvent], None] | None = None,
    ) -> GenerationResult:
        """Stream `request` to the end and return its result; failures become `result.error` (one line).

        Cancellation propagates (the response is closed); pass your own `stats` and call
        `stats.finish(cancelled=True)` to keep what arrived.
        """
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
