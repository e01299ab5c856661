"""`iter_sse_payloads`: a whole SSE byte stream, given as chunks, decoded at once (moved out of
`mtpwatch/core/http/sse.py`: only tests use it)."""

from __future__ import annotations

from collections.abc import Iterable

from mtpwatch.core.http.sse import SseDecoder


def iter_sse_payloads(chunks: Iterable[bytes]) -> list[bytes]:
    """The payloads of every event in `chunks`, the last unterminated one included."""
    decoder = SseDecoder()
    out: list[bytes] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    out.extend(decoder.close())
    return out
