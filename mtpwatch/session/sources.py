"""`Source`: what a screen needs of the thing behind one server panel, whatever feeds it.

Every panel's source is a `session.watch.ServerFeed`; only where its pages come from differs (live
HTTP, Prometheus, a recording: `session.scrapes.Scrapes`), so a replayed panel is the live one.
The screens (`ui.screens.monitor`, `ui.screens.replay`) and the session helpers they call (the
measurement, its report file, the k advisor) hold `Source`s, never a concrete class: ten members,
and what they read of a source's state comes as one frozen `SourceState`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the monitor's first frame imports this module, not these
    from mtpwatch.config import DisplaySettings, ServerSpec
    from mtpwatch.core.http.engines import EngineInfo
    from mtpwatch.core.launch.logparse import LogFacts
    from mtpwatch.core.metrics.rates import Rates
    from mtpwatch.session.launching import StartupProgress
    from mtpwatch.session.observers import Observers
    from mtpwatch.session.views import Answer, ServerView, Status


@dataclass(frozen=True, slots=True)
class SourceState:
    """What a source knows of its server now, as plain data (the gate, F6, its report, the advisor)."""

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
    launch_facts: LogFacts | None
    """What the start-up log said (None: not launched here)."""
    engine_info: EngineInfo | None
    """llama-server's /props and /slots; None for vLLM."""
    prompt_rates: Rates | None
    """The counter rates over the last console prompt's window (the k advisor reads them)."""


class Source(Protocol):
    """One server as a screen sees it: start and stop it, poll it, its views, prompts where it takes them."""

    observers: Observers
    """Who is told of every page, prompt and identity (a recording's `session.recording.FeedTap`)."""

    def state(self) -> SourceState:
        """What the source knows of its server now."""

    async def launch(self, progress: StartupProgress) -> bool:
        """Start the server of `spec.launch`; False when it did not come up (status 'failed', reason
        set, the last log lines shown)."""

    async def poll(self) -> float:
        """One scrape; the seconds to wait before the next (backoff while down, longer while idle)."""

    async def rest(self, delay: float) -> None:
        """Wait `delay` seconds before the next scrape, or less when a prompt starts."""

    def view(self, window: str) -> ServerView:
        """The panel's numbers now, over `window` ('10 s', '60 s', 'prompt'); pure."""

    def sample_hardware(self, on: bool) -> None:
        """Sample the GPU where a reading applies while `on` (the roofline panel shows), else stop."""

    async def generate(self, prompt: str, on_text: Callable[[str], None]) -> Answer:
        """Stream `prompt`, passing text to `on_text`; the answer with its summary."""

    def cancelled_answer(self) -> Answer:
        """The answer of a generation the user cancelled (what arrived so far)."""

    async def close(self, *, server_only: bool = False) -> None:
        """Stop an owned server (unless kept) and close the scrapes and the client; `server_only`: stop
        the server this source launched, whatever keep says, and stay usable (the restart schedule
        between sessions)."""


SourceFactory = Callable[..., Source]
"""Builds a screen's source per server: `(spec, display, *, clock) -> Source` (default `ServerFeed`)."""
