"""The fast streaming path (`core.faststream`) against the httpx path: same results, same errors."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import ServerError
from mtpwatch.core.http.faststream import proxy_for
from mtpwatch.core.http.generation import GenerationRequest, GenerationResult, StreamEvent
from mtpwatch.sim.harness import running_sim
from tests.sse_payloads import stream_events

PATHS = [pytest.param(True, id="fast"), pytest.param(False, id="httpx")]


def parity(result: GenerationResult) -> tuple[object, ...]:
    """What both paths must agree on (timing differs run to run)."""
    return (
        result.text,
        result.reasoning,
        result.token_ids,
        result.prompt_tokens,
        result.completion_tokens,
        dict(result.tokens_per_chunk),
        result.chunks,
        result.finish_reason,
        result.approximate,
        result.tokens_exact,
        result.error,
        result.fallback,
    )


# -------------------------------------------------------------------------- the simulator, both paths


@pytest.mark.parametrize("chat", [False, True])
async def test_same_result_as_httpx_on_the_simulator(chat: bool) -> None:
    request = GenerationRequest("Explain memory bandwidth.", chat=chat, max_tokens=120, return_token_ids=True)
    results = {}
    for fast in (True, False):
        # A fresh simulator per path: its acceptance RNG then makes the same chunks for both.
        async with running_sim(speed=200, seed=3) as url, VllmClient(url, fast_stream=fast) as client:
            assert client.fast_stream is fast
            events: list[StreamEvent] = []
            results[fast] = await asyncio.wait_for(client.generate(request, on_event=events.append), 60)
            assert [e.completion_tokens for e in events] == sorted(e.completion_tokens for e in events)
    fast_result, httpx_result = results[True], results[False]
    assert fast_result.error is None and not fast_result.cancelled and fast_result.completion_tokens == 120
    assert fast_result.token_ids is not None and len(fast_result.token_ids) == 120
    assert max(fast_result.tokens_per_chunk) > 1  # MTP chunks carry several tokens
    assert parity(fast_result) == parity(httpx_result)
    assert fast_result.ttft_s is not None and fast_result.decode_tok_s is not None


async def test_default_path_is_fast_for_plain_http_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with VllmClient("127.0.0.1:8000") as plain, VllmClient("https://box:8443") as tls:
        assert plain.fast_stream is True
        assert tls.fast_stream is False
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    assert proxy_for("http://127.0.0.1:8000") == "http://proxy:3128"
    async with VllmClient("127.0.0.1:8000") as proxied:
        assert proxied.fast_stream is False
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert proxy_for("http://127.0.0.1:8000") is None
    assert proxy_for("http://spark.local:8000") == "http://proxy:3128"
    monkeypatch.setenv("NO_PROXY", ".local")
    assert proxy_for("http://spark.local:8000") is None
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.setenv("all_proxy", "socks5://proxy:1080")
    monkeypatch.delenv("NO_PROXY")
    assert proxy_for("http://127.0.0.1:8000") == "socks5://proxy:1080"


# ------------------------------------------------------------------------- a raw server, exact bytes


@dataclass
class Seen:
    heads: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)


Script = Callable[[asyncio.StreamWriter, int], Awaitable[None]]
"""Writes one answer; gets the request's index (0, 1, … for retries)."""


@asynccontextmanager
async def raw_server(script: Script) -> AsyncIterator[tuple[str, Seen]]:
    seen = Seen()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            length = int(
                next(ln.split(":")[1] for ln in head.split("\r\n") if ln.lower().startswith("content-length"))
            )
            seen.heads.append(head)
            seen.bodies.append(json.loads(await reader.readexactly(length)))
            await script(writer, len(seen.heads) - 1)
            await reader.read()  # until the client closes
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            seen.closed.set()
            writer.close()

    tasks: set[asyncio.Task[None]] = set()

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        await handle(reader, writer)

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def send(writer: asyncio.StreamWriter, parts: Sequence[bytes], *, close: bool = False) -> None:
    for part in parts:
        writer.write(part)
        await writer.drain()
        await asyncio.sleep(0.001)  # separate segments, as a real server's
    if close:
        writer.close()


