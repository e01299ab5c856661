"""ServerFeed: one server as the app sees it (start it, scrape it, stream prompts), and its `ServerView`s.

The server watch: scrape → `MetricsSnapshot` → `core.metrics.rates.Collector` → `Rates` over the
window shown → one frozen `session.views.ServerView` (`view`, pure). The feed holds no widgets and
writes no markup (`ui.markup` draws its views). It owns an optional server process
(`session.launching`), a client, a collector of scrapes, the reachability of the server
(`core.http.backoff`), the console prompt's window (`session.prompts.PromptWindow`), an NVML sampler
the screen starts and stops, and its observers (`session.observers`: a recording is one).
A `ServerFeed` is the `session.sources.Source` of live HTTP, of Prometheus (another client,
`session.prometheus`) and of a replay (`session.replay.ReplaySource` pushes the recorded pages).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.http import engines
from mtpwatch.core.http.backoff import Backoff, ConnectionState
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import ServerError, ServerTimeout, ServerUnreachable
from mtpwatch.core.http.generation import GenerationRequest, GenerationResult, GenerationStats, StreamEvent
from mtpwatch.core.launch.launcher import Launch
from mtpwatch.core.launch.logparse import LogFacts
from mtpwatch.core.launch.process import ServerProcess
from mtpwatch.core.launch.vllm_cmd import is_loopback
from mtpwatch.core.metrics.attribution import PromptAcceptance, prompt_acceptance
from mtpwatch.core.metrics.engines import ENGINE_NOTES, Engine, engine_of_schema
from mtpwatch.core.metrics.filtered import ScrapeFilter
from mtpwatch.core.metrics.rates import Collector, Rates, idle_between
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.core.record.writer import Recorder
from mtpwatch.core.roofline.nvml import HardwareReading, Sampler
from mtpwatch.session.advice import k_schedule_of
from mtpwatch.session.answers import Answer
from mtpwatch.session.bandwidth_inputs import BandwidthModel
from mtpwatch.session.diagnosis import make_verdict
from mtpwatch.session.launching import StartupProgress, launch_server, log_facts
from mtpwatch.session.observers import Observers
from mtpwatch.session.prompts import PromptWindow
from mtpwatch.session.recording import FeedTap
from mtpwatch.session.view_fields import rate_fields, snapshot_fields
from mtpwatch.session.views import ServerView, Status, describe_hardware, stale_age

WINDOW_SECONDS = {"10 s": 10.0, "60 s": 60.0}
RETRY_INITIAL_S, RETRY_MAX_S = 0.5, 8.0
"""Retry delays after a failed scrape: 0.5, 1, 2, 4, 8 s, then 8 s (`Backoff`, no jitter)."""
CHART_POINTS = 60
"""Seconds of history the tok/s chart shows."""
LIVE_READ_INTERVAL_S = 0.01
"""The console reads its answer stream at most every 10 ms: a run of fast chunks is one read, one
wake-up; a chunk after a quiet gap (the first ones too) is stamped on arrival, one that follows
another within 10 ms up to 10 ms late (docs/cost.md). The benchmarks' arms read every chunk."""


def _clock_time(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall))


