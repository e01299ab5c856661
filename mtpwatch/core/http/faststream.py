"""A minimal HTTP/1.1 client for the token stream only: one POST, an SSE body, batched wake-ups.

Why it exists: vLLM sends every SSE chunk in its own TCP segment, at thousands of chunks a second.
Through httpx (httpcore + h11 + anyio) each segment costs a chain of coroutine resumptions; here an
`asyncio.Protocol` feeds each segment straight into the de-chunker and `SseDecoder`, and wakes the
consumer at most once per event-loop iteration, handing it every payload completed since
(`tests/bench/stream_cost.py` measures both). `VllmClient`'s stream uses it for plain `http://`
without a proxy; everything else (https, proxies, injected transports, the GETs) stays on httpx.

Failures are raised as the httpx exceptions the httpx path would raise, so the client words both
paths' failures alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import time
import urllib.request
import zlib
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any, Final, cast
from urllib.parse import urlsplit

import httpx

from mtpwatch.core.http.sse import SseDecoder
from mtpwatch.core.timeouts import within

_MAX_HEAD = 64 * 1024
_PAUSE_AT = 4096
"""Undelivered payloads at which reading pauses (a consumer that stopped reading)."""

# As h11: a chunk size is hex digits only (no sign, no '0x', no '_', no leading blank); a Content-Length
# is decimal digits only. `int()` alone accepts all of those, and a negative chunk size looped forever.
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;.*)?\Z", re.DOTALL)
_CONTENT_LENGTH = re.compile(r"[0-9]{1,19}\Z")
_BLANK_LINE = re.compile(rb"\n\r?\n")

_LENGTH: Final = 0
_CHUNKED: Final = 1
_CLOSE: Final = 2


def proxy_for(url: str) -> str | None:
    """The proxy the environment sets for a plain-http `url` (HTTP_PROXY, ALL_PROXY, minus NO_PROXY)."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get("http") or proxies.get("all")
    if not proxy:
        return None
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    for entry in proxies.get("no", "").replace(" ", "").lower().split(","):
        name, _, port = entry.removeprefix("*").lstrip(".").partition(":")
        if entry == "*" or (
            name and (host == name or host.endswith("." + name)) and (not port or port == str(parts.port))
        ):
            return None
    return proxy


