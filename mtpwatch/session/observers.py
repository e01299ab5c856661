"""What a feed tells whoever listens: its pages, its prompts and their streams, its server's identity.

`FeedObserver` is the interface; `session.recording.FeedTap` implements it to write a recording. A
`ServerFeed` holds an `Observers` (the fan-out) and calls it at each of these moments with all an
observer needs, so no observer reads the feed's attributes, private or not.
"""

from __future__ import annotations

from typing import Any, Protocol

from mtpwatch.core.http.generation import GenerationResult, StreamEvent
from mtpwatch.core.roofline.nvml import HardwareReading


class FeedObserver(Protocol):
    """Told of everything one feed sees, at the feed's clock `t`."""

    def server(self, t: float, identity: dict[str, Any]) -> None:
        """The server was identified: `ServerWatch.identity()` (model, version, facts, roofline inputs)."""

    def life(self, t: float, what: str, detail: str = "") -> None:
        """A lifecycle event: 'launched', 'failed' (with the reason), 'restart', 'stopped'."""

    def scrape(self, t: float, text: str, via: str = "") -> None:
        """One scraped page, as text, and how it was read ('filtered, 3.3 KB', 'full page')."""

    def down(self, t: float, reason: str) -> None:
        """A scrape failed, for `reason` (one line)."""

    def prompt(self, t: float, text: str) -> None:
        """A console prompt starts: its window opens."""

    def event(self, event: StreamEvent) -> None:
        """One decoded stream event of the running prompt (it carries its own arrival time)."""

    def result(self, t: float, result: GenerationResult) -> None:
        """The prompt's generation finished (or failed, or was cancelled)."""

    def end(self, t: float) -> None:
        """The prompt's generation call returned."""

    def done(self, t: float) -> None:
        """The prompt's window closed (the scrape after its last token)."""

    def nvml(self, t: float, reading: HardwareReading | None) -> None:
        """A hardware reading shown with the scrape at `t` (None: the sampler stopped)."""


class Observers(list[FeedObserver]):
    """The observers of one feed, called in the order they were added (a `FeedObserver` itself);
    `clear` tells nobody any more (a recording closed)."""

    def server(self, t: float, identity: dict[str, Any]) -> None:
        for o in self:
            o.server(t, identity)

    def life(self, t: float, what: str, detail: str = "") -> None:
        for o in self:
            o.life(t, what, detail)

    def scrape(self, t: float, text: str, via: str = "") -> None:
        for o in self:
            o.scrape(t, text, via)

    def down(self, t: float, reason: str) -> None:
        for o in self:
            o.down(t, reason)

    def prompt(self, t: float, text: str) -> None:
        for o in self:
            o.prompt(t, text)

    def event(self, event: StreamEvent) -> None:
        for o in self:
            o.event(event)

    def result(self, t: float, result: GenerationResult) -> None:
        for o in self:
            o.result(t, result)

    def end(self, t: float) -> None:
        for o in self:
            o.end(t)

    def done(self, t: float) -> None:
        for o in self:
            o.done(t)

    def nvml(self, t: float, reading: HardwareReading | None) -> None:
        for o in self:
            o.nvml(t, reading)
