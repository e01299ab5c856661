"""`FeedTap`: what a `ServerFeed` sees, written to a `core.record` recording (`--record FILE`).

A `session.observers.FeedObserver`. API keys never reach it: it records no headers, no launch argv
and no URL userinfo, and the recorder scrubs the key from every line besides.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mtpwatch.config import AppConfig
from mtpwatch.core.http.generation import GenerationResult, StreamEvent
from mtpwatch.core.record.writer import Recorder
from mtpwatch.core.roofline.nvml import HardwareReading


def public_url(url: str) -> str:
    """`url` without user:password@ (credentials never enter a recording)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class FeedTap:
    """Writes one feed's records as server `index`: everything it writes comes with the call (the
    feed's identity, the page, the event); it holds no feed and reads none."""

    def __init__(self, recorder: Recorder, index: int) -> None:
        self.recorder = recorder
        self.index = index
        self._reading_t: float | None = None

    def server(self, t: float, identity: dict[str, Any]) -> None:
        url = public_url(str(identity.get("url", "")))
        self.recorder.record("server", self.index, t, **{**identity, "url": url})

    def life(self, t: float, what: str, detail: str = "") -> None:
        self.recorder.life(self.index, t, what, detail)

    def scrape(self, t: float, text: str, via: str = "") -> None:
        self.recorder.scrape(self.index, t, text, via)

    def down(self, t: float, reason: str) -> None:
        self.recorder.record("down", self.index, t, reason=reason)

    def prompt(self, t: float, text: str) -> None:
        self.recorder.record("prompt", self.index, t, text=text)

    def event(self, event: StreamEvent) -> None:
        self.recorder.event(self.index, event)

    def result(self, t: float, result: GenerationResult) -> None:
        self.recorder.result(
            self.index,
            result.t_end if result.t_end is not None else t,
            t_start=result.t_start,
            error=result.error,
            cancelled=result.cancelled,
        )

    def end(self, t: float) -> None:
        self.recorder.record("end", self.index, t)

    def done(self, t: float) -> None:
        self.recorder.record("done", self.index, t)

    def nvml(self, t: float, reading: HardwareReading | None) -> None:
        stamp = reading.timestamp if reading is not None else None
        if reading is not None and stamp == self._reading_t:
            return
        self._reading_t = stamp
        self.recorder.record("nvml", self.index, t, reading=None if reading is None else reading.to_json())


def open_recording(config: AppConfig, schedule: str) -> Recorder | None:
    """The recorder of `config.record` with its 'session' mark (None when not recording).

    Raises:
        RecordError: the file cannot be created.
    """
    if config.record is None:
        return None
    keys = [*(s.api_key for s in config.servers), os.environ.get("VLLM_API_KEY")]
    recorder = Recorder(config.record, secrets=keys)
    recorder.session(  # the 'session' mark: no keys, no argv
        {
            "mode": config.mode,
            "title": config.title,
            "schedule": schedule,
            "display": dataclasses.asdict(config.display),
            "servers": [
                {
                    "label": s.label,
                    "url": public_url(s.url),
                    "model": s.model,
                    "launched": s.launch is not None,
                    "kind": s.launch.kind if s.launch is not None else None,
                }
                for s in config.servers
            ],
        }
    )
    return recorder
