"""HTTP to a vLLM server (or the simulator): /metrics, /health, /v1/models, /version and streaming generation.

One `httpx.AsyncClient` per server (connection pooling, timeouts, optional Bearer key). Every failure
a user can meet is a `ServerError` subclass whose `str()` is one line saying what to do.
Errors live in `errors.py`, URL normalising in `urls.py`, the generation types in `generation.py` and
the SSE decoder in `sse.py`.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import socket
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from mtpwatch.core.http import tls
from mtpwatch.core.http.backoff import Backoff
from mtpwatch.core.http.engines import parse_model_list
from mtpwatch.core.http.errors import (
    AuthError,
    HttpStatusError,
    NotVllmError,
    ServerError,
    ServerTimeout,
    ServerUnreachable,
    StreamError,
    causes,
    describe_transport,
    one_line,
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
    openai_error_message,
)
from mtpwatch.core.http.sse import DONE, SseDecoder
from mtpwatch.core.http.urls import normalize_url
from mtpwatch.core.metrics.filtered import FULL_PATH, FilterRefused, ScrapeFilter, ScrapeState, TieredScraper
from mtpwatch.core.metrics.parse import MetricsFormatError
from mtpwatch.core.metrics.snapshot import MetricsSnapshot, parse_snapshot
from mtpwatch.core.timeouts import within

__all__ = ["STREAM_READ_INTERVAL_S", "ModelInfo", "VllmClient"]

STREAM_READ_INTERVAL_S = 0.0
"""Fast path default for `read_interval`: 0 reads every segment on arrival (exact chunk times, for
benchmarks). A live view can pass e.g. 0.02: one wake-up per 20 ms instead of per chunk; TTFT and
chunks after a quiet gap are still stamped on arrival, but a chunk that follows another within the
interval (the last one included) is stamped up to that late, which biases short runs' tok/s."""

