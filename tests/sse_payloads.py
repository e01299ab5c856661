"""`iter_sse_payloads`: a whole SSE byte stream, given as chunks, decoded at once (moved out of
`mtpwatch/core/http/sse.py`: only tests use it); `stream_events`: a client's stream one event at a
time (moved out of `VllmClient`, whose callers take the events a batch at a time)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from contextlib import aclosing

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest, GenerationStats, StreamEvent
from mtpwatch.core.http.sse import SseDecoder


def iter_sse_payloads(chunks: Iterable[bytes]) -> list[bytes]:
    """The payloads of every event in `chunks`, the last unterminated one included."""
    decoder = SseDecoder()
    out: list[bytes] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out


async def stream_events(
    client: VllmClient, request: GenerationRequest, *, stats: GenerationStats | None = None
) -> AsyncGenerator[StreamEvent, None]:
    """The events of `request`, one by one; closing the iterator closes the response at once."""
    async with aclosing(client._batches(request, stats)) as batches:
        async for batch in batches:
            for event in batch:
                yield event
