"""Fuzzing the SSE decoder and the chunk decoder behind it.

- `SseDecoder` never raises, gives the same payloads however the bytes are split, and agrees with a
  line-by-line reading of the SSE spec (written here independently: lines end at CRLF, LF or CR; `data`
  fields are joined with LF; a blank line dispatches; at the end the last event is handed over, as the
  decoder documents).
- `ChunkDecoder.decode` raises only `ChunkError`, whatever the payload.
"""

from __future__ import annotations

import contextlib
import json
import re

from hypothesis import given
from hypothesis import strategies as st

from mtpwatch.core.http.generation import ChunkDecoder, ChunkError
from mtpwatch.core.http.sse import SseDecoder
from tests.sse_payloads import iter_sse_payloads


def reference_payloads(stream: bytes) -> list[bytes]:
    out: list[bytes] = []
    data: list[bytes] | None = None
    for line in re.split(rb"\r\n|\r|\n", stream):
        if not line:
            if data is not None:
                out.append(b"\n".join(data))
            data = None
            continue
        if line.startswith(b":"):
            continue
        name, colon, value = line.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            data = [*(data or []), value]
    if data is not None:
        out.append(b"\n".join(data))
    return out


LINE_PIECES = st.sampled_from(
    [b"data: ", b"data:", b"data", b": keep-alive", b"event: x", b"id: 1", b"retry: 5", b"{", b"}", b"[DONE]",
     b"\xe2\x80\xa8", b"\xc3", b"\xa9", b" ", b"x"]
)  # fmt: skip
EOLS = st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n", b"\r\n\r\n"])
STREAMS = st.lists(st.one_of(LINE_PIECES, EOLS, st.binary(max_size=6)), max_size=40).map(b"".join)


def _split(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(stream)) for c in cuts})
    return [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]


@given(STREAMS, st.lists(st.integers(0, 400), max_size=30))
def test_sse_any_split_gives_the_spec_payloads(stream: bytes, cuts: list[int]) -> None:
    expected = reference_payloads(stream)
    assert iter_sse_payloads([stream]) == expected
    assert iter_sse_payloads(_split(stream, cuts)) == expected
    assert iter_sse_payloads([bytes([b]) for b in stream]) == expected


@given(st.lists(st.binary(max_size=50), max_size=20))
def test_sse_arbitrary_bytes_never_raise(chunks: list[bytes]) -> None:
    decoder = SseDecoder()
    out = [p for c in chunks for p in decoder.feed(c)] + decoder.close()
    assert all(isinstance(p, bytes) for p in out)
    assert decoder.close() == []  # nothing left behind


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=12,
)
KEYS = st.sampled_from(
    ["choices", "usage", "delta", "text", "index", "finish_reason", "token_ids", "completion_tokens",
     "prompt_tokens", "content", "role", "reasoning", "reasoning_content", "tool_calls", "metrics",
     "speculative_decoding", "error", "object", "message"]
)  # fmt: skip
# Events shaped like vLLM's, with every value drawn from anywhere.
SHAPED = st.recursive(
    JSON,
    lambda kids: st.lists(kids, max_size=2) | st.dictionaries(KEYS, kids, max_size=4),
    max_leaves=20,
)


@given(st.lists(st.one_of(SHAPED.map(lambda o: json.dumps(o).encode()), st.binary(max_size=30)), max_size=6))
def test_chunk_decoder_raises_only_chunk_error(payloads: list[bytes]) -> None:
    decoder = ChunkDecoder()
    for i, payload in enumerate(payloads):
        try:
            event = decoder.decode(payload, float(i))
        except ChunkError as exc:
            assert str(exc) and "\n" not in str(exc)
            continue
        if event is not None:
            assert isinstance(event.text, str) and isinstance(event.tokens, int)


def test_chunk_decoder_deeply_nested_payload() -> None:
    # json.loads raises RecursionError (not ValueError) on deep nesting.
    for payload in (b"[" * 100_000, b'{"choices":' * 50_000):
        with contextlib.suppress(ChunkError):
            ChunkDecoder().decode(payload, 0.0)
