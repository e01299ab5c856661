"""Drivers: what stands behind a monitor screen, live servers or a recording.

A monitor screen (`ui.screens.monitor.MonitorScreen`) holds one driver and asks it before each
`Operation` (`Driver.cannot`). The driver owns its sources (one per server panel) and stops them.

- `LiveDriver`: servers over HTTP (or Prometheus through its `SourceFactory`, a fleet row's
  monitor): builds the sources, records them with `--record`, sends and measures, cannot seek;
- `session/replay.ReplayDriver`: a recording played back: seeks, sends nothing, measures
  nothing, stops nothing (loaded only by `mtpwatch replay`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from mtpwatch.config import AppConfig
from mtpwatch.session.sources import Source, SourceFactory

if TYPE_CHECKING:  # the recorder is loaded by `open`
    from mtpwatch.core.record.writer import Recorder
    from mtpwatch.session.views import Answer

Operation = Literal["send", "measure", "seek"]
"""What a screen asks its driver before it does it: send a prompt, start a measurement, seek."""


@dataclass(frozen=True, slots=True)
class Action:
    """Something the answer panes show: a prompt begins, text arrives, an answer is complete."""

    kind: Literal["begin", "text", "answer"]
    server: int
    text: str = ""
    answer: Answer | None = None
    t: float = 0.0
    number: int = 0
    """An answer's prompt number in its pane: the recording's count of that server's prompts done
    up to it (live's `#N`), never a counter of the panes that a seek would advance."""


class Driver(Protocol):
    """What stands behind a monitor screen: its sources, and what it can do with them."""

    sources: list[Source]
    """One source per server panel, in config order (the same list for the screen's life)."""
    recorder: Recorder | None
    """`--record FILE`: every source writes to it (None: not recording)."""

    def open(self) -> str | None:
        """Fill `sources` (a live session builds them); an error to show, or None."""

    def cannot(self, what: Operation) -> str | None:
        """Why this session cannot `what` now, in one line; None when it can."""

    def seek(self, t: float) -> list[Action]:
        """Move to time `t` (only where `cannot('seek')` is None): what the answer panes show."""

    def stop_recording(self) -> None:
        """Close the `--record` file now (the session goes on unrecorded)."""

    async def stop(self) -> None:
        """Stop owned server processes (unless kept) and close clients."""


class LiveDriver:
    """Servers watched as they run: sources built by `factory` (default `ServerFeed`, live HTTP)."""

    def __init__(
        self,
        config: AppConfig,
        *,
        clock: Callable[[], float],
        schedule: str = "alternate",
        factory: SourceFactory | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.schedule = schedule
        self.factory = factory
        self.sources: list[Source] = []
        self.recorder: Recorder | None = None

    def open(self) -> str | None:
        """Build one source per server, each recorded when `--record` says so."""
        # Imported here, after the monitor's first frame (`MonitorScreen.open_driver`), not before it.
        from mtpwatch.core.record.writer import RecordError
        from mtpwatch.session.recording import FeedTap, open_recording
        from mtpwatch.session.watch import ServerFeed  # the default factory

        factory: SourceFactory = self.factory or ServerFeed
        error = None
        try:
            self.recorder = open_recording(self.config, self.schedule)
        except RecordError as exc:
            error = f"Error: {exc}"
        for i, spec in enumerate(self.config.servers):
            source = factory(spec, self.config.display, clock=self.clock)
            if self.recorder is not None:
                source.observers.append(FeedTap(self.recorder, i))
            self.sources.append(source)
        return error

    def cannot(self, what: Operation) -> str | None:
        if what != "seek" and len(self.sources) < len(self.config.servers):  # `open` has not run yet
            return "The servers are being set up: try again in a moment."
        if what == "send" and not self.sources:
            return "Not connected to any server."
        if what == "measure" and (self.config.mode != "ab" or len(self.sources) != 2):
            return "Measuring needs two servers (mtpwatch ab / demo)."
        if what == "seek":
            return "Live servers have no recording to seek in."
        return None

    def seek(self, t: float) -> list[Action]:
        raise RuntimeError(self.cannot("seek"))

    def stop_recording(self) -> None:
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            recorder.mark(self.clock(), "quit")
            for source in self.sources:
                source.observers.clear()
            recorder.close()

    async def stop(self) -> None:
        self.stop_recording()  # what follows (clients closing) is not the session
        await asyncio.gather(*(source.close() for source in self.sources), return_exceptions=True)
