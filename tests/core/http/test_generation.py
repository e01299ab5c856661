"""The streaming client end to end: bodies, fallbacks, result numbers, broken and cancelled streams."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpx
import pytest
from aiohttp import web

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import HttpStatusError, StreamError
from mtpwatch.core.http.generation import GenerationRequest, GenerationStats, StreamEvent
from tests.sse_payloads import stream_events

BASE = "http://127.0.0.1:8000"


class FakeClock:
    """Advances 0.1 s per reading, so every event has a distinct, known time."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.1
        return self.t


def sse(*objs: Any, done: bool = True) -> bytes:
    parts = [b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs]
    if done:
        parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def comp(
    text: str, ct: int | None = None, finish: str | None = None, ids: list[int] | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {"choices": [{"index": 0, "text": text, "finish_reason": finish, "token_ids": ids}]}
    if ct is not None:
        obj["usage"] = {"prompt_tokens": 5, "completion_tokens": ct, "total_tokens": 5 + ct}
    return obj


USAGE_FINAL = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}}


class Body(httpx.AsyncByteStream):
    """A streaming body: yields parts; a part that is an exception is raised; `None` blocks forever."""

    def __init__(self, parts: Iterable[bytes | BaseException | None]) -> None:
        self.parts = list(parts)
        self.closed = asyncio.Event()
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            if part is None:
                await asyncio.Event().wait()
            elif isinstance(part, BaseException):
                raise part
            else:
                self.sent += 1
                yield part

    async def aclose(self) -> None:
        self.closed.set()


def client_for(handler: Callable[[httpx.Request], httpx.Response], **kw: Any) -> VllmClient:
    return VllmClient(BASE, transport=httpx.MockTransport(handler), clock=FakeClock(), **kw)


async def test_completions_body_and_exact_counts() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/completions"
        seen.append(json.loads(request.content))
        body = sse(comp(" a", 1), comp(" b c d", 4), comp(" e f g h i", 9, "length"), USAGE_FINAL)
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    async with client_for(handler) as client:
        result = await client.generate(GenerationRequest("hi", "m", max_tokens=9, return_token_ids=True))
    assert seen[0]["stream"] is True and seen[0]["temperature"] == 0.0 and seen[0]["model"] == "m"
    assert seen[0]["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert seen[0]["return_token_ids"] is True and seen[0]["prompt"] == "hi"
    assert result.error is None and not result.cancelled and result.text == " a b c d e f g h i"
    assert result.completion_tokens == 9 and not result.approximate
    assert dict(result.tokens_per_chunk) == {1: 1, 3: 1, 5: 1}
    # FakeClock: start 0.1, events 0.2, 0.3, 0.4 (usage chunk 0.5 is not output).
    assert result.ttft_s == pytest.approx(0.1)
    assert result.decode_tok_s == pytest.approx(8 / 0.2)
    assert result.e2e_tok_s == pytest.approx(9 / 0.3)
    assert result.finish_reason == "length"


async def test_chat_body_uses_messages() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/chat/completions"
        seen.append(json.loads(request.content))
        role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        tok = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}
        return httpx.Response(200, content=sse(role, tok))

    async with client_for(handler) as client:
        result = await client.generate(GenerationRequest("hello", chat=True))
    assert seen[0]["messages"] == [{"role": "user", "content": "hello"}] and "model" not in seen[0]
    assert result.text == "Hi" and result.ttft_s == pytest.approx(0.2)  # role chunk at 0.2, "Hi" at 0.3


async def test_fallback_when_server_refuses_continuous_usage() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if "continuous_usage_stats" in body.get("stream_options", {}):
            msg = {
                "error": {"message": "Unrecognized field stream_options.continuous_usage_stats", "code": 400}
            }
            return httpx.Response(400, json=msg)
        return httpx.Response(
            200, content=sse(comp(" one"), comp(" two three", finish="length"), USAGE_FINAL)
        )

    async with client_for(handler) as client:
        result = await client.generate(GenerationRequest("p"))
    assert len(bodies) == 2 and bodies[1]["stream_options"] == {"include_usage": True}
    assert result.error is None and not result.cancelled and result.approximate and result.tokens_exact
    assert result.completion_tokens == 9  # the final usage total wins over the estimate (3)
    assert result.fallback is not None and "continuous_usage_stats" in result.fallback