class ServerFeed:
    """One server as the app sees it: optional process, client, collector, connection state."""

    def __init__(
        self,
        spec: ServerSpec,
        display: DisplaySettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.spec = spec
        self.display = display
        self.clock = clock
        self.wall = wall
        self.client = VllmClient(
            spec.url,
            api_key=spec.api_key,
            timeout=5.0,
            clock=clock,
            scrape_filter=ScrapeFilter(),
            read_interval=LIVE_READ_INTERVAL_S,
        )
        self.collector = Collector(horizon_s=180.0)
        self.status: Status = "starting" if spec.launch else "connecting"
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
        self.process: ServerProcess | None = None
        self._launch: Launch | None = None
        self.prompt = PromptWindow(clock)
        """The console prompt's window: its times, its stream, this request's own numbers."""
        self._bandwidth = BandwidthModel(display)
        self._scrape_lock = asyncio.Lock()
        self._sampler: Sampler | None = None
        self.engine_info: engines.EngineInfo | None = None
        """What llama-server says about itself (/props, /slots); None for vLLM."""
        self.drafter_ref: str | None = None
        """The drafter model of the speculative config in the server log (servers mtpwatch started)."""
        self.spec_method: str | None = None
        """The speculation method from the server log (servers mtpwatch started), else None."""
        self.observers = Observers()
        """Told of every page, prompt, stream event and identity (a recording's `FeedTap`)."""
        self.scrape_via = ""
        """How the last scrape was made ('filtered, 3.3 KB', 'full page (filter ignored)'; '' unknown),
        and ', every 0.5 s' while the idle cadence applies."""
        self._wake = asyncio.Event()
        self.hardware_reading: HardwareReading | None = None
        """The NVML reading the panel shows: the sampler's, taken at each scrape (so a recording
        holds exactly what was shown), or a replay's recorded one; None while no sampler runs."""

    def record_to(self, recorder: Recorder, index: int) -> None:
        """Record this feed's scrapes, prompts, stream events and server facts as server `index`."""
        self.observers.add(FeedTap(recorder, index))

    # -- launching ----------------------------------------------------------------------------

    async def launch(self, progress: StartupProgress) -> bool:
        """Start the server of `spec.launch` through `launch_server`.

        Returns False (status 'failed', reason set, last log lines shown) when it does not come up.
        """
        assert self.spec.launch is not None

        def started(process: ServerProcess) -> None:
            self.process = process

        result = await launch_server(self.spec.launch, self.spec.url, progress, self.clock, started)
        if result.process is not None:
            self.facts = log_facts(result.server.watcher)
        if result.error is not None:
            hint = f" — {result.hint}" if result.hint else ""
            self.status, self.reason = "failed", result.error + hint
            self.observers.life(self.clock(), "failed", self.reason)
            return False
        self.drafter_ref = result.server.watcher.facts.spec_model
        self.spec_method = result.server.watcher.facts.spec_method
        self.observers.life(self.clock(), "launched")
        self._launch = result.server
        self.status = "connecting"
        return True

    # -- polling ------------------------------------------------------------------------------

    async def poll(self) -> float:
        """Scrape once; returns the seconds to wait before the next scrape (backoff when down, the
        idle cadence while the server is idle)."""
        async with self._scrape_lock:  # the poll loop and a prompt's final scrape never interleave
            try:
                if not self.identified:
                    await self._identify()
                text, snapshot = await self.client.scrape_page(self.model)
            except (ServerError, OSError, ValueError) as exc:
                return self.mark_down(str(exc) or type(exc).__name__)
            now = self.clock()
            state = self.client.scrape_state
            via = state.text if state is not None else ""
            last = self.collector.latest
            delay = self.next_delay(last is not None and idle_between(last, snapshot))
            slowed = via and delay > self.display.scrape_interval_s
            self.scrape_via = f"{via}, every {delay:g} s" if slowed else via  # recorded as shown
            if text is not None:
                self.observers.scrape(now, text, self.scrape_via)
            self.accept(snapshot, now)
        return delay

    def next_delay(self, idle: bool | None = None) -> float:
        """Seconds to the next scrape while up: `idle_interval_s` while the server is idle (`idle`,
        by default `Collector.idle`) and no console prompt runs (nothing moves; a prompt sent from
        here wakes the loop, `wake`), else `scrape_interval_s`."""
        interval = self.display.scrape_interval_s
        if self.prompt.stats is None and (self.collector.idle if idle is None else idle):
            return max(interval, self.display.idle_interval_s)
        return interval

    def wake(self) -> None:
        """Scrape now: ends the poll loop's `rest` (a console prompt starts)."""
        self._wake.set()

    async def rest(self, delay: float) -> None:
        """The poll loop's wait between scrapes: `delay` seconds, or until `wake`."""
        event = self._wake
        handle = asyncio.get_running_loop().call_later(delay, event.set)
        try:
            await event.wait()
        finally:
            handle.cancel()
            event.clear()

    def accept(self, snapshot: MetricsSnapshot, now: float) -> None:
        """Take one scrape taken at `now` (the poll loop, and a replay with the recorded page)."""
        if self.collector.add(snapshot, now):
            self.identified = False  # a restart: the version or model may have changed
            self.observers.life(self.clock(), "restart")
        if self.model is None and snapshot.model:
            self.model = snapshot.model
        if snapshot.models:
            self.models = tuple(snapshot.models)
        self.status, self.reason, self.retry_in = "up", "", None
        self._connection.success()
        self._backoff.reset()
        self.prompt.sample_client(now)
        if self._sampler is not None:
            self.hardware_reading = self._sampler.latest()
            self.observers.nvml(now, self.hardware_reading)

    async def _identify(self) -> None:
        refs: list[str] = []
        answered = False
        try:
            models = await self.client.models()
            answered = True
        except (ServerUnreachable, ServerTimeout):
            raise  # nothing answers: say so now, not after every other request timed out too
        except (ServerError, OSError, ValueError):
            models = []
        names = tuple(m.id for m in models)
        if names:
            self.models = names
            if self.model is None:
                self.model = names[0]
        entry = next((m for m in models if m.id == self.model), models[0] if models else None)
        if entry is not None:
            refs = [r for r in (entry.root, entry.id) if r]
        with contextlib.suppress(ServerError, OSError, ValueError):
            self.version = await self.client.version()
            answered = True
        with contextlib.suppress(ServerError, OSError, ValueError):
            self.engine_info = await engines.identify(self.client.get_json)
        if self.engine_info is not None:
            self.version = self.engine_info.build
            answered = True
        if not answered and self.collector.latest is None:
            return  # nothing answers yet (a server still starting): identify it at the next poll
        await self._bandwidth.load(
            self.client.base_url, refs=tuple(refs), drafter_ref=self.drafter_ref, local=self.is_local
        )
        self.identified = True
        self.observers.server(self.clock(), self.identity())

    def mark_down(self, reason: str) -> float:
        """A scrape failed for `reason` (the poll loop, and a replay's 'down' record); returns the
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
        status = self._connection.status()
        return status.since if status.state == "down" else None

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
            "gpu": self._bandwidth.gpu,
            "bandwidth": self._bandwidth.to_json(),
        }

    def restore_identity(self, identity: dict[str, Any]) -> None:
        """Take what `identity()` told instead of asking the server (a replay: no network)."""
        self.model = identity.get("model")
        self.models = tuple(identity.get("models") or ())
        self.version = identity.get("version")
        self.facts = tuple(identity.get("facts") or ())
        self.drafter_ref = identity.get("drafter_ref")
        self.spec_method = identity.get("spec_method")
        self._bandwidth.restore(identity.get("bandwidth") or {})
        self.identified = True

    def restore_life(self, what: str, detail: str = "") -> None:
        """Take a lifecycle event the feed once told (a replay's 'life' record)."""
        if what == "launched":
            self.status = "connecting"
        elif what == "failed":
            self.status, self.reason = "failed", detail
        elif what == "stopped":
            self.status, self.reason, self.identified = "stopped", "", False

    @property
    def launch_facts(self) -> LogFacts | None:
        """What the start-up log of the server this feed launched said (None: not launched here)."""
        return self._launch.watcher.facts if self._launch is not None else None

    # -- view ---------------------------------------------------------------------------------

    def rates(self, window: str, now: float | None = None) -> Rates | None:
        """Rates over `window` ('10 s', '60 s' or 'prompt')."""
        now = self.clock() if now is None else now
        if window == "prompt":
            return self.prompt.rates(self.collector, now)
        return self.collector.window(WINDOW_SECONDS[window], now)

    def acceptance(self, window: str, rates: Rates | None) -> PromptAcceptance:
        """The acceptance shown for `window` with counter `rates`: `core.metrics.attribution`'s rule.

        The prompt window passes this prompt's own numbers (`PromptWindow.acceptance`).
        """
        if window != "prompt":
            return prompt_acceptance(counters=rates, scope="engine-wide")
        return self.prompt.acceptance(self.collector, rates)

    def view(self, window: str) -> ServerView:
        """The panel's numbers now, over `window` (what the screen shows). Pure: reads state only."""
        now = self.clock()
        snap = self.collector.latest
        r, window = self._shown_rates(window, now)
        k = snap.num_speculative_tokens if snap is not None and snap.speculative else 0
        bw = self._bandwidth.view(r, k, snap, self.prompt.request_tokens, hardware=self._hardware_line())
        speculative = None if snap is None else (snap.speculative or self._props_speculating)
        if speculative is False and snap is not None:  # an OpenMetrics page may not tell yet
            speculative = snap.speculating(bool(self.launch_facts and self.launch_facts.spec_method))
        acc = self.acceptance(window, r)
        verdict, level = make_verdict(
            method=self.method,
            speculative=speculative,
            acceptance_rate=acc.acceptance_rate,
            mean_acceptance_length=acc.mean_acceptance_length,
            drafts=acc.drafts,
            bandwidth=bw,
            window=window,
            k=k,
            per_position=acc.per_position,
        )
        return ServerView(
            label=self.spec.label,
            url=self.spec.url,
            status=self.status,
            status_detail=self._status_detail(),
            model=self.model,
            models=self.models,
            version=self.version,
            method=self.method,
            speculative=speculative,
            k=(snap.num_speculative_tokens or None) if snap is not None else None,
            facts=self.facts,
            window=window,
            scope=acc.scope,
            acceptance_rate=acc.acceptance_rate,
            mean_acceptance_length=acc.mean_acceptance_length,
            per_position=acc.per_position,
            per_position_conditional=acc.per_position_conditional,
            restarts=self.collector.restarts,
            scrape=self.scrape_via,
            drafts=acc.drafts if speculative else None,
            bandwidth=bw,
            verdict=verdict,
            verdict_level=level,
            k_schedule=k_schedule_of(self),
            as_of_s=stale_age(self.status, self.collector.latest_t, now, 2 * self.display.idle_interval_s),
            **rate_fields(r),
            **snapshot_fields(snap),
            **self._series_fields(now),
            **self._engine_fields(snap, r),
        )

    def _shown_rates(self, window: str, now: float) -> tuple[Rates | None, str]:
        """The rates shown for `window`, and the window they are over.

        A time window with no tokens (the server idle since the last prompt) would show only
        dashes: the last prompt's numbers stand in, labelled as such ("this prompt").
        """
        r = self.rates(window, now)
        if window != "prompt" and (r is None or not r.generation_tokens):
            prompt_rates = self.rates("prompt", now)
            if prompt_rates is not None and prompt_rates.generation_tokens:
                return prompt_rates, "prompt"
        return r, window

    def _status_detail(self) -> str:
        """One line on why the server is not up ('disconnected since 12:00:01 (…), retrying in 2.0 s')."""
        if self.status == "down" or (self.status == "connecting" and self.reason):
            down_since = self.down_since
            since = _clock_time(down_since) if down_since is not None else "?"
            retry = f", retrying in {self.retry_in:.1f} s" if self.retry_in is not None else ""
            verb = "disconnected" if self.status == "down" else "not reachable"
            return f"{verb} since {since} ({self.reason}){retry}"
        return self.reason if self.status == "failed" else ""

    def _series_fields(self, now: float) -> dict[str, Any]:
        """The chart's series: server tok/s and the running prompt's client decode tok/s, per second."""
        series = self.collector.tok_s_series(since=now - CHART_POINTS, smooth_s=1.0)
        return {
            "server_series": _per_second(series, now),
            "client_series": tuple(v for t, v in self.prompt.client_points if t >= now - CHART_POINTS),
        }

    def _engine_fields(self, snap: MetricsSnapshot | None, r: Rates | None) -> dict[str, Any]:
        """ServerView fields that differ by engine (core.http.engines knows how)."""
        engine = self.engine
        k = snap.num_speculative_tokens if snap is not None else 0
        note = engines.draft_note(engine, k, r.draft_tokens if r else 0.0, r.drafts if r else 0.0)
        return {"engine": engine, "draft_note": note, "notes": ENGINE_NOTES.get(engine, {})}

    @property
    def _props_speculating(self) -> bool:
        """llama-server says it drafts (/slots) before its first request fills the spec counters."""
        return self.engine_info is not None and bool(self.engine_info.speculating)

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
        simulator's /sim/info, the user's --spec-method, else None (the panel says "speculative")."""
        llama = self.engine_info.spec_types if self.engine_info is not None else None
        return self.spec_method or self._bandwidth.method or llama or self.display.spec_method

    # -- hardware (the screen starts and stops the sampler) ------------------------------------

    @property
    def is_local(self) -> bool:
        """The server runs on this machine (loopback URL), so its GPU is the one NVML sees."""
        return is_loopback(urlsplit(self.spec.url).hostname or "")

    @property
    def can_sample_hardware(self) -> bool:
        """A local GPU reading applies: the server is identified, on loopback and not simulated."""
        return self.identified and self.is_local and not self._bandwidth.simulated

    def start_hardware(self) -> None:
        """Start the NVML sampler thread when a reading applies (idempotent)."""
        if self._sampler is None and self.can_sample_hardware:
            self._sampler = Sampler(peak_gbps=self._bandwidth.peak_gbps).start()
            self.hardware_reading = self._sampler.latest()
            self.observers.nvml(self.clock(), self.hardware_reading)

    def stop_hardware(self) -> None:
        """Stop the NVML sampler thread (panel hidden, server stopped, or shutting down)."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.stop(timeout=2.0)
            self.hardware_reading = None
            self.observers.nvml(self.clock(), None)

    def _hardware_line(self) -> str:
        """The sampler's latest reading in words, or why there is none."""
        if not self.identified:
            return ""
        if self.hardware_reading is None:
            return describe_hardware(None, local=self.is_local, simulated=self._bandwidth.simulated)
        return describe_hardware(self.hardware_reading, local=True)

    # -- prompts ------------------------------------------------------------------------------

    async def generate(self, prompt: str, on_text: Callable[[str], None]) -> Answer:
        """Stream `prompt`, passing text to `on_text` as it arrives; returns the answer and summary."""
        request = GenerationRequest(
            prompt=prompt,
            model=self.model,
            chat=self.display.chat,
            max_tokens=self.display.max_tokens,
            temperature=self.display.temperature,
            return_token_ids=True,
            extra=engines.stream_extras(self.engine),
        )
        stats = self.begin_prompt(prompt)
        observers = self.observers

        def on_event(event: StreamEvent) -> None:
            observers.event(event)
            if event.text:
                on_text(event.text)

        try:
            result = await self.client.generate(request, stats=stats, on_event=on_event)
            observers.result(self.clock(), result)
        finally:
            self.end_prompt(self.clock())
        if result.error is None:
            self.client.fresh_next()  # every tier, the histograms included: the window closes here
            await self.poll()  # a scrape after the last token, so the prompt's window is complete
        return self.close_prompt(result, self.clock())

    def begin_prompt(self, prompt: str) -> GenerationStats:
        """A console prompt starts now: its window opens; its stream goes into the returned stats."""
        stats = self.prompt.begin()
        self.wake()  # back to the full scrape rate from the first token
        assert self.prompt.t0 is not None
        self.observers.prompt(self.prompt.t0, prompt)
        return stats

    def end_prompt(self, t1: float) -> None:
        """The prompt's generation call returned (or was cancelled) at `t1`."""
        self.prompt.end(t1)
        self.observers.end(t1)

    def close_prompt(self, result: GenerationResult, t_end: float) -> Answer:
        """The prompt's window closes at `t_end`; its answer and summary from `result`."""
        self.prompt.close(result, t_end)
        self.observers.done(t_end)
        acc = self.acceptance("prompt", self.rates("prompt"))
        return self.prompt.answer(result, acc)

    def cancelled_answer(self) -> Answer:
        """The answer of a generation the user cancelled (what arrived so far)."""
        result = self.prompt.cancelled_result()
        self.observers.result(self.clock(), result)
        return self.close_prompt(result, self.clock())

    # -- shutdown -----------------------------------------------------------------------------

    async def stop_server(self) -> None:
        """Stop the server this feed launched (restart mode between sessions); the client stays open."""
        process, self.process = self.process, None
        launch, self._launch = self._launch, None
        if process is not None:
            await process.stop(timeout=10.0)
        if launch is not None:
            await launch.close_log()
        self.stop_hardware()
        self.status, self.reason, self.identified = "stopped", "", False
        self.observers.life(self.clock(), "stopped")

    async def close(self) -> None:
        """Stop the server if mtpwatch owns it (unless keep); close the HTTP client."""
        self.stop_hardware()
        process, self.process = self.process, None
        if process is not None:
            launch = self.spec.launch
            if launch is not None and launch.keep:
                process.detach()
            else:
                await process.stop(timeout=10.0)
        server, self._launch = self._launch, None
        if server is not None:
            await server.close_log()
        with contextlib.suppress(Exception):
            await self.client.aclose()


def _per_second(series: list[tuple[float, float]], now: float) -> tuple[float, ...]:
    """Resample (t, tok/s) points to one per second for the last CHART_POINTS seconds."""
    if not series:
        return ()
    out: list[float] = []
    j = 0
    start = max(series[0][0], now - CHART_POINTS)
    t = start
    value = series[0][1]
    while t <= now:
        while j < len(series) and series[j][0] <= t:
            value = series[j][1]
            j += 1
        out.append(value)
        t += 1.0
    return tuple(out)