def event(text: str, ct: int, finish: str | None = None) -> bytes:
    obj = {
        "choices": [{"index": 0, "text": text, "finish_reason": finish}],
        "usage": {"prompt_tokens": 2, "completion_tokens": ct},
    }
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


SSE = (
    b": keep-alive\n\n"
    + event(" caf\u00e9 \u2014", 1)
    + event(" \u2028line \U0001f680", 3)
    + event(" end", 5, "length")
    + b'data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":5}}\n\n'
    + b"data: [DONE]\n\n"
)
TEXT = " caf\u00e9 \u2014 \u2028line \U0001f680 end"


def chunked(body: bytes, sizes: Sequence[int], *, ext: bool = False, trailer: bool = False) -> list[bytes]:
    """Chunked encoding of `body` in chunks of the given sizes (cycled), then split oddly on the wire."""
    wire, i, k = b"", 0, 0
    while i < len(body):
        n = sizes[k % len(sizes)]
        piece = body[i : i + n]
        wire += f"{len(piece):x}{';x=1' if ext else ''}\r\n".encode() + piece + b"\r\n"
        i, k = i + n, k + 1
    wire += b"0\r\n" + (b"X-Trailer: 1\r\n" if trailer else b"") + b"\r\n"
    # Segments that cut size lines, CRLFs and UTF-8 characters anywhere.
    return [wire[j : j + 7] for j in range(0, len(wire), 7)]


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


@pytest.mark.parametrize("fast", PATHS)
@pytest.mark.parametrize(
    "framing", ["chunked", "chunked-ext-trailer", "chunked-crlf-sse", "content-length", "close", "continue"]
)
async def test_framings_and_splits_give_the_same_result(fast: bool, framing: str) -> None:
    body = SSE.replace(b"\n", b"\r\n") if framing == "chunked-crlf-sse" else SSE

    async def script(writer: asyncio.StreamWriter, _: int) -> None:
        if framing.startswith("chunked"):
            ext = framing == "chunked-ext-trailer"
            await send(
                writer,
                [
                    HEAD + b"Transfer-Encoding: chunked\r\n\r\n",
                    *chunked(body, [5, 1, 13, 40], ext=ext, trailer=ext),
                ],
            )
        elif framing == "content-length":
            wire = HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
            await send(writer, [wire[j : j + 11] for j in range(0, len(wire), 11)])
        elif framing == "continue":
            await send(
                writer,
                [
                    b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD + f"Content-Length: {len(body)}\r\n\r\n".encode(),
                    body,
                ],
            )
        else:  # no length, no chunking: the body ends when the server closes
            await send(writer, [HEAD + b"Connection: close\r\n\r\n", body[:9], body[9:]], close=True)

    async with raw_server(script) as (url, seen), VllmClient(url, fast_stream=fast, api_key="k1") as client:
        result = await asyncio.wait_for(client.generate(GenerationRequest("p", model="m")), 20)
    assert result.error is None, result.error
    assert result.text == TEXT
    assert (result.completion_tokens, dict(result.tokens_per_chunk), result.finish_reason) == (
        5,
        {1: 1, 2: 2},
        "length",
    )
    assert "authorization: bearer k1" in seen.heads[0].lower()
    assert (
        seen.bodies[0]["prompt"] == "p" and seen.bodies[0]["stream_options"]["continuous_usage_stats"] is True
    )


