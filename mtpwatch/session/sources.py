"""`Source`: what a screen needs of the thing behind one server panel, whatever feeds it.

Three sources of pages and streams stand behind a panel, all through this one protocol:

- live HTTP: `session.watch.ServerFeed` over `core.http.client.VllmClient` (`mtpwatch`, `ab`, `demo`,
  `start`, `attach`);
- Prometheus: the same feed whose client reads the target's counters from Prometheus
  (`session.prometheus.prometheus_feed_factory`, the fleet's Enter on a row);
- a recording: `session.replay.ReplaySource` pushes the recorded pages, stream events and prompt
  ends into feeds on the recording's clock (`mtpwatch replay`), so the panel is the live one.

The screens (`ui.screens.monitor`, `ui.screens.replay`) and the session helpers they call (the
measurement, its report file, the k advisor) hold `Source`s, never a concrete class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.launch.logparse import LogFacts
from mtpwatch.core.metrics.rates import Collector, Rates
from mtpwatch.core.record.writer import Recorder
from mtpwatch.session.answers import Answer
from mtpwatch.session.launching import StartupProgress
from mtpwatch.session.observers import Observers
from mtpwatch.session.views import ServerView, Status


class Source(Protocol):
    """One server as a screen sees it: start and stop it, poll it, its views, prompts where it takes them."""

    spec: ServerSpec
    """The server: label, URL, model, launch (None: attached)."""
    display: DisplaySettings
    """The session's display settings (scrape interval, chat, max tokens, temperature)."""
    status: Status
    """What the last scrape (or launch) saw."""
    reason: str
    """Why the server is not up, in one line ('' while up)."""
    model: str | None
    """The model being watched (the spec's, else the first the server serves)."""
    version: str | None
    """The server's version (vLLM's /version, llama-server's build)."""
    spec_method: str | None
    """The speculation method from the start-up log (servers mtpwatch started)."""
    drafter_ref: str | None
    """The drafter model from the start-up log (servers mtpwatch started)."""
    observers: Observers
    """Who is told of every page, prompt and identity (a recording)."""
    collector: Collector
    """The scrapes so far: windows, restarts, the chart's history."""

    @property
    def launch_facts(self) -> LogFacts | None:
        """What the start-up log said (None: not launched here)."""
        ...

    def record_to(self, recorder: Recorder, index: int) -> None:
        """Write what this source sees into `recorder` as server `index`."""

    async def launch(self, progress: StartupProgress) -> bool:
        """Start the server of `spec.launch`; False when it did not come up (status 'failed')."""
        ...

    async def poll(self) -> float:
        """One scrape; the seconds to wait before the next (backoff while down, longer while idle)."""
        ...

    async def rest(self, delay: float) -> None:
        """Wait `delay` seconds before the next scrape, or less when a prompt starts."""

    def view(self, window: str) -> ServerView:
        """The panel's numbers now, over `window` ('10 s', '60 s', 'prompt'); pure."""
        ...

    def rates(self, window: str, now: float | None = None) -> Rates | None:
        """The counter rates over `window` (the k advisor reads the 'prompt' window's)."""
        ...

    def start_hardware(self) -> None:
        """Start sampling the GPU where a reading applies (the roofline panel shows)."""

    def stop_hardware(self) -> None:
        """Stop sampling the GPU."""

    async def generate(self, prompt: str, on_text: Callable[[str], None]) -> Answer:
        """Stream `prompt`, passing text to `on_text`; the answer with its summary."""
        ...

    def cancelled_answer(self) -> Answer:
        """The answer of a generation the user cancelled (what arrived so far)."""
        ...

    async def stop_server(self) -> None:
        """Stop the server this source launched (the restart schedule between sessions)."""

    async def close(self) -> None:
        """Stop an owned server (unless kept) and close the client."""


SourceFactory = Callable[..., Source]
"""Builds a screen's source per server: `(spec, display, *, clock) -> Source` (default `ServerFeed`)."""
