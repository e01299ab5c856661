"""Server-sent events, bytes → `data:` payloads: the incremental decoder the streaming client runs.

vLLM frames every event as `data: <json>\\n\\n`, ends with `data: [DONE]`, and may send `: keep-alive`
comments. Network chunks split events anywhere (even inside a UTF-8 character), and a proxy may use
CRLF. The decoder works on bytes and splits only on CR/LF as the SSE spec says: httpx's `aiter_lines`
uses `str.splitlines`, which also breaks on U+2028/U+0085, characters JSON carries unescaped and a
model can generate. Payloads stay bytes because `json.loads` takes bytes (one decode less per event).
"""

from __future__ import annotations

DONE = b"[DONE]"
"""The payload that ends an OpenAI-style stream."""


class SseDecoder:
    """Incremental SSE decoder: `feed(bytes)` returns the payloads of the events it completed. Only
    `data` matters to OpenAI-compatible streams: `event:`, `id:`, `retry:` and unknown lines and `:`
    comments (keep-alives) are skipped; multi-line `data` is joined with `\\n`, as the spec says."""

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: bytes | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk if self._buf else chunk
        held_cr = False
        if b"\r" in buf:
            # A CR at the very end may be the first half of a CRLF split across chunks: keep it back.
            if buf.endswith(b"\r"):
                held_cr = True
                buf = buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        rest = lines.pop()
        self._buf = rest + b"\r" if held_cr else rest
        return [payload for line in lines if (payload := self._line(line)) is not None]

    def close(self) -> list[bytes]:
        """End of stream: finish a last unterminated line and hand over a pending event (lose nothing)."""
        rest, self._buf = self._buf, b""
        out = self.feed(rest + b"\n") if rest else []
        if self._data is not None:
            out.append(self._data)
            self._data = None
        return out

    def _line(self, line: bytes) -> bytes | None:
        if not line:
            data, self._data = self._data, None
            return data
        if line.startswith(b"data:"):
            value = line[6:] if line[5:6] == b" " else line[5:]
        elif line == b"data":
            value = b""  # a field name alone is the field with an empty value (the spec)
        else:
            return None  # comments (":…"), other fields and stray lines are ignored, as the spec says
        self._data = value if self._data is None else self._data + b"\n" + value
        return None
