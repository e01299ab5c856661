"""`Scrapes`: where one server's pages come from, the seam under a `session.server_watch.ServerWatch`.

Three implementations: `LiveScrapes`, the server's own `/metrics` through
`core.http.client.VllmClient` (its filtered tiers) and its `/v1/models`, `/version`, llama-server's
`/props` (`core.http.engines.identify`) (`mtpwatch`, `ab`, `demo`, `start`, `attach`);
`session.prometheus.PrometheusScrapes` (the fleet's Enter on a row) and
`session.replay.ReplayScrapes` (`mtpwatch replay`). Each hands back plain data (`Page`,
`Identity`); the watch alone decides what they mean.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Protocol

from mtpwatch.core.http import engines
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import ServerError, ServerTimeout, ServerUnreachable
from mtpwatch.core.metrics.snapshot import MetricsSnapshot


@dataclass(frozen=True, slots=True)
class Page:
    """One scrape: its snapshot, the text to record (None: no page of the server's own), how it was read."""

    snapshot: MetricsSnapshot
    text: str | None = None
    via: str = ""
    """'filtered, 3.3 KB', 'full page (filter ignored)'; '' unknown."""
    history: tuple[tuple[float, MetricsSnapshot], ...] = ()
    """(monotonic time, snapshot) points older than this page, oldest first (Prometheus' last minutes)."""


@dataclass(frozen=True, slots=True)
class Identity:
    """What a server says about itself; what it did not say (`told_*` False) keeps what is known."""

    models: tuple[str, ...] = ()
    """Every served model (/v1/models), in the server's order."""
    refs: tuple[str, ...] = ()
    """The watched model's root and id: where its config.json may be found (the roofline's inputs)."""
    version: str | None = None
    """vLLM's /version, llama-server's build."""
    told_version: bool = False
    engine_info: engines.EngineInfo | None = None
    """What llama-server says about itself (/props, /slots); None for vLLM."""
    told_engine: bool = False


class Scrapes(Protocol):
    async def fetch(self, model: str | None) -> Page:
        """One page for `model` (None: the first on the page). Raises ServerError, OSError or
        ValueError when there is none."""

    async def identify(self, model: str | None) -> Identity | None:
        """What the server says about itself; None when nothing answered (a server still starting).
        Raises ServerUnreachable or ServerTimeout when nothing is there."""

    async def aclose(self) -> None:
        """Let go of the connections."""


class LiveScrapes:
    """The server's own HTTP API through `client` (the feed's, which also streams its prompts)."""

    def __init__(self, client: VllmClient) -> None:
        self.client = client

    async def fetch(self, model: str | None) -> Page:
        text, snapshot = await self.client.scrape_page(model)
        state = self.client.scrape_state
        return Page(snapshot, text, state.text if state is not None else "")

    async def identify(self, model: str | None) -> Identity | None:
        client = self.client
        answered = False
        try:
            listed = await client.models()
            answered = True
        except (ServerUnreachable, ServerTimeout):
            raise  # nothing answers: say so now, not after every other request timed out too
        except (ServerError, OSError, ValueError):
            listed = []
        names = tuple(m.id for m in listed)
        entry = next((m for m in listed if m.id == model), listed[0] if listed else None)  # else the first
        refs = tuple(r for r in (entry.root, entry.id) if r) if entry is not None else ()
        version: str | None = None
        told_version = told_engine = False
        with contextlib.suppress(ServerError, OSError, ValueError):
            version = await client.version()
            answered = told_version = True
        info: engines.EngineInfo | None = None
        with contextlib.suppress(ServerError, OSError, ValueError):
            info = await engines.identify(client.get_json)
            told_engine = True
        if info is not None:
            version = info.build
            answered = told_version = True
        if not answered:
            return None
        return Identity(names, refs, version, told_version, info, told_engine)

    async def aclose(self) -> None:
        """Nothing of its own: the client is the feed's, which closes it."""
