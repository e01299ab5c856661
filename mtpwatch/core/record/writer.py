"""`Recorder`: append records to a gzip file, flushed at least once a second, secrets scrubbed.

The file is one gzip member written with sync flushes: every flush ends on a byte boundary that a
reader can decompress up to, so a crash loses at most the records since the last flush (≤ 1 s)."""

from __future__ import annotations

import gzip
import json
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any, Literal

from mtpwatch.core.http.generation import StreamEvent
from mtpwatch.core.record.schema import VERSION, encode_event, filter_page, page_delta

ServerRecord = Literal["server", "down", "prompt", "end", "done", "nvml"]
"""The per-server records `Recorder.record` writes as given (docs/recording.md says what each holds
and when it is written)."""

FLUSH_S = 0.75
"""Flush when the last flush is this old at a write (scrapes write at 2 Hz: the tail is ≤ 1 s)."""
REDACTED = "[redacted]"


class RecordError(OSError):
    """The recording file cannot be written (one line, for an `Error:` message)."""


class Recorder:
    """Writes one session's records. Not thread-safe: call it from the event loop only."""

    def __init__(
        self,
        path: str | Path,
        *,
        secrets: Iterable[str | None] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self._secrets = tuple(s for s in secrets if s)
        self._clock = clock
        try:
            self._raw: IO[bytes] = open(self.path, "wb")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise RecordError(f"cannot write the recording {self.path}: {exc.strerror or exc}") from exc
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6, mtime=0)
        self._last_flush = clock()
        self._pages: dict[int, list[str]] = {}
        self._via: dict[int, str] = {}
        self._closed = False
        self.write({"kind": "header", "version": VERSION, "t": clock(), "wall": time.time()})

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record (a JSON object on one line); flush if the last flush is ≥ 0.75 s old."""
        if self._closed:
            return
        line = json.dumps(record, separators=(",", ":"), ensure_ascii=False)
        for secret in self._secrets:
            if secret in line:
                line = line.replace(secret, REDACTED)
        self._gz.write(line.encode() + b"\n")
        now = self._clock()
        if now - self._last_flush >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Make everything written so far readable from the file (a zlib sync flush)."""
        if self._closed:
            return
        self._gz.flush(zlib.Z_SYNC_FLUSH)
        self._raw.flush()
        self._last_flush = self._clock()

    def close(self) -> None:
        """Finish the gzip stream and close the file (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._gz.close()
        self._raw.close()

    def session(self, info: Mapping[str, Any]) -> None:
        """What was watched: mode, title, display settings, servers (label, url, model)."""
        self.write({"kind": "mark", "t": self._clock(), "what": "session", **info})

    def record(self, kind: ServerRecord, s: int, t: float, **fields: Any) -> None:
        """A record of server `s` whose fields are given as they are (`ServerRecord`)."""
        self.write({"kind": kind, "t": t, "s": s, **fields})

    def life(self, s: int, t: float, what: str, detail: str = "") -> None:
        """A server lifecycle event: 'launched', 'failed', 'stopped', 'restart' (counters reset)."""
        record: dict[str, Any] = {"kind": "life", "t": t, "s": s, "what": what}
        if detail:
            record["detail"] = detail
        self.write(record)

    def scrape(self, s: int, t: float, text: str, via: str = "") -> None:
        """One /metrics page: the families the snapshot reads, as a line delta to the last one;
        `via` (how it was scraped: 'filtered, 6.7 KB', 'full page (filter ignored)') when it changed."""
        lines = filter_page(text)
        body = page_delta(self._pages.get(s), lines)
        self._pages[s] = lines
        record: dict[str, Any] = {"kind": "scrape", "t": t, "s": s, **body}
        if via != self._via.get(s, ""):
            record["via"] = via
            self._via[s] = via
        self.write(record)

    def event(self, s: int, event: StreamEvent) -> None:
        """A stream event as it arrived (arrival time, tokens, text, token ids, finish)."""
        self.write({"kind": "ev", "s": s, **encode_event(event)})

    def result(self, s: int, t: float, *, t_start: float | None, error: str | None, cancelled: bool) -> None:
        """The stream ended at `t` (its `GenerationStats.finish` time)."""
        record: dict[str, Any] = {"kind": "result", "t": t, "s": s, "t_start": t_start}
        if error is not None:
            record["error"] = error
        if cancelled:
            record["cancelled"] = True
        self.write(record)

    def mark(self, t: float, what: str, **fields: Any) -> None:
        """A session event: 'quit', a speed-up line, … (free-form, for people reading the file)."""
        self.write({"kind": "mark", "t": t, "what": what, **fields})