async def test_server_that_ignores_continuous_usage_is_approximate() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=sse(comp(" one two"), comp(" three", finish="stop")))

    async with client_for(handler) as client:
        result = await client.generate(GenerationRequest("p"))
    assert result.error is None and not result.cancelled and result.approximate and not result.tokens_exact
    assert result.completion_tokens == 3 and result.fallback is not None


async def test_other_400_is_reported_not_retried() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(400, json={"error": {"message": "max_tokens must be at least 1"}})

    async with client_for(handler) as client:
        result = await client.generate(GenerationRequest("p", max_tokens=0))
    assert calls == 1
    assert (
        result.error is not None and "400" in result.error and "max_tokens must be at least 1" in result.error
    )
    assert "\n" not in result.error

    async with client_for(handler) as client:
        with pytest.raises(HttpStatusError):
            async for _ in stream_events(client, GenerationRequest("p")):
                pass


async def test_error_event_mid_stream_keeps_text() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        err = {"error": {"message": "EngineCore died", "type": "InternalServerError"}}
        return httpx.Response(200, content=sse(comp(" kept", 1), comp(" too", 2), err))

    async with client_for(handler) as client:
        result = await client.generate(GenerationRequest("p"))
    assert result.text == " kept too" and result.completion_tokens == 2
    assert result.error is not None and "EngineCore died" in result.error


async def test_body_that_raises_mid_stream_gives_result_with_error() -> None:
    body = Body(
        [sse(comp(" alpha", 1), done=False), sse(comp(" beta", 2), done=False), httpx.ReadError("reset")]
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=body)

    async with client_for(handler) as client:
        result = await client.generate(GenerationRequest("p"))
    assert result.text == " alpha beta" and result.completion_tokens == 2
    assert result.error is not None and "broke after 2 tokens" in result.error
    assert result.error is not None and not result.cancelled
    assert body.closed.is_set()


async def test_stream_that_ends_without_done_is_an_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=sse(comp(" x", 1), done=False))

    async with client_for(handler) as client:
        result = await client.generate(GenerationRequest("p"))
    assert result.text == " x" and result.error is not None and "[DONE]" in result.error


async def test_closing_the_iterator_closes_the_response() -> None:
    body = Body([sse(comp(" a", 1), done=False), sse(comp(" b", 2), done=False), None])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=body)

    async with client_for(handler) as client:
        stats = GenerationStats()
        events = stream_events(client, GenerationRequest("p"), stats=stats)
        first = await anext(events)
        assert first.text == " a" and not body.closed.is_set()
        await events.aclose()
        assert body.closed.is_set()
        result = stats.finish(cancelled=True)
    assert result.cancelled and result.text == " a"


