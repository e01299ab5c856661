"""The generation stream of `VllmClient`: POST a streaming completion, on the plain-http fast path
(`core.http.faststream`) or through httpx, decode its SSE events into `StreamEvent` batches, drop a vLLM
extension the server refuses (HTTP 400) and send again, and say in one line how a stream broke.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass

import httpx

from mtpwatch.core.http.errors import HttpStatusError, StreamError, describe_transport
from mtpwatch.core.http.failures import status_error, transport_error
from mtpwatch.core.http.faststream import open_sse
from mtpwatch.core.http.generation import (
    ChunkDecoder,
    ChunkError,
    GenerationRequest,
    GenerationStats,
    StreamEvent,
)
from mtpwatch.core.http.sse import DONE, SseDecoder

_Payloads = AsyncGenerator[list[tuple[float, bytes]], None]
"""Batches of (arrival clock, SSE payload), from either path."""


class StreamMethods:
    """The request/retry loop and the two stream readers (a mixin of `VllmClient`)."""

    base_url: str
    api_key: str | None
    _auth: dict[str, str]
    _timeout: float
    _stream_timeout: float
    _clock: Callable[[], float]
    _fast: bool
    _read_interval: float

    @property
    def _http(self) -> httpx.AsyncClient:
        """httpx's client (`VllmClient` makes it at its first use)."""
        raise NotImplementedError

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
            if self._fast:
                payloads = self._fast_payloads(url, body, stats, flags)
            else:
                payloads = self._httpx_payloads(request.path, url, body, stats, flags)
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
                    raise StreamError(self._broken_message(exc, decoder), url=url) from exc
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

    async def _fast_payloads(
        self, url: str, body: dict[str, object], stats: GenerationStats | None, flags: _Extensions
    ) -> _Payloads:
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
                try:
                    raw = await conn.read_body()
                except httpx.RequestError as exc:
                    raise transport_error(self.base_url, url, exc, self._timeout) from exc
                text = raw.decode("utf-8", "replace")
                raise self._refusal(url, conn.status, conn.reason, text, flags, stats)
            while payloads := await conn.batch():
                yield payloads
        finally:
            conn.close()

    async def _httpx_payloads(
        self, path: str, url: str, body: dict[str, object], stats: GenerationStats | None, flags: _Extensions
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
                try:
                    text = (await response.aread()).decode("utf-8", "replace")
                except httpx.RequestError as exc:
                    raise transport_error(self.base_url, url, exc, self._timeout) from exc
                raise self._refusal(url, response.status_code, response.reason_phrase, text, flags, stats)
            sse = SseDecoder()
            async for chunk in response.aiter_bytes():
                if payloads := sse.feed(chunk):
                    yield [(clock(), p) for p in payloads]
            if payloads := sse.close():
                yield [(clock(), p) for p in payloads]
        finally:
            await response.aclose()

    def _broken_message(self, exc: httpx.RequestError, decoder: ChunkDecoder) -> str:
        if isinstance(exc, httpx.ReadTimeout):
            why = f"no data for {self._stream_timeout:g} s"
        else:
            why = f"connection lost ({describe_transport(exc)})"
        return f"the stream from {self.base_url} broke after {decoder.count} tokens: {why}"


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