# --------------------------------------------------------------------------------------------- the client


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One entry of GET /v1/models."""

    id: str
    """Served model name (what requests and `model_name` labels use)."""
    root: str | None = None
    """The model path or HF id it was loaded from."""
    max_model_len: int | None = None
    """Context length."""
    parent: str | None = None
    """Base model of a LoRA adapter."""


class VllmClient:
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
        read_interval: float | None = None,
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
            read_interval: fast path: read the socket at most this often during a fast stream
                (None: `STREAM_READ_INTERVAL_S`); see `core.http.faststream.open_sse`.
            scrape_filter: scrape through `/metrics/?name[]=…` (`core.metrics.filtered`): the
                monitor, the fleet and `snapshot`; None: always the whole page (bench, start).
        """
        self.base_url = normalize_url(base_url)
        key = (
            api_key
            if api_key is not None
            else (os.environ.get("VLLM_API_KEY") or os.environ.get("OPENAI_API_KEY"))
        )
        self.api_key = key or None
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self._auth = headers
        self._timeout = timeout
        self._stream_timeout = stream_timeout
        self._clock = clock
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            transport=transport,
            # Some vLLM builds mount /metrics as an ASGI sub-app that redirects /metrics → /metrics/.
            follow_redirects=True,
            limits=httpx.Limits(max_connections=8, max_keepalive_connections=4),
            verify=tls.verify(),
        )
        if fast_stream is None:
            fast_stream = (
                transport is None and self.base_url.startswith("http://") and proxy_for(self.base_url) is None
            )
        self._fast = fast_stream
        self._fast_get: FastGet | None = FastGet(self.base_url, api_key=self.api_key) if fast_stream else None
        """/metrics on one kept-alive socket (~0.3 ms of CPU a page instead of ~2 ms through httpx);
        None once a plain answer needed httpx (an encoding or framing it does not read)."""
        self._read_interval = STREAM_READ_INTERVAL_S if read_interval is None else read_interval
        self._tiers: TieredScraper | None = None
        if scrape_filter is not None:
            self._tiers = TieredScraper(self._metrics_text, scrape_filter, clock=clock)
        self._fresh = False

    @property
    def fast_stream(self) -> bool:
        """True when generations stream through `core.http.faststream`, False through httpx."""
        return self._fast

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._fast_get is not None:
            self._fast_get.close()
        await self._http.aclose()

    async def __aenter__(self) -> VllmClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- errors

    def _transport_error(self, url: str, exc: httpx.RequestError, timeout: float) -> ServerError:
        base = self.base_url
        if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
            return ServerTimeout(
                f"cannot connect to {base}: no answer within {timeout:g} s"
                " — is the host reachable and the port right?",
                url=url,
            )
        if isinstance(exc, httpx.TimeoutException):
            return ServerTimeout(
                f"{url} did not answer within {timeout:g} s — the server may be overloaded or stuck", url=url
            )
        if isinstance(exc, httpx.ConnectError):
            chain = causes(exc)
            if any(isinstance(c, socket.gaierror) for c in chain):
                host = httpx.URL(base).host
                return ServerUnreachable(
                    f"cannot connect to {base}: host {host} not found (DNS lookup failed) — check the URL",
                    url=url,
                )
            if any(
                isinstance(c, ConnectionRefusedError) or getattr(c, "errno", None) == errno.ECONNREFUSED
                for c in chain
            ):
                hint = "is the server running?"
                if httpx.URL(base).port is None:
                    # 'localhost' alone means port 80 (443); vLLM listens on 8000 unless told otherwise.
                    hint = "no port was given, so the default port was used; vLLM listens on 8000 (host:8000)"
                return ServerUnreachable(f"cannot connect to {base}: connection refused — {hint}", url=url)
            return ServerUnreachable(f"cannot connect to {base}: {describe_transport(exc)}", url=url)
        return ServerError(f"request to {url} failed: {describe_transport(exc)}", url=url)

    def _status_error(self, url: str, status: int, reason: str, body: str) -> ServerError:
        head = f"{url} answered {status} {reason}".rstrip()
        if status in (401, 403):
            hint = (
                "the API key was rejected; check --api-key or VLLM_API_KEY"
                if self.api_key
                else "the server wants an API key; pass --api-key or set VLLM_API_KEY"
            )
            return AuthError(f"{head}: {hint}", url=url)
        detail = _body_message(body)
        if status >= 500:
            tail = f": {detail}" if detail else " (engine dead or still starting?)"
            return HttpStatusError(f"{head}: server error{tail}", url=url, status=status)
        return HttpStatusError(f"{head}: {detail}" if detail else head, url=url, status=status)

    async def _get(self, path: str, url: str | None = None) -> httpx.Response:
        url = url or self.base_url + path
        try:
            return await self._http.get(path)
        except httpx.RequestError as exc:
            raise self._transport_error(url, exc, self._timeout) from exc

    # -- GET endpoints

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
                if not _NOT_PROMETHEUS.match(text):
                    return text
                # Not Prometheus text: httpx asks once more and words it with the content type.
            except TimeoutError:
                raise self._transport_error(url, httpx.ReadTimeout("no answer"), self._timeout) from None
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
            raise self._status_error(url, response.status_code, response.reason_phrase, response.text)
        ctype = response.headers.get("content-type", "")
        if path != FULL_PATH and _not_prometheus(ctype, response.text):
            # not a filtered page (a web app's HTML): the full page decides, and its error says /metrics
            raise FilterRefused(f"not Prometheus text ({ctype.split(';')[0] or 'no content type'})")
        return self._check_prometheus(url, ctype, response.text)

    @staticmethod
    def _check_prometheus(url: str, ctype: str, text: str) -> str:
        if _not_prometheus(ctype, text):
            raise NotVllmError(
                f"{url} did not return Prometheus text (got {ctype.split(';')[0] or 'no content type'})"
                " — is this a vLLM server?",
                url=url,
            )
        return text

    async def scrape(self, model: str | None = None) -> MetricsSnapshot:
        """GET /metrics → `MetricsSnapshot` (core.metrics.parse_snapshot).

        A page without vLLM families gives a snapshot with schema "none"; the caller decides whether
        that is an error (`no_metrics_message` has the text). `UnknownModelError` passes through.
        """
        return self.parse_page(await self.scrape_text(), model)

    async def scrape_page(self, model: str | None = None) -> tuple[str | None, MetricsSnapshot]:
        """GET /metrics → (the page's text, its snapshot): what a recording keeps and what is shown.

        A client that reads the numbers from elsewhere (a Prometheus server) overrides this and
        returns no text: there is no page to record.
        """
        text = await self.scrape_text()
        return text, self.parse_page(text, model)

    def parse_page(self, text: str, model: str | None = None) -> MetricsSnapshot:
        """A /metrics page of this server → `MetricsSnapshot` (what `scrape` does after the GET)."""
        try:
            return parse_snapshot(text, model)
        except MetricsFormatError as exc:
            url = self.base_url + "/metrics"
            raise NotVllmError(
                f"{url} did not return valid Prometheus text: {one_line(str(exc))}", url=url
            ) from exc

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

    async def models(self) -> list[ModelInfo]:
        """GET /v1/models → the served models (first = default)."""
        url = self.base_url + "/v1/models"
        response = await self._get("/v1/models")
        if response.status_code == 404:
            raise NotVllmError(f"{url} answered 404 Not Found — not an OpenAI-compatible server?", url=url)
        if response.status_code != 200:
            raise self._status_error(url, response.status_code, response.reason_phrase, response.text)
        try:
            entries = parse_model_list(response.json())  # vLLM's shape or llama-server's
            return [ModelInfo(e.id, e.root, e.max_model_len, e.parent) for e in entries]
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
        response = await self._get("/version")
        if response.status_code != 200:
            return None
        try:
            value = response.json().get("version")
        except (ValueError, AttributeError):
            return None
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

    async def _batches(
        self, request: GenerationRequest, stats: GenerationStats | None
    ) -> AsyncGenerator[list[StreamEvent], None]:
        """The events of `request`, one list per network read (fast path: per event-loop wake-up).

        Every event is added to `stats` before its list is yielded; events decoded before a broken
        chunk are yielded before the `StreamError`.
        """
        url = self.base_url + request.path
        flags = _Extensions(True, request.continuous_usage, request.return_token_ids)
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
            decoder = ChunkDecoder()
            try:
                if self._fast:
                    gen = self._fast_batches(url, body, decoder, stats, flags)
                else:
                    gen = self._httpx_batches(request.path, url, body, decoder, stats, flags)
                async with aclosing(gen) as batches:
                    async for batch in batches:
                        yield batch
                return
            except _Retry:
                continue
            except _UseHttpx:
                self._fast = False  # a redirect: httpx follows it
                attempts -= 1
                continue
        raise HttpStatusError(f"{url} kept rejecting the request (HTTP 400)", url=url, status=400)

    def _refusal(
        self, url: str, status: int, reason: str, text: str, flags: _Extensions, stats: GenerationStats | None
    ) -> Exception:
        """`_Retry` when a 400 names an extension (now dropped from `flags`), else the one-line error."""
        if status == 400:
            low = text.lower()
            if flags.continuous and ("continuous_usage" in low or "stream_options" in low):
                flags.continuous = False
                if stats is not None:
                    stats.fallback = (
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
        return self._status_error(url, status, reason, text)

    def _decode(
        self,
        payloads: list[tuple[float, bytes]],
        decoder: ChunkDecoder,
        stats: GenerationStats | None,
        state: list[bool],
    ) -> list[StreamEvent]:
        """Payloads → events (added to `stats`); `state[0]` = [DONE] seen. A `ChunkError` carries
        the events decoded before it in `.args[1]`."""
        events: list[StreamEvent] = []
        decode = decoder.decode
        add = stats.add if stats is not None else None
        for t, payload in payloads:
            if state[0] or payload == DONE:
                state[0] = True
                continue
            try:
                event = decode(payload, t)
            except ChunkError as exc:
                raise _BrokenBatch(str(exc), events) from exc
            if event is not None:
                if add is not None:
                    add(event)
                events.append(event)
        return events

    async def _fast_batches(
        self,
        url: str,
        body: dict[str, object],
        decoder: ChunkDecoder,
        stats: GenerationStats | None,
        flags: _Extensions,
    ) -> AsyncGenerator[list[StreamEvent], None]:
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
            raise self._transport_error(url, exc, self._timeout) from exc
        try:
            if conn.status != 200:
                if 300 <= conn.status < 400 and "location" in conn.headers:
                    raise _UseHttpx
                try:
                    raw = await conn.read_body()
                except httpx.RequestError as exc:
                    raise self._transport_error(url, exc, self._timeout) from exc
                text = raw.decode("utf-8", "replace")
                raise self._refusal(url, conn.status, conn.reason, text, flags, stats)
            state = [False]
            while True:
                try:
                    payloads = await conn.batch()
                except httpx.RequestError as exc:
                    raise StreamError(self._broken_message(exc, decoder), url=url) from exc
                if not payloads:
                    break
                try:
                    events = self._decode(payloads, decoder, stats, state)
                except _BrokenBatch as exc:
                    if exc.events:
                        yield exc.events
                    raise StreamError(str(exc), url=url) from exc.__cause__
                if events:
                    yield events
            self._check_finished(url, state[0], decoder)
        finally:
            conn.close()

    async def _httpx_batches(
        self,
        path: str,
        url: str,
        body: dict[str, object],
        decoder: ChunkDecoder,
        stats: GenerationStats | None,
        flags: _Extensions,
    ) -> AsyncGenerator[list[StreamEvent], None]:
        timeout = httpx.Timeout(self._timeout, read=self._stream_timeout)
        clock = self._clock
        try:
            async with self._http.stream("POST", path, json=body, timeout=timeout) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode("utf-8", "replace")
                    raise self._refusal(url, response.status_code, response.reason_phrase, text, flags, stats)
                sse = SseDecoder()
                state = [False]
                try:
                    async for chunk in response.aiter_bytes():
                        payloads = sse.feed(chunk)
                        if payloads:
                            events = self._decode([(clock(), p) for p in payloads], decoder, stats, state)
                            if events:
                                yield events
                    payloads = sse.close()
                    if payloads:
                        events = self._decode([(clock(), p) for p in payloads], decoder, stats, state)
                        if events:
                            yield events
                except httpx.RequestError as exc:
                    raise StreamError(self._broken_message(exc, decoder), url=url) from exc
                except _BrokenBatch as exc:
                    if exc.events:
                        yield exc.events
                    raise StreamError(str(exc), url=url) from exc.__cause__
                self._check_finished(url, state[0], decoder)
        except httpx.RequestError as exc:
            raise self._transport_error(url, exc, self._timeout) from exc

    def _check_finished(self, url: str, done: bool, decoder: ChunkDecoder) -> None:
        if not done and decoder.finish_reason is None:
            raise StreamError(
                f"the stream from {self.base_url} ended before the server finished"
                f" (no [DONE]) after {decoder.count} tokens",
                url=url,
            )

    def _broken_message(self, exc: httpx.RequestError, decoder: ChunkDecoder) -> str:
        if isinstance(exc, httpx.ReadTimeout):
            why = f"no data for {self._stream_timeout:g} s"
        else:
            why = f"connection lost ({describe_transport(exc)})"
        return f"the stream from {self.base_url} broke after {decoder.count} tokens: {why}"

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


@dataclass(slots=True)
class _Extensions:
    """The vLLM extensions a stream request still asks for (dropped one by one on HTTP 400)."""

    include_usage: bool
    continuous: bool
    token_ids: bool


class _Retry(Exception):
    """The server refused an extension; send the request again without it."""


class _UseHttpx(Exception):
    """The fast path met a redirect; httpx follows redirects."""


class _BrokenBatch(ChunkError):
    """A chunk failed to decode; `events` are the good ones before it in the same batch."""

    def __init__(self, message: str, events: list[StreamEvent]) -> None:
        super().__init__(message)
        self.events = events


_NOT_PROMETHEUS = re.compile(r"\s*[<{\[]")


def _not_prometheus(ctype: str, text: str) -> bool:
    """An answer that is no Prometheus text: HTML or JSON by its content type or its first character."""
    return "html" in ctype or "json" in ctype or bool(_NOT_PROMETHEUS.match(text))


def _body_message(body: str) -> str:
    """The server's error message from a JSON error body, or the start of a text body."""
    try:
        message = openai_error_message(json.loads(body))
    except ValueError:
        message = None
    if message:
        return message
    return "" if _NOT_PROMETHEUS.match(body) else one_line(body, 160)