class SseConnection(asyncio.Protocol):
    """One streaming POST's response: the parser of its status line and headers, then of its body
    (chunked, Content-Length or to close), and the consumer's side: batches of SSE payloads."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], float],
        read_interval: float = 0.0,
        read_timeout: float = 300.0,
    ) -> None:
        self._loop = loop
        self._clock = clock
        self._interval = read_interval
        self._delivered = 0
        self._throttled = False
        self.transport: asyncio.Transport | None = None
        self.head: asyncio.Future[None] = loop.create_future()
        self.status = 0
        self.reason = ""
        """The reason phrase (the server's, else the standard one)."""
        self.headers: dict[str, str] = {}
        """Response headers, names lower-cased."""
        self._hbuf = b""
        self._framing = _CLOSE
        self._left = 0  # Content-Length: bytes still due; chunked: bytes left in the current chunk
        self._cbuf = b""  # chunked: an incomplete size line
        self._trailers = False
        self._unzip: Any = None
        self.sse: SseDecoder | None = None
        """Set for a 200 answer: the body goes through it; otherwise the raw body is collected."""
        self.raw: list[bytes] = []
        self.pending: list[tuple[float, bytes]] = []
        """(arrival clock, SSE payload) not yet handed to the consumer."""
        self.complete = False
        self.error: Exception | None = None
        self.last_data = 0.0
        """Loop time of the latest bytes (keep-alive comments count, as for httpx's read timeout)."""
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._read_timeout = read_timeout
        self._timer: asyncio.TimerHandle | None = None

    # -- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's TCP transport has the Transport methods without subclassing asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)
        self.last_data = self._loop.time()

    def data_received(self, data: bytes) -> None:
        self.last_data = self._loop.time()
        if self.complete:
            return
        if not self.head.done():
            self._hbuf += data
            data = self._parse_head()
            if not data:
                return
        if self._framing == _CHUNKED:
            self._dechunk(data)
        elif self._framing == _LENGTH:
            data = data[: self._left]
            self._left -= len(data)
            self._body(data)
            if not self._left:
                self._finish()
        else:
            self._body(data)
        if self._interval and self._delivered >= 2 and not self._throttled and not self.complete:
            # `open_sse`'s read_interval: the segments that arrive meanwhile queue in the kernel and
            # come in one recv, one event-loop wake-up for many chunks
            self._throttled = True
            self._reading()
            self._loop.call_later(self._interval, self._unthrottle)

    def _unthrottle(self) -> None:
        self._throttled = False
        self._reading()

    def _reading(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        want = not (self._throttled or self._paused)
        if want != transport.is_reading():
            if want:
                transport.resume_reading()
            else:
                transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.complete:
            return
        if exc is not None:
            self.fail(httpx.ReadError(str(exc) or type(exc).__name__), exc)
        elif not self.head.done():
            self.fail(httpx.RemoteProtocolError("Server disconnected without sending a response."))
        elif self._framing == _CLOSE:
            self._finish()
        else:
            self.fail(
                httpx.RemoteProtocolError("peer closed connection without sending complete message body")
            )

    # -- parsing

    def _parse_head(self) -> bytes:
        """Parse the head once complete (skipping 1xx answers); returns the body bytes that followed."""
        buf = self._hbuf
        while True:
            # The head ends at the first blank line, its line ends CRLF or bare LF (as h11: \n\r?\n).
            blank = _BLANK_LINE.search(buf)
            if blank is None:
                if len(buf) > _MAX_HEAD:
                    self.fail(httpx.RemoteProtocolError("the response head is too large"))
                self._hbuf = buf
                return b""
            lines = buf[: blank.start()].decode("latin-1").replace("\r\n", "\n").split("\n")
            buf = buf[blank.end() :]
            parts = lines[0].split(" ", 2)
            try:
                if not parts[0].startswith("HTTP/"):
                    raise ValueError
                status = int(parts[1])
            except (IndexError, ValueError):
                self.fail(httpx.RemoteProtocolError(f"not an HTTP response: {lines[0][:60]!r}"))
                return b""
            if not 100 <= status < 200:
                break  # else 100 Continue and friends: the real answer follows
        self._hbuf = b""
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        self.status = status
        self.reason = parts[2].strip() if len(parts) > 2 else ""
        with contextlib.suppress(ValueError):
            self.reason = self.reason or HTTPStatus(status).phrase
        self.headers = headers
        if status == 200:
            self.sse = SseDecoder()
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("gzip", "deflate", "x-gzip"):
            self._unzip = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header, detected
        elif encoding not in ("identity", ""):
            self.fail(httpx.DecodingError(f"unsupported Content-Encoding {encoding!r}"))
            return b""
        length = headers.get("content-length")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._framing = _CHUNKED
        elif length is not None:
            if _CONTENT_LENGTH.match(length) is None:
                self.fail(httpx.RemoteProtocolError(f"bad Content-Length {length[:40]!r}"))
                return b""
            self._left = int(length)
            self._framing = _LENGTH
        self.head.set_result(None)
        if self._framing == _LENGTH and self._left == 0:
            self._finish()
        return buf

    def _dechunk(self, data: bytes) -> None:
        if self._cbuf:
            data = self._cbuf + data
            self._cbuf = b""
        pos, n = 0, len(data)
        while pos < n:
            left = self._left
            if left:
                end = pos + left
                if end >= n:
                    self._left = end - n
                    self._body(data[pos:] if pos else data)
                    return
                self._body(data[pos:end])
                self._left = 0
                pos = end
                continue
            eol = data.find(b"\n", pos)
            if eol < 0:
                self._cbuf = data[pos:]
                if len(self._cbuf) > 1024:
                    self.fail(httpx.RemoteProtocolError("bad chunked encoding: size line too long"))
                return
            line = data[pos:eol].rstrip()
            pos = eol + 1
            if self._trailers:
                if not line:
                    self._finish()
                    return
                continue
            if not line:
                continue  # the CRLF that ends a chunk's data
            m = _CHUNK_SIZE.match(line)
            if m is None:
                self.fail(httpx.RemoteProtocolError(f"bad chunked encoding: size line {line[:20]!r}"))
                return
            size = int(m.group(1), 16)
            if size == 0:
                self._trailers = True
            else:
                self._left = size

    def _body(self, data: bytes) -> None:
        if self.error is not None:
            return
        if self._unzip is not None:
            try:
                data = self._unzip.decompress(data)
            except zlib.error as exc:
                self.fail(httpx.DecodingError(f"bad {self.headers.get('content-encoding')} body: {exc}"), exc)
                return
        if self.sse is None:
            self.raw.append(data)
        elif payloads := self.sse.feed(data):
            self._deliver(payloads)

    def _deliver(self, payloads: list[bytes]) -> None:
        t = self._clock()
        self.pending += [(t, p) for p in payloads]
        self._delivered += len(payloads)
        self._wake()
        if not self._paused and len(self.pending) >= _PAUSE_AT:
            self._paused = True
            self._reading()

    def _finish(self) -> None:
        if self.complete:
            return
        if self._unzip is not None:
            unzip, self._unzip = self._unzip, None
            try:
                tail = unzip.flush()
            except zlib.error as exc:
                self.fail(httpx.DecodingError(f"bad compressed body: {exc}"), exc)
                return
            if tail:
                self._body(tail)
        self.complete = True
        if self.sse is not None and (rest := self.sse.close()):
            self._deliver(rest)
        self._wake()

    def fail(self, error: Exception, cause: BaseException | None = None) -> None:
        """Record a failure, wake the consumer and drop the connection."""
        if self.error is None and not self.complete:
            error.__cause__ = cause
            self.error = error
            if not self.head.done():
                self.head.set_exception(error)
                self.head.exception()  # retrieved here: nobody may be waiting any more
        self._wake()
        if self.transport is not None:
            self.transport.abort()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- consumer side

    async def _wait(self) -> None:
        """Until something new happens (payloads, the end, an error)."""
        if self._timer is None:
            self._arm()
        if self._paused:
            self._paused = False
            self._reading()
        waiter = self._loop.create_future()
        self._waiter = waiter
        await waiter

    def _arm(self) -> None:
        self._timer = self._loop.call_at(self.last_data + self._read_timeout, self._check_idle)

    def _check_idle(self) -> None:
        # A watchdog instead of a timeout per wait: it costs nothing per chunk.
        self._timer = None
        if self.complete or self.error is not None:
            return
        if self._loop.time() - self.last_data >= self._read_timeout:
            self.fail(httpx.ReadTimeout(f"no data for {self._read_timeout:g} s"))
        else:
            self._arm()

    async def read_body(self) -> bytes:
        """The whole body of a non-200 answer."""
        while not self.complete:
            if self.error is not None:
                raise self.error
            await self._wait()
        return b"".join(self.raw)

    async def batch(self) -> list[tuple[float, bytes]]:
        """The next (arrival clock, payload) pairs, at least one; `[]` at the end of the body. Raises
        httpx.RequestError once the connection broke or stayed silent for the read timeout (payloads
        that arrived before are handed out first)."""
        while not self.pending:
            if self.error is not None:
                raise self.error
            if self.complete:
                return []
            await self._wait()
        out = self.pending
        self.pending = []
        return out

    def close(self) -> None:
        """Drop the connection now (idempotent)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.abort()


async def _connect(
    host: str, port: int, factory: Callable[[], SseConnection], connect_timeout: float
) -> SseConnection:
    loop = asyncio.get_running_loop()
    errors: list[OSError] = []

    async def attempt() -> SseConnection | None:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        for family, _kind, proto_num, _name, address in infos:
            try:
                transport, protocol = await loop.create_connection(
                    factory, family=family, proto=proto_num, host=str(address[0]), port=int(address[1])
                )
                if protocol.transport is None:  # uvloop may call connection_made a tick later
                    protocol.transport = transport
                return protocol
            except OSError as exc:
                errors.append(exc)
        return None

    try:
        found = await within(connect_timeout, attempt())
    except TimeoutError as exc:
        raise httpx.ConnectTimeout(f"no connection within {connect_timeout:g} s") from exc
    except socket.gaierror as exc:
        raise httpx.ConnectError(str(exc)) from exc
    if found is not None:
        return found
    # As httpx: one reason, refused when every address refused ('localhost' is ::1 and 127.0.0.1).
    if not errors:
        raise httpx.ConnectError(f"no address found for {host}")
    refused = [e for e in errors if isinstance(e, ConnectionRefusedError)]
    cause = refused[0] if refused and len(refused) == len(errors) else errors[-1]
    raise httpx.ConnectError(str(cause)) from cause


async def open_sse(
    url: str,
    body: Mapping[str, Any],
    *,
    headers: Mapping[str, str],
    connect_timeout: float,
    read_timeout: float,
    read_interval: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
) -> SseConnection:
    """POST `body` as JSON to the plain-http `url` and return once the response head arrived.
    `read_interval` > 0 reads the socket at most that often once the first two payloads arrived,
    so a fast stream costs one wake-up per interval instead of one per chunk; payloads are stamped
    when read, so a chunk's time is late by at most the interval (only when chunks come faster: the
    first chunks, TTFT, and any chunk after a quiet gap are read and stamped on arrival).
    Raises httpx.RequestError: cannot connect, or the connection broke / stayed silent before the head."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or 80
    target = parts.path or "/"
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    lines = [
        f"POST {target} HTTP/1.1",
        f"Host: {parts.netloc}",
        "User-Agent: mtpwatch",
        "Accept: text/event-stream",
        "Accept-Encoding: identity",
        "Connection: close",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
    ]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data
    loop = asyncio.get_running_loop()
    connection = await _connect(
        host, port, lambda: SseConnection(loop, clock, read_interval, read_timeout), connect_timeout
    )
    assert connection.transport is not None
    connection.transport.write(request)
    connection._arm()
    try:
        await connection.head
    except BaseException:
        connection.close()
        raise
    return connection