async def test_cancelling_the_task_closes_the_response() -> None:
    body = Body([sse(comp(" a", 1), done=False), None])
    got_one = asyncio.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=body)

    def on_event(event: StreamEvent) -> None:
        got_one.set()

    async with client_for(handler) as client:
        stats = GenerationStats()
        task = asyncio.create_task(client.generate(GenerationRequest("p"), stats=stats, on_event=on_event))
        await asyncio.wait_for(got_one.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(body.closed.wait(), 10)
    result = stats.finish(cancelled=True)
    assert result.cancelled and result.text == " a" and result.completion_tokens == 1


async def test_connection_refused_before_stream_is_a_result_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("All connection attempts failed") from ConnectionRefusedError(111, "refused")

    async with client_for(handler) as client:
        result = await client.generate(GenerationRequest("p"))
    assert result.error == f"cannot connect to {BASE}: connection refused — is the server running?"
    assert result.completion_tokens == 0 and result.ttft_s is None and result.decode_tok_s is None


def test_stats_math_with_injected_clock() -> None:
    stats = GenerationStats(clock=lambda: 50.0)
    stats.start(10.0)
    stats.add(StreamEvent(12.0, "a", 1, 1))
    stats.add(StreamEvent(13.0, "bcd", 3, 4))
    stats.add(StreamEvent(14.0, "e", 1, 5, finish_reason="stop"))
    result = stats.finish()
    assert result.t_end == 50.0
    assert result.ttft_s == 2.0
    assert result.decode_tok_s == pytest.approx(4 / 2.0)
    assert result.e2e_tok_s == pytest.approx(5 / 4.0)
    assert dict(result.tokens_per_chunk) == {1: 2, 3: 1} and result.chunks == 3
    one = GenerationStats()
    one.start(0.0)
    one.add(StreamEvent(1.0, "a", 1, 1))
    r1 = one.finish(t=2.0)
    assert r1.decode_tok_s is None and r1.e2e_tok_s == pytest.approx(1.0)


# -------------------------------------------------------------------------- a real socket (aiohttp)


@contextlib.asynccontextmanager
async def serve(handler: Callable[[web.Request], Any]) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_real_socket_connection_dropped_mid_stream() -> None:
    client_has_two = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(sse(comp(" first", 1), done=False))
        await response.write(sse(comp(" second third", 3), done=False))
        await asyncio.wait_for(client_has_two.wait(), 10)
        assert request.transport is not None
        request.transport.close()  # the server dies mid-stream: no final chunk, no [DONE]
        return response

    def on_event(event: StreamEvent) -> None:
        if event.completion_tokens >= 3:
            client_has_two.set()

    async with serve(handler) as url, VllmClient(url) as client:
        result = await asyncio.wait_for(client.generate(GenerationRequest("p"), on_event=on_event), 20)
    assert result.text == " first second third"
    assert result.completion_tokens == 3
    assert result.error is not None and "broke after 3 tokens" in result.error and "\n" not in result.error


async def test_real_socket_cancel_closes_the_connection() -> None:
    got_first = asyncio.Event()
    server_saw_close = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(sse(comp(" a", 1), done=False))
        try:
            while True:  # keep-alives until the client goes away
                await response.write(b": keep-alive\n\n")
                await asyncio.sleep(0.02)
        except ConnectionResetError:  # aiohttp's "cannot write to closing transport"
            server_saw_close.set()
            return response
        except asyncio.CancelledError:
            server_saw_close.set()
            raise

    async with serve(handler) as url, VllmClient(url) as client:
        events = stream_events(client, GenerationRequest("p"))
        event = await asyncio.wait_for(anext(events), 10)
        assert event.text == " a"
        got_first.set()
        await events.aclose()
        await asyncio.wait_for(server_saw_close.wait(), 10)
    assert server_saw_close.is_set()


async def test_stream_raises_stream_error_type() -> None:
    body = Body([sse(comp(" a", 1), done=False), httpx.RemoteProtocolError("peer closed connection")])

    async with client_for(lambda r: httpx.Response(200, stream=body)) as client:
        with pytest.raises(StreamError, match="peer closed connection"):
            async for _ in stream_events(client, GenerationRequest("p")):
                pass


def test_per_request_spec_metrics_from_final_usage_chunk() -> None:
    """vLLM ≥ 0.27 with --per-request-spec-decode-metrics: the example values of PR #48915."""
    import json

    from mtpwatch.core.http.generation import ChunkDecoder, GenerationStats

    final = {
        "id": "cmpl-1",
        "object": "text_completion",
        "choices": [],
        "usage": {"prompt_tokens": 5, "total_tokens": 58, "completion_tokens": 53},
        "metrics": {
            "speculative_decoding": {
                "mean_acceptance_length": 1.2325581395348837,
                "draft_acceptance_rate": 0.07751937984496124,
                "acceptance_histogram": [39, 1, 0, 3],
                "num_spec_steps": 43,
                "num_accepted_draft_tokens": 10,
                "num_draft_tokens": 129,
                "num_spec_tokens": 3,
            }
        },
    }
    decoder, stats = ChunkDecoder(), GenerationStats(clock=lambda: 1.0)
    stats.start(0.0)
    event = decoder.decode(json.dumps(final), 1.0)
    assert event is not None and event.spec_metrics is not None
    stats.add(event)
    spec = stats.finish().spec_metrics
    assert spec is not None
    assert spec.acceptance_rate == pytest.approx(0.07751937984496124)
    assert spec.mean_acceptance_length == pytest.approx(1.2325581395348837)
    # marginal per position from the histogram: steps that accepted > i drafts / steps
    assert spec.per_position == pytest.approx((4 / 43, 3 / 43, 3 / 43))
    # vLLM's identity: Σ marginal × steps = accepted
    assert sum(spec.per_position) * spec.num_spec_steps == pytest.approx(spec.num_accepted_draft_tokens)


def test_per_request_spec_metrics_absent_or_malformed_is_none() -> None:
    from mtpwatch.core.http.generation import RequestSpecMetrics

    assert RequestSpecMetrics.from_json(None) is None
    assert RequestSpecMetrics.from_json({"num_spec_steps": "x"}) is None
    assert RequestSpecMetrics.from_json({"num_spec_steps": 1}) is None
