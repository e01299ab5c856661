"""`ServerWatch`: one server's state as the scrapes found it; the one writer of that state.

The watch pulls pages and the server's identity through its `session.scrapes.Scrapes` (live HTTP,
Prometheus, a recording), alone writes what they mean (status, backoff `core.http.backoff`,
identity, roofline inputs `session.bandwidth_inputs.BandwidthModel`, the `core.metrics.rates.
Collector` of pages, the NVML reading) and tells its `session.observers.Observers` each moment. A
replay polls it too and hands it what was recorded (the `restore_*` methods and `mark_down`).
`session.server_view.build_server_view` reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.http import engines
from mtpwatch.core.http.backoff import Backoff, ConnectionState
from mtpwatch.core.http.errors import ServerError
from mtpwatch.core.http.urls import normalize_url
from mtpwatch.core.launch.launcher import Launch
from mtpwatch.core.launch.logparse import LogFacts
from mtpwatch.core.launch.vllm_cmd import is_loopback
from mtpwatch.core.metrics.engines import Engine, engine_of_schema
from mtpwatch.core.metrics.rates import Collector, idle_between
from mtpwatch.core.roofline.nvml import HardwareReading, Sampler
from mtpwatch.session.bandwidth_inputs import BandwidthModel
from mtpwatch.session.launching import LaunchOutcome, log_facts
from mtpwatch.session.observers import Observers
from mtpwatch.session.scrapes import Identity, Page, Scrapes
from mtpwatch.session.views import Status, describe_hardware

RETRY_INITIAL_S, RETRY_MAX_S = 0.5, 8.0
"""Retry delays after a failed scrape: 0.5, 1, 2, 4, 8 s, then 8 s (`Backoff`, no jitter)."""
CADENCE = ", every "
"""Between how a page was read and the idle cadence added to it ('filtered, 3.3 KB, every 2 s')."""


class ServerWatch:
    def __init__(
        self,
        spec: ServerSpec,
        display: DisplaySettings,
        scrapes: Scrapes,
        observers: Observers,
        *,
        clock: Callable[[], float],
        wall: Callable[[], float],
        busy: Callable[[], bool],
        starting: bool,
    ) -> None:
        """`busy`: a console prompt runs (no idle cadence); `starting`: the server is being launched."""
        self.spec = spec
        self.display = display
        self.scrapes = scrapes
        self.observers = observers
        self.clock = clock
        self._busy = busy
        self.collector = Collector(horizon_s=180.0)
        self.status: Status = "starting" if starting else "connecting"
        self.reason = ""
        self.retry_in: float | None = None
        """Seconds until the next scrape after a failure (None while up)."""
        self._connection = ConnectionState(clock=wall)
        self._backoff = Backoff(RETRY_INITIAL_S, 2.0, RETRY_MAX_S)
        self.identified = False
        self.model = spec.model
        self.models: tuple[str, ...] = ()
        self.version: str | None = None
        self.facts: tuple[str, ...] = ()
        self.engine_info: engines.EngineInfo | None = None  # None for vLLM
        self.drafter_ref: str | None = None
        self.spec_method: str | None = None
        self.launch: Launch | None = None
        """The server this watch's feed started: its log (None: not started here)."""
        self.scrape_via = ""
        """How the last page was read (`Page.via`), and ', every 0.5 s' while the idle cadence applies."""
        self.bandwidth = BandwidthModel(display)
        self._sampler: Sampler | None = None
        self.reading: HardwareReading | None = None
        """The NVML reading the roofline panel shows: the sampler's at the last scrape (so a recording
        holds exactly what was shown), or a replay's recorded one (`restore_reading`)."""

    # -- scraping -------------------------------------------------------------------------------

    async def poll(self) -> tuple[float, float | None]:
        """Identify the server if needed, then scrape once: (seconds to the next scrape, the time the
        page was taken, None when the scrape failed)."""
        try:
            if not self.identified:
                await self._identify()
            page = await self.scrapes.fetch(self.model)
        except (ServerError, OSError, ValueError) as exc:
            return self.mark_down(str(exc) or type(exc).__name__), None
        for t, snapshot in page.history:  # older points first (Prometheus' last minutes)
            self.collector.add(snapshot, t)
        now = self.clock()
        last = self.collector.latest
        delay = self.next_delay(last is not None and idle_between(last, page.snapshot))
        slowed = page.via and delay > self.display.scrape_interval_s
        via = f"{page.via}{CADENCE}{delay:g} s" if slowed else page.via  # recorded as shown
        if page.text is not None:
            self.observers.scrape(now, page.text, via)
        self.take(replace(page, via=via, history=()), now)
        return delay, now

    def next_delay(self, idle: bool | None = None) -> float:
        """Seconds to the next scrape while up: `idle_interval_s` while the server is idle (`idle`,
        by default `Collector.idle`) and no console prompt runs (nothing moves; a prompt sent from
        here wakes the poll loop), else `scrape_interval_s`."""
        interval = self.display.scrape_interval_s
        if not self._busy() and (self.collector.idle if idle is None else idle):
            return max(interval, self.display.idle_interval_s)
        return interval

    def take(self, page: Page, now: float) -> None:
        snapshot = page.snapshot
        if self.collector.add(snapshot, now):
            self.identified = False  # a restart: the version or model may have changed
            self.observers.life(self.clock(), "restart")
        if self.model is None and snapshot.model:
            self.model = snapshot.model
        if snapshot.models:
            self.models = tuple(snapshot.models)
        self.status, self.reason, self.retry_in = "up", "", None
        self.scrape_via = page.via
        self._connection.success()
        self._backoff.reset()
        if self._sampler is not None:
            self.reading = self._sampler.latest()
            self.observers.nvml(now, self.reading)

    async def _identify(self) -> None:
        identity = await self.scrapes.identify(self.model)
        if identity is None and self.engine_info is None and self.collector.latest is None:
            return  # nothing answers yet (a server still starting): identify it at the next poll
        identity = identity or Identity()
        if identity.models:
            self.models = identity.models
            if self.model is None:
                self.model = identity.models[0]
        if identity.told_version:
            self.version = identity.version
        if identity.told_engine:
            self.engine_info = identity.engine_info
        if self.engine_info is not None:
            self.version = self.engine_info.build
        await self.bandwidth.load(
            normalize_url(self.spec.url),
            refs=identity.refs,
            drafter_ref=self.drafter_ref,
            local=self.is_local,
        )
        self.identified = True
        self.observers.server(self.clock(), self.identity())

    def mark_down(self, reason: str) -> float:
        """A scrape failed for `reason` (the poll, and a replay's 'down' record); returns the
        seconds to wait before the next scrape."""
        if self.status == "failed":
            return RETRY_MAX_S
        self.observers.down(self.clock(), reason)
        self.reason = reason.splitlines()[0] if reason else "unreachable"
        connection = self._connection.failure(self.reason)
        # 'connecting' until the second failure of a server never seen up; 'down' once it was.
        seen = self.collector.latest is not None or connection.failures > 1
        self.status = "down" if seen else "connecting"
        self.retry_in = self._backoff.next()
        return self.retry_in

    @property
    def down_since(self) -> float | None:
        """Wall time of the first failed scrape of the current outage (None while up)."""
        status = self._connection.status
        return status.since if status.state == "down" else None

    # -- launching ------------------------------------------------------------------------------

    def starting(self) -> None:
        """The server is being launched (again: the restart schedule)."""
        self.status = "starting"

    def launched(self, result: LaunchOutcome) -> bool:
        """What `launch_server` left: False (status 'failed', reason set) when it did not come up."""
        if result.process is not None:
            self.facts = log_facts(result.server.watcher)
        if result.error is not None:
            hint = f" — {result.hint}" if result.hint else ""
            self.observers.life(self.clock(), "failed", result.error + hint)
            self.restore_life("failed", result.error + hint)
            return False
        self.drafter_ref = result.server.watcher.facts.spec_model
        self.spec_method = result.server.watcher.facts.spec_method
        self.launch = result.server
        self.observers.life(self.clock(), "launched")
        self.restore_life("launched")
        return True

    def stopped(self) -> None:
        self.launch = None
        self.observers.life(self.clock(), "stopped")
        self.restore_life("stopped")

    @property
    def launch_facts(self) -> LogFacts | None:
        """What the start-up log of the server launched here said (None: not launched here)."""
        return self.launch.watcher.facts if self.launch is not None else None

    # -- identity (told to observers; a replay restores it) --------------------------------------

    def identity(self) -> dict[str, Any]:
        """What identifying the server found: the 'server' record of a recording."""
        snap = self.collector.latest
        return {
            "label": self.spec.label,
            "url": self.spec.url,
            "model": self.model,
            "models": list(self.models),
            "version": self.version,
            "facts": list(self.facts),
            "drafter_ref": self.drafter_ref,
            "spec_method": self.spec_method,
            "method": self.method,
            "k": snap.num_speculative_tokens if snap is not None else None,
            "gpu": self.bandwidth.gpu,
            "bandwidth": self.bandwidth.to_json(),
        }

    def restore_identity(self, identity: dict[str, Any]) -> None:
        """Take what `identity()` told instead of asking the server (a replay: no network)."""
        self.model = identity.get("model")
        self.models = tuple(identity.get("models") or ())
        self.version = identity.get("version")
        self.facts = tuple(identity.get("facts") or ())
        self.drafter_ref = identity.get("drafter_ref")
        self.spec_method = identity.get("spec_method")
        self.bandwidth.restore(identity.get("bandwidth") or {})
        self.identified = True

    def restore_life(self, what: str, detail: str = "") -> None:
        """What a lifecycle event leaves: one the watch tells (`launched`, `stopped`), or a replay's
        'life' record of one it told."""
        if what == "launched":
            self.status = "connecting"
        elif what == "failed":
            self.status, self.reason = "failed", detail
        elif what == "stopped":
            self.status, self.reason, self.identified = "stopped", "", False

    @property
    def engine(self) -> Engine:
        """The engine behind this server, from the latest page's metrics schema."""
        snap = self.collector.latest
        if snap is None:
            return "llama.cpp" if self.engine_info is not None else "unknown"
        return engine_of_schema(snap.schema)

    @property
    def method(self) -> str | None:
        """The speculation method when known: the server log (a server mtpwatch started), the
        simulator's /sim/info, llama-server's /slots speculation type, the user's --spec-method."""
        llama = self.engine_info.spec_types if self.engine_info is not None else None
        return self.spec_method or self.bandwidth.method or llama or self.display.spec_method

    # -- hardware (the screen starts and stops the sampler) ------------------------------------

    @property
    def is_local(self) -> bool:
        """The server runs on this machine (loopback URL), so its GPU is the one NVML sees."""
        return is_loopback(urlsplit(self.spec.url).hostname or "")

    def sample_hardware(self, on: bool) -> None:
        """Start the NVML sampler (`core.roofline.nvml.Sampler`, a thread) where a reading applies
        (`on`, idempotent: the server is identified, on loopback and not simulated), or stop it."""
        applies = self.identified and self.is_local and not self.bandwidth.simulated
        if on and self._sampler is None and applies:
            self._sampler = Sampler(peak_gbps=self.bandwidth.peak_gbps).start()
            self.reading = self._sampler.latest()
            self.observers.nvml(self.clock(), self.reading)
        elif not on and self._sampler is not None:
            sampler, self._sampler = self._sampler, None
            sampler.stop(timeout=2.0)
            self.reading = None
            self.observers.nvml(self.clock(), None)

    def restore_reading(self, reading: HardwareReading | None) -> None:
        """Show a recorded reading (a replay's 'nvml' record; None: the sampler stopped)."""
        self.reading = reading

    def hardware_line(self) -> str:
        """The reading in words, or why there is none ('' before the server is identified)."""
        if not self.identified:
            return ""
        return describe_hardware(self.reading, local=self.is_local, simulated=self.bandwidth.simulated)