@pytest.mark.parametrize("fast", PATHS)
async def test_connection_dropped_mid_stream_keeps_what_arrived(fast: bool) -> None:
    async def script(writer: asyncio.StreamWriter, _: int) -> None:
        wire = chunked(event(" one", 1) + event(" two", 2) + b'data: {"choi', [300])
        await send(writer, [HEAD + b"Transfer-Encoding: chunked\r\n\r\n", *wire[:-1]])
        writer.transport.abort()

    async with raw_server(script) as (url, _), VllmClient(url, fast_stream=fast) as client:
        result = await asyncio.wait_for(client.generate(GenerationRequest("p")), 20)
    assert result.text == " one two" and result.completion_tokens == 2
    assert result.error is not None and "broke after 2 tokens" in result.error and "\n" not in result.error


@pytest.mark.parametrize(
    ("status", "body", "fragment"),
    [
        (
            400,
            b'{"object":"error","message":"max_tokens is too large","code":400}',
            "max_tokens is too large",
        ),
        (401, b'{"error":"Unauthorized"}', "pass --api-key or set VLLM_API_KEY"),
        (500, b"Internal Server Error", "server error: Internal Server Error"),
        (503, b"", "(engine dead or still starting?)"),
    ],
)
async def test_http_errors_are_the_same_one_line(status: int, body: bytes, fragment: str) -> None:
    async def script(writer: asyncio.StreamWriter, _: int) -> None:
        reason = {
            400: "Bad Request",
            401: "Unauthorized",
            500: "Internal Server Error",
            503: "Service Unavailable",
        }
        head = f"HTTP/1.1 {status} {reason[status]}\r\nContent-Type: application/json\r\n"
        await send(writer, [head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode(), body])

    messages = []
    async with raw_server(script) as (url, _):
        for fast in (True, False):
            async with VllmClient(url, fast_stream=fast, api_key="") as client:
                result = await asyncio.wait_for(client.generate(GenerationRequest("p")), 20)
            assert result.error is not None and "\n" not in result.error
            messages.append(result.error)
    assert messages[0] == messages[1]
    assert fragment in messages[0]


