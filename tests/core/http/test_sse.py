"""SSE decoding and chunk → token counting, on the real vLLM 0.32 transcripts in tests/data."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from mtpwatch.core.http.generation import ChunkDecoder, ChunkError, GenerationStats, estimate_tokens
from mtpwatch.core.http.sse import DONE, SseDecoder
from tests.datadir import DataDir
from tests.sse_payloads import iter_sse_payloads


def load_transcript(path: Path) -> tuple[dict[str, Any], bytes]:
    """(summary header, SSE body bytes) of a recorded transcript."""
    text = path.read_text(encoding="utf-8")
    summary = json.loads(re.search(r"^# summary: (.*)$", text, re.M).group(1))  # type: ignore[union-attr]
    body = text.split("\n\n", 1)[1]  # after the HTTP status line and headers
    return summary, body.encode("utf-8")


def reference_payloads(body: bytes) -> list[bytes]:
    """Independent reference: every `data: ` line of the transcript, in order."""
    return [m.group(1) for m in re.finditer(rb"^data: (.*)$", body, re.M)]


def split_randomly(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, 40)
        out.append(data[i : i + n])
        i += n
    return out


def test_fixtures_are_present(data: DataDir) -> None:
    assert len(data.glob("sse-*.txt")) >= 5


def test_sse_decoder_matches_reference_however_split(sse_transcript: Path) -> None:
    _, body = load_transcript(sse_transcript)
    expected = reference_payloads(body)
    assert expected[-1] == DONE
    assert iter_sse_payloads([body]) == expected
    assert iter_sse_payloads([body[i : i + 1] for i in range(len(body))]) == expected
    for seed in range(3):
        assert iter_sse_payloads(split_randomly(body, seed)) == expected
    crlf = body.replace(b"\n", b"\r\n")
    assert iter_sse_payloads(split_randomly(crlf, 7)) == expected
    # A CR that ends one network chunk, its LF starting the next, must not make an extra line.
    assert iter_sse_payloads([crlf[i : i + 1] for i in range(len(crlf))]) == expected


def test_sse_comments_fields_multiline_and_flush() -> None:
    stream = (
        b": keep-alive\n\n"
        b'event: message\nid: 3\ndata: {"a":1}\n\n'
        b"data:no-space\n\n"
        b"data: line one\ndata: line two\n\n"
        b"retry: 100\n\n"
        b"data: [DONE]"  # no trailing blank line: handed over at close
    )
    assert iter_sse_payloads([stream]) == [b'{"a":1}', b"no-space", b"line one\nline two", DONE]


def test_sse_does_not_split_on_unicode_line_separators() -> None:
    # pydantic writes U+2028/U+0085 unescaped inside JSON strings; str.splitlines would break there.
    payload = json.dumps({"t": "a\u2028b\x85c"}, ensure_ascii=False).encode()
    decoder = SseDecoder()
    out = decoder.feed(b"data: " + payload[:5])
    out += decoder.feed(payload[5:] + b"\n\n")
    assert out == [payload]
    assert json.loads(out[0])["t"] == "a\u2028b\x85c"


def decode_all(body: bytes, *, step: float = 0.01) -> tuple[GenerationStats, list[Any]]:
    """Run a transcript through ChunkDecoder + GenerationStats with a fake clock (t = 1, 1.01, …)."""
    decoder = ChunkDecoder()
    stats = GenerationStats(clock=lambda: 0.0)
    stats.start(0.0)
    events = []
    t = 1.0
    for payload in iter_sse_payloads([body]):
        if payload == DONE:
            break
        event = decoder.decode(payload, t)
        t += step
        if event is not None:
            stats.add(event)
            events.append(event)
    return stats, events


def test_fixture_token_counts_come_from_usage(sse_transcript: Path) -> None:
    summary, body = load_transcript(sse_transcript)
    stats, events = decode_all(body)
    result = stats.finish(t=99.0)
    usage = summary["usage"]
    # These servers sent only the final usage chunk: totals exact, per-chunk counts estimated.
    assert result.completion_tokens == usage["completion_tokens"]
    assert result.prompt_tokens == usage["prompt_tokens"]
    assert result.tokens_exact is True
    assert result.approximate is True
    assert result.fallback is not None and "estimated" in result.fallback
    assert result.finish_reason == "length"
    assert result.error is None
    # The trailing usage chunk is not output, so it does not advance t_last.
    assert events[-1].output is False and events[-1].completion_tokens == usage["completion_tokens"]
    assert result.t_last == max(e.t for e in events if e.output)
    chat = summary["endpoint"] == "/v1/chat/completions"
    first_payload = json.loads(reference_payloads(body)[0])
    if chat:
        # The role-only first chunk is not the first token (TTFT as `vllm bench serve`).
        assert events[0].output is False
        assert result.ttft_s == pytest.approx(events[1].t)
        assert result.text.startswith(
            json.loads(reference_payloads(body)[1])["choices"][0]["delta"]["content"]
        )
    else:
        assert result.ttft_s == pytest.approx(events[0].t)
        assert result.text.startswith(first_payload["choices"][0]["text"])


@pytest.mark.parametrize("name", ["sse-ngram-k4-completions.txt", "sse-ngram-k4-chat.txt"])
def test_ngram_fixtures_have_multi_token_chunks(name: str, data: DataDir) -> None:
    summary, body = load_transcript(data.path(name))
    stats, _events = decode_all(body)
    result = stats.finish(t=99.0)
    # Under speculation chunks carry several tokens: the (exact) total beats the chunk count.
    assert result.completion_tokens > result.chunks
    assert max(result.tokens_per_chunk) > 1
    assert summary["usage"]["completion_tokens"] > summary["content_events"]


def chunk(
    text: str, ct: int | None = None, *, ids: list[int] | None = None, finish: str | None = None
) -> bytes:
    obj: dict[str, Any] = {
        "id": "cmpl-1",
        "object": "text_completion",
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "token_ids": ids}],
    }
    if ct is not None:
        obj["usage"] = {"prompt_tokens": 7, "completion_tokens": ct, "total_tokens": 7 + ct}
    return json.dumps(obj).encode()


def test_continuous_usage_gives_exact_per_chunk_counts() -> None:
    decoder = ChunkDecoder()
    stats = GenerationStats()
    stats.start(0.0)
    cts = [1, 6, 11, 14, 15]
    for i, ct in enumerate(cts):
        stats.add(decoder.decode(chunk(f"w{i}", ct, finish="length" if i == 4 else None), 1.0 + i))  # type: ignore[arg-type]
    final = decoder.decode(b'{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":15}}', 9.0)
    assert final is not None
    stats.add(final)
    result = stats.finish(t=10.0)
    assert dict(result.tokens_per_chunk) == {1: 2, 5: 2, 3: 1}
    assert result.completion_tokens == 15 and result.chunks == 5
    assert result.approximate is False and result.tokens_exact is True
    assert result.completion_tokens / result.chunks == pytest.approx(3.0)
    assert result.prompt_tokens == 7
    assert result.t_last == 5.0  # the usage chunk at t=9 does not count as output


def test_token_ids_count_exactly_without_usage() -> None:
    decoder = ChunkDecoder()
    stats = GenerationStats()
    stats.start(0.0)
    for i, ids in enumerate([[5], [6, 7, 8], [9, 10]]):
        stats.add(decoder.decode(chunk(f" x{i}", ids=ids), 1.0 + i))  # type: ignore[arg-type]
    result = stats.finish(t=5.0)
    assert result.token_ids == (5, 6, 7, 8, 9, 10)
    assert result.completion_tokens == 6
    assert dict(result.tokens_per_chunk) == {1: 1, 3: 1, 2: 1}
    assert result.approximate is False and result.tokens_exact is True


def test_estimate_then_final_usage_keeps_exact_total() -> None:
    decoder = ChunkDecoder()
    e1 = decoder.decode(chunk(" the quick brown"), 1.0)
    assert e1 is not None and e1.estimated and e1.tokens == 3 and not e1.exact
    e2 = decoder.decode(b'{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}', 2.0)
    assert e2 is not None and e2.exact and e2.completion_tokens == 4 and e2.prompt_tokens == 3


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("\n\n") == 1
    assert estimate_tokens(" quick brown fox jumps over") == 5


def chat_chunk(delta: dict[str, Any], ct: int | None = None) -> bytes:
    obj: dict[str, Any] = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    if ct is not None:
        obj["usage"] = {"prompt_tokens": 4, "completion_tokens": ct}
    return json.dumps(obj).encode()


def test_chat_reasoning_is_kept_apart_and_starts_ttft() -> None:
    decoder = ChunkDecoder()
    stats = GenerationStats()
    stats.start(0.0)
    payloads = [
        chat_chunk({"role": "assistant", "content": ""}, 0),
        chat_chunk({"reasoning": "think "}, 2),
        chat_chunk({"reasoning_content": "more"}, 3),
        chat_chunk({"content": "Answer"}, 5),
        chat_chunk({"content": ""}, 5),
    ]
    for i, p in enumerate(payloads):
        event = decoder.decode(p, 1.0 + i)
        assert event is not None
        stats.add(event)
    result = stats.finish(t=9.0)
    assert result.reasoning == "think more"
    assert result.text == "Answer"
    assert result.ttft_s == 2.0  # first reasoning chunk, not the role chunk at t=1
    assert result.t_last == 5.0  # an empty content string without role still counts as output
    assert result.completion_tokens == 5 and dict(result.tokens_per_chunk) == {2: 2, 1: 1}


def test_error_event_and_malformed_json_raise_chunk_error() -> None:
    decoder = ChunkDecoder()
    with pytest.raises(ChunkError, match="mid-stream: The engine died"):
        decoder.decode(b'{"error": {"message": "The engine died", "type": "InternalServerError"}}', 1.0)
    with pytest.raises(ChunkError, match="mid-stream: bad"):
        decoder.decode(b'{"object": "error", "message": "bad", "code": 400}', 1.0)
    with pytest.raises(ChunkError, match="malformed"):
        decoder.decode(b'{"choices": [', 1.0)
    with pytest.raises(ChunkError):
        decoder.decode(b"[1, 2]", 1.0)


def test_crlf_split_between_chunks_is_one_line_break() -> None:
    # If the CR ending one chunk were taken as a line break on its own, the LF opening the next chunk
    # would make a blank line and dispatch "a" before "b" joined it.
    assert iter_sse_payloads([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]) == [b"a\nb"]
    assert iter_sse_payloads([b"data: a\rdata: b\r\r"]) == [b"a\nb"]  # lone CRs are line breaks too


def test_unexpected_event_shape_is_a_chunk_error_not_a_traceback() -> None:
    decoder = ChunkDecoder()
    with pytest.raises(ChunkError, match="unexpected shape"):
        decoder.decode(b'{"choices": {"0": {"text": "x"}}}', 1.0)
    with pytest.raises(ChunkError, match="unexpected shape"):
        decoder.decode(b'{"choices": ["x"]}', 1.0)
