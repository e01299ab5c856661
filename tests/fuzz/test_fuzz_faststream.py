"""Fuzzing the fast HTTP/1.1 stream path (`core.http.faststream`) against httpx on the same bytes.

The protocol object is fed the response exactly as the socket would hand it over, cut at arbitrary
points; httpx reads the same cuts through httpcore's in-memory network backend (h11 parses them, as it
does for a socket). No socket, no event loop turn per chunk: hundreds of examples take a few seconds.

Properties: on a valid response (chunked with extensions and trailers, Content-Length, read-to-close,
gzip, a 100 Continue first, CRLF or LF in the SSE body, any status) both paths read the same status and
the same payloads (or body); on any mangled response the fast path never raises, only records an
httpx.RequestError (the type the client turns into one line), and the client would not hang on it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from dataclasses import dataclass

import httpcore
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mtpwatch.core.http.faststream import SseConnection
from mtpwatch.core.http.sse import SseDecoder


class FakeTransport:
    """The transport calls the protocol makes (socket-free)."""

    def __init__(self) -> None:
        self.reading = True
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing

    def is_reading(self) -> bool:
        return self.reading

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def abort(self) -> None:
        self.closing = True

    def write(self, data: bytes) -> None:
        pass


@dataclass
class Outcome:
    status: int | None
    payloads: list[bytes] | None  # 200: the SSE payloads; otherwise None
    body: bytes | None  # not 200: the raw (decoded) body
    error: BaseException | None


def run_fast(chunks: list[bytes]) -> Outcome:
    loop = asyncio.new_event_loop()
    try:
        proto = SseConnection(loop, lambda: 0.0)
        transport = FakeTransport()
        proto.connection_made(transport)  # type: ignore[arg-type]
        for chunk in chunks:
            if transport.closing:
                break
            proto.data_received(chunk)
            # A consumer that keeps up: what was paused is read again (as `wait()` does).
            if not transport.reading and not transport.closing:
                transport.reading = True
                proto._paused = False
        if not transport.closing:
            proto.connection_lost(None)  # the server closed after its last byte
        if not proto.head.done() or proto.head.exception() is not None:
            error = proto.head.exception() if proto.head.done() else None
            assert proto.head.done(), "head never completed after the connection ended"
            return Outcome(None, None, None, error)
        assert proto.complete or proto.error is not None, "body neither complete nor failed at the end"
        payloads = [p for _, p in proto.pending] if proto.sse is not None else None
        body = b"".join(proto.raw) if proto.sse is None else None
        return Outcome(proto.status, payloads, body, proto.error)
    finally:
        loop.close()


_LOOP = asyncio.new_event_loop()
_TRANSPORT = httpx.AsyncHTTPTransport()  # built once: its TLS context costs more than an example


async def _httpx(chunks: list[bytes]) -> Outcome:
    _TRANSPORT._pool = httpcore.AsyncConnectionPool(network_backend=httpcore.AsyncMockBackend(chunks))
    client = httpx.AsyncClient(transport=_TRANSPORT)
    status = None
    try:
        async with client.stream("POST", "http://127.0.0.1:9/v1/completions", content=b"{}") as resp:
            status = resp.status_code
            if status != 200:
                return Outcome(status, None, await resp.aread(), None)
            sse, out = SseDecoder(), []
            async for data in resp.aiter_bytes():
                out += sse.feed(data)
            return Outcome(status, out + sse.close(), None, None)
    except httpx.HTTPError as exc:
        return Outcome(status, None, None, exc)
    finally:
        await _TRANSPORT._pool.aclose()


def run_httpx(chunks: list[bytes]) -> Outcome:
    return _LOOP.run_until_complete(_httpx(chunks))


# ----------------------------------------------------------------------------------- valid responses

PAYLOAD = st.one_of(
    st.builds(
        lambda t, n: json.dumps({"choices": [{"index": 0, "text": t}], "usage": {"completion_tokens": n}},
                                ensure_ascii=False).encode(),
        st.text(max_size=10), st.integers(0, 10**6),
    ),
    st.binary(max_size=20).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
    st.just(b"[DONE]"),
)  # fmt: skip


@st.composite
def sse_body(draw: st.DrawFn) -> bytes:
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    parts = []
    for payload in draw(st.lists(PAYLOAD, max_size=8)):
        if draw(st.booleans()):
            parts.append(b": keep-alive" + eol + eol)
        parts.append(b"data: " + payload + eol + eol)
    return b"".join(parts)


@st.composite
def chunked(draw: st.DrawFn, body: bytes) -> bytes:
    wire, i = b"", 0
    while i < len(body):
        n = draw(st.integers(1, max(1, len(body) - i)))
        size = f"{n:x}"
        size = size.upper() if draw(st.booleans()) else size
        ext = draw(st.sampled_from([b"", b";x=1", b'; name="v"']))
        wire += size.encode() + ext + b"\r\n" + body[i : i + n] + b"\r\n"
        i += n
    trailer = draw(st.sampled_from([b"", b"X-Trailer: 1\r\n", b"A: 1\r\nB: 2\r\n"]))
    return wire + b"0\r\n" + trailer + b"\r\n"


@st.composite
def response(draw: st.DrawFn) -> bytes:
    status = draw(st.sampled_from([200, 200, 200, 400, 404, 500, 503]))
    body = draw(sse_body()) if status == 200 else draw(st.binary(max_size=60))
    headers = [b"Content-Type: text/event-stream" if status == 200 else b"Content-Type: application/json"]
    if draw(st.booleans()):
        body = gzip.compress(body, mtime=0)
        headers.append(b"Content-Encoding: gzip")
    framing = draw(st.sampled_from(["chunked", "length", "close"]))
    if framing == "chunked":
        headers.append(b"Transfer-Encoding: chunked")
        wire_body = draw(chunked(body))
    elif framing == "length":
        headers.append(f"Content-Length: {len(body)}".encode())
        wire_body = body
    else:
        headers.append(b"Connection: close")
        wire_body = body
    reason = {200: b"OK", 400: b"Bad Request", 404: b"Not Found", 500: b"Internal Server Error"}.get(
        status, b""
    )
    head = b"HTTP/1.1 %d %s\r\n" % (status, reason) + b"".join(h + b"\r\n" for h in headers) + b"\r\n"
    if draw(st.booleans()):
        head = b"HTTP/1.1 100 Continue\r\n\r\n" + head
    return head + wire_body


def split(wire: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(wire)) for c in cuts if c})
    return [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True) if b > a]


@given(response(), st.lists(st.integers(0, 2000), max_size=40))
def test_valid_responses_read_the_same_as_httpx(wire: bytes, cuts: list[int]) -> None:
    chunks = split(wire, cuts)
    ref = run_httpx(chunks)
    assert ref.error is None, ref.error  # the generator makes valid HTTP: httpx must accept it
    fast = run_fast(chunks)
    assert fast.error is None, fast.error
    assert (fast.status, fast.payloads, fast.body) == (ref.status, ref.payloads, ref.body)
    # One segment per byte: every size line, CRLF and UTF-8 character cut everywhere.
    assert run_fast([bytes([b]) for b in wire]) == fast


# ---------------------------------------------------------------------------------- mangled responses

BAD_SIZES = [b"-5", b"+5", b"5_0", b" 5", b"0x5", b"ffffffffffffffffffff", b"", b"g", b"5 5", b"\xff"]


@st.composite
def mangled(draw: st.DrawFn) -> bytes:
    wire = draw(response())
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(wire)))
        choice = draw(st.integers(0, 3))
        if choice == 0:  # delete a few bytes
            wire = wire[:pos] + wire[pos + draw(st.integers(1, 5)) :]
        elif choice == 1:  # insert junk
            wire = wire[:pos] + draw(st.binary(min_size=1, max_size=5)) + wire[pos:]
        elif choice == 2:  # a bad chunk size line
            wire = wire[:pos] + b"\r\n" + draw(st.sampled_from(BAD_SIZES)) + b"\r\n" + wire[pos:]
        else:  # a bad Content-Length
            value = draw(st.sampled_from([b"-1", b"+3", b"1_0", b"x", b"99999999999999999999", b"3, 4"]))
            wire = wire.replace(b"Connection: close", b"Content-Length: " + value, 1)
            wire = wire.replace(b"Content-Length: ", b"Content-Length: " + value + b"0", 1)
    return wire


def _check_error(outcome: Outcome) -> None:
    if outcome.error is not None:
        assert isinstance(outcome.error, httpx.RequestError), repr(outcome.error)
        assert str(outcome.error) and "\n" not in str(outcome.error)


@given(mangled(), st.lists(st.integers(0, 2000), max_size=20))
def test_mangled_responses_fail_only_with_httpx_errors(wire: bytes, cuts: list[int]) -> None:
    chunks = split(wire, cuts)
    fast = run_fast(chunks)
    _check_error(fast)
    ref = run_httpx(chunks)
    if ref.error is None and fast.error is None and ref.status == fast.status:
        # Where both read a whole answer they read the same one.
        assert (fast.payloads, fast.body) == (ref.payloads, ref.body)


@given(st.lists(st.binary(max_size=40), max_size=12))
def test_arbitrary_bytes_fail_only_with_httpx_errors(chunks: list[bytes]) -> None:
    _check_error(run_fast([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", *chunks]))
    _check_error(run_fast(chunks))


def test_head_ends_at_the_first_blank_line() -> None:
    # Found by the fuzzer: a bare-LF blank line before a later CRLF one ends the head (as h11).
    wire = b"HTTP/1.1 400\n\n Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    fast, ref = run_fast([wire]), run_httpx([wire])
    assert (fast.status, fast.body, fast.error) == (ref.status, ref.body, None) == (400, wire[14:], None)
    wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 400\n\r\nd\r\nContent-Length: 0\r\n\r\n"
    fast, ref = run_fast([wire]), run_httpx([wire])
    assert (
        (fast.status, fast.body, fast.error)
        == (ref.status, ref.body, None)
        == (400, wire[wire.index(b"d\r\n") :], None)
    )


@pytest.mark.timeout(20)
@pytest.mark.parametrize("size", BAD_SIZES, ids=[repr(s) for s in BAD_SIZES])
def test_bad_chunk_size_is_an_error(size: bytes) -> None:
    wire = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\ndata:\r\n"
        + size
        + b"\r\nxxxxx\r\n0\r\n\r\n"
    )
    fast = run_fast([wire])
    assert isinstance(fast.error, httpx.RemoteProtocolError), fast
    assert run_httpx([wire]).error is not None


@pytest.mark.timeout(20)
@pytest.mark.parametrize("length", [b"-1", b"+3", b"1_0", b"99999999999999999999999", b"3, 4"])
def test_bad_content_length_is_an_error(length: bytes) -> None:
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: " + length + b"\r\n\r\ndata: 1\n\n"
    fast = run_fast([wire])
    assert isinstance(fast.error, httpx.RemoteProtocolError), fast
    assert run_httpx([wire]).error is not None