async def test_refused_extension_is_retried_without_it_on_the_fast_path() -> None:
    async def script(writer: asyncio.StreamWriter, index: int) -> None:
        if index == 0:
            body = b'{"object":"error","message":"unknown field stream_options.continuous_usage_stats"}'
            await send(
                writer, [f"HTTP/1.1 400 Bad Request\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body]
            )
        else:
            await send(writer, [HEAD + b"Transfer-Encoding: chunked\r\n\r\n", *chunked(SSE, [64])])

    async with raw_server(script) as (url, seen), VllmClient(url, fast_stream=True) as client:
        result = await asyncio.wait_for(client.generate(GenerationRequest("p")), 20)
    assert len(seen.bodies) == 2 and "continuous_usage_stats" not in seen.bodies[1]["stream_options"]
    assert (
        result.error is None and not result.cancelled and result.text == TEXT and result.fallback is not None
    )


@pytest.mark.parametrize("fast", PATHS)
async def test_silent_server_times_out_but_keep_alives_do_not(fast: bool) -> None:
    async def script(writer: asyncio.StreamWriter, index: int) -> None:
        parts = [HEAD + b"Content-Length: 100000\r\n\r\n", event(" a", 1)]
        if index == 1:  # keep-alives every 0.1 s for longer than the timeout, then the end
            parts += [b": keep-alive\n\n"] * 8
            body = event(" b", 2, "stop") + b"data: [DONE]\n\n"
            await send(writer, parts)
            for _ in range(8):
                writer.write(b": keep-alive\n\n")
                await asyncio.sleep(0.1)
            writer.write(body)
            writer.close()
            return
        await send(writer, parts)  # then nothing

    async with (
        raw_server(script) as (url, _),
        VllmClient(url, fast_stream=fast, stream_timeout=0.5) as client,
    ):
        silent = await asyncio.wait_for(client.generate(GenerationRequest("p")), 20)
        alive = await asyncio.wait_for(client.generate(GenerationRequest("p")), 20)
    assert silent.error is not None and "broke after 1 tokens: no data for 0.5 s" in silent.error
    assert silent.text == " a"
    assert alive.text == " a b" and alive.finish_reason == "stop"


async def test_cancel_closes_the_socket() -> None:
    first = asyncio.Event()

    async def script(writer: asyncio.StreamWriter, _: int) -> None:
        await send(
            writer, [HEAD + b"Transfer-Encoding: chunked\r\n\r\n", *chunked(event(" a", 1), [100])[:-1]]
        )
        # the terminating chunk is never sent: the stream stays open until the client goes

    def on_event(_: StreamEvent) -> None:
        first.set()

    async with raw_server(script) as (url, seen), VllmClient(url, fast_stream=True) as client:
        task = asyncio.create_task(client.generate(GenerationRequest("p"), on_event=on_event))
        await asyncio.wait_for(first.wait(), 20)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(seen.closed.wait(), 10)


async def test_refused_connection_is_the_same_message() -> None:
    port = free_port()
    messages = []
    for fast in (True, False):
        async with VllmClient(f"127.0.0.1:{port}", fast_stream=fast) as client:
            with pytest.raises(ServerError) as info:
                async for _ in stream_events(client, GenerationRequest("p")):
                    pass
        messages.append(str(info.value))
    assert (
        messages[0]
        == messages[1]
        == f"cannot connect to http://127.0.0.1:{port}: connection refused — is the server running?"
    )


async def test_read_interval_holds_a_fast_run_of_chunks_and_stamps_a_chunk_after_a_gap_on_arrival() -> None:
    """`read_interval` (the console's 10 ms; 0.4 s here, to stand clear of a busy machine): chunks
    that follow a read within the interval wait for the next read, one wake-up for all of them, and
    carry its time; the first chunks and a chunk after a quiet gap are read and stamped on arrival.
    The text and the counts are those of a stream read chunk by chunk. Stamps can only come later
    than the writes on a slow machine, so each bound below holds however slow it is, except the two
    "on arrival" ones, which allow 0.3 s."""
    written: dict[str, float] = {}
    burst = [f" w{i}" for i in range(8)]

    async def script(writer: asyncio.StreamWriter, _: int) -> None:
        async def put(text: str, ct: int, finish: str | None = None) -> None:
            written[text] = time.monotonic()
            writer.write(event(text, ct, finish) + (b"data: [DONE]\n\n" if finish else b""))
            await writer.drain()

        writer.write(HEAD + b"Connection: close\r\n\r\n")
        await put(" a", 1)
        await asyncio.sleep(0.05)
        await put(" b", 2)  # the second chunk: from this read on, reads are paced
        for i, text in enumerate(burst):
            await asyncio.sleep(0.01)
            await put(text, 3 + i)
        await asyncio.sleep(1.0)  # a quiet gap, longer than the interval
        await put(" z", 11, "stop")
        writer.close()

    events: list[StreamEvent] = []
    async with (
        raw_server(script) as (url, _),
        VllmClient(url, fast_stream=True, read_interval=0.4, clock=time.monotonic) as client,
    ):
        result = await asyncio.wait_for(client.generate(GenerationRequest("p"), on_event=events.append), 20)
    assert result.error is None, result.error
    assert result.text == " a b" + "".join(burst) + " z" and result.completion_tokens == 11
    stamp = {e.text: e.t for e in events if e.text}
    assert stamp[" a"] - written[" a"] < 0.3 and stamp[" b"] - written[" b"] < 0.3  # on arrival
    # The run after the second chunk waited for the paced read: 0.4 s after " b", not on arrival.
    for text in burst:
        assert stamp[text] >= stamp[" b"] + 0.4 - 0.01, (text, stamp[text] - stamp[" b"])
    assert len({stamp[text] for text in burst}) < len(burst)  # fewer reads than chunks
    assert stamp[" z"] - written[" z"] < 0.3  # after the gap: on arrival again
