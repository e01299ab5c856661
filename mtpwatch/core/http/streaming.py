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
        return status_error(self.api_key, url, status, reason, text)

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
            raise transport_error(self.base_url, url, exc, self._timeout) from exc

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
