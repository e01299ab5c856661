"""`ReplayDriver`: a recording behind a monitor screen (`mtpwatch replay FILE`; `session/drivers.py`).

It seeks (the panes show what the recording's feeds held then) and refuses the rest, saying why: a
replay has no server to send a prompt to or to measure, and nothing of its own to stop.
"""

from __future__ import annotations

from mtpwatch.core.record.writer import Recorder
from mtpwatch.session.drivers import Operation
from mtpwatch.session.replay import Action, ReplaySource
from mtpwatch.session.sources import Source

REFUSALS: dict[Operation, str] = {
    "send": "This is a replay: no server to send prompts to.",
    "measure": "This is a replay: F6 measures live servers.",
}


class ReplayDriver:
    """The recording's feeds, on the recording's clock (`ReplaySource`)."""

    def __init__(self, source: ReplaySource) -> None:
        self.source = source
        self.sources: list[Source] = list(source.feeds)
        self.recorder: Recorder | None = None

    def open(self) -> str | None:
        self.sources[:] = self.source.feeds
        return None

    def cannot(self, what: Operation) -> str | None:
        return REFUSALS.get(what)

    def seek(self, t: float) -> list[Action]:
        """Move the recording to `t`; a seek back rebuilds the feeds (the list keeps its identity)."""
        actions = self.source.seek(t)
        self.sources[:] = self.source.feeds
        return actions

    def stop_recording(self) -> None:
        """A replay records nothing."""

    async def stop(self) -> None:
        """Nothing to stop in a replay."""
