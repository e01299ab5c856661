"""ServerFeed: drives one server for the app (start it, scrape it, stream prompts) and builds `ServerView`s.

This is the only UI module that talks to `mtpwatch.core`. It holds no widgets: the screen's
workers call it and post the views it returns, so it can be tested without a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.http import engines
from mtpwatch.core.http.client import ServerError, VllmClient
from mtpwatch.core.http.generation import (
    GenerationRequest,
    GenerationResult,
    GenerationStats,
    RequestSpecMetrics,
    StreamEvent,
)
from mtpwatch.core.launch.logparse import LogWatcher
from mtpwatch.core.metrics.rates import Collector, Rates
from mtpwatch.ui.view import (
    BandwidthView,
    PromptSummary,
    ServerView,
    Status,
    describe_hardware,
    make_verdict,
)

WINDOW_SECONDS = {"10 s": 10.0, "60 s": 60.0}
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
"""Retry delays after a failed scrape (the last repeats)."""
CHART_POINTS = 60
"""Seconds of history the tok/s chart shows."""
PER_REQUEST_SCOPE = "this request (vLLM per-request metrics)"
"""Scope of acceptance numbers taken from the response's `metrics.speculative_decoding`."""
LLAMACPP_REQUEST_SCOPE = "this request (llama.cpp timings)"
"""Scope of the acceptance rate from llama-server's `timings.draft_n_accepted / draft_n`."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One server's answer to one console prompt."""

    summary: PromptSummary
    """The summary line."""
    text: str = ""
    """Full output text."""
    token_ids: tuple[int, ...] | None = None
    """Output token ids when the server sent them."""


def compare_outputs(a: Answer, b: Answer) -> str:
    """The lossless line: 'outputs identical' or where A and B first diverge (token ids when possible)."""
    if a.summary.error or b.summary.error or a.summary.cancelled or b.summary.cancelled:
        return "[dim]lossless check: — (an answer failed or was cancelled)[/]"
    from mtpwatch.core.ab.bench import first_difference

    if a.token_ids is not None and b.token_ids is not None:
        ids_a, ids_b = a.token_ids, b.token_ids
        i = first_difference(ids_a, ids_b)
        if i is None:
            return f"[$success]lossless: outputs identical[/] ({len(ids_a)} token ids, temperature 0)"
        if i < min(len(ids_a), len(ids_b)):
            return f"[$error]lossless: outputs differ at token {i + 1}[/] (id {ids_a[i]} vs {ids_b[i]})"
        return f"[$warning]lossless: identical for {i} tokens, then one answer is longer[/]"
    ta, tb = a.text, b.text
    j = first_difference(ta, tb)
    if j is None:
        return f"[$success]lossless: outputs identical[/] ({len(ta)} characters, temperature 0)"
    context = ta[max(0, j - 20) : j].replace("\n", " ")
    return (
        f"[$error]lossless: outputs differ at character {j + 1}[/] after “{_esc(context)}”: "
        f"{_esc(repr(ta[j : j + 8]))} vs {_esc(repr(tb[j : j + 8]))}"
    )


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
        self.client = VllmClient(spec.url, api_key=spec.api_key, timeout=5.0, clock=clock)
        self.collector = Collector(horizon_s=180.0)
        self.status: Status = "starting" if spec.launch else "connecting"
        self.reason = ""
        self.down_since: float | None = None
        self.retry_in: float | None = None
        self._failures = 0
        self.identified = False
        self.model = spec.model
        self.models: tuple[str, ...] = ()
        self.version: str | None = None
        self.facts: tuple[str, ...] = ()
        self.process: Any = None
        self.prompt_t0: float | None = None
        self.prompt_t1: float | None = None
        self.prompt_t_end: float | None = None
        """Time of the scrape after the prompt's last token: the 'prompt' window ends there."""
        """(scrape before the prompt, scrape after its last token, restarts then) of the last prompt."""
        self._client_points: list[tuple[float, float]] = []
        self._gen_stats: GenerationStats | None = None
        self._cancelled_stats: GenerationStats | None = None
        self._bandwidth = _BandwidthModel(display)
        self._scrape_lock = asyncio.Lock()
        self._request_tokens: int | None = None
        self.request_spec: RequestSpecMetrics | None = None
        """vLLM's per-request spec-decode metrics of the last console prompt, when the server sent them."""
        """Prompt + generated tokens of the last console prompt (KV context when the engine says 0)."""
        self._sampler: Any = None
        self.drafter_ref: str | None = None
        """The drafter model of the speculative config in the server log (servers mtpwatch started)."""
        self.hardware_wanted = False
        """Set by the screen: the roofline panel is visible, so a local GPU may be sampled."""
        self.engine_info: engines.EngineInfo | None = None
        """What llama-server says about itself (/props, /slots); None for vLLM."""

    # -- launching ----------------------------------------------------------------------------

    async def launch(self, progress: Callable[[str, list[str]], None]) -> bool:
        """Start the server of `spec.launch`, stream its log to `progress`, wait for /health.

        Returns False (status 'failed', reason set, last lines shown) when it dies or times out.
        """
        from mtpwatch.core.launch.process import ServerProcess, StartupError

        launch = self.spec.launch
        assert launch is not None
        watcher = LogWatcher()
        t0 = self.clock()
        try:
            self.process = await ServerProcess.start(launch.argv, launch.env)
        except StartupError as exc:
            return self._fail(str(exc), progress)
        pending: list[str] = []

        async def pump() -> None:
            async for line in self.process.lines():
                watcher.feed(line)
                pending.append(line)

        async def ticker() -> None:
            while True:
                batch = pending[:]
                pending.clear()
                progress(self._phase_line(watcher, self.clock() - t0), batch)
                await asyncio.sleep(0.1)

        pump_task = asyncio.create_task(pump())
        tick_task = asyncio.create_task(ticker())
        try:
            await self.process.wait_healthy(self.spec.url, timeout=launch.startup_timeout_s, poll=0.25)
        except StartupError as exc:
            await asyncio.sleep(0.2)
            tick_task.cancel()
            self.facts = _facts(watcher)
            hint = _hint(watcher)
            tail = [] if pending else exc.tail[-5:]
            progress(
                f"[$error]failed: {_esc(str(exc))}[/]"
                + (f"\n[$warning]hint: {_esc(hint)}[/]" if hint else ""),
                pending[:] + tail,
            )
            self.status, self.reason = "failed", str(exc) + (f" — {hint}" if hint else "")
            if self.process.returncode is None:
                await self.process.stop()
            return False
        finally:
            tick_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await tick_task
        self.facts = _facts(watcher)
        self.drafter_ref = watcher.facts.spec_model
        progress(self._phase_line(watcher, self.clock() - t0), pending[:])
        pending.clear()
        self._pump_task = pump_task  # keep reading so the pipe never fills; lines are dropped
        self.status = "connecting"
        return True

    def _fail(self, reason: str, progress: Callable[[str, list[str]], None]) -> bool:
        self.status, self.reason = "failed", reason
        progress(f"[$error]failed: {_esc(reason)}[/]", [])
        return False

    @staticmethod
    def _phase_line(watcher: LogWatcher, elapsed: float) -> str:
        facts = " · ".join(_facts(watcher))
        line = f"[b]{_esc(watcher.phase.value)}[/] · {elapsed:.1f} s since start"
        return line + (f"\n[dim]{_esc(facts)}[/]" if facts else "")

    # -- polling ------------------------------------------------------------------------------

    async def poll(self) -> float:
        """Scrape once; returns the seconds to wait before the next scrape (backoff when down)."""
        async with self._scrape_lock:  # the poll loop and a prompt's final scrape never interleave
            try:
                if not self.identified:
                    await self._identify()
                snapshot = await self.client.scrape(self.model)
            except (ServerError, OSError, ValueError) as exc:
                return self._down(str(exc) or type(exc).__name__)
            now = self.clock()
            if self.collector.add(snapshot, now):
                self.identified = False  # a restart: the version or model may have changed
        if self.model is None and snapshot.model:
            self.model = snapshot.model
        if snapshot.models:
            self.models = tuple(snapshot.models)
        self.status, self.reason, self.down_since, self.retry_in = "up", "", None, None
        self._failures = 0
        self._sample_client(now)
        return self.display.scrape_interval_s

    async def _identify(self) -> None:
        refs: list[str] = []
        with contextlib.suppress(ServerError, OSError, ValueError):
            models = await self.client.models()
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
        with contextlib.suppress(ServerError, OSError, ValueError):
            self.engine_info = await engines.identify(self.client.get_json)
        if self.engine_info is not None:
            self.version = self.engine_info.build
        await self._bandwidth.load(
            self.client.base_url, refs=tuple(refs), drafter_ref=self.drafter_ref, local=self.is_local
        )
        self.identified = True

    def _down(self, reason: str) -> float:
        if self.status == "failed":
            return BACKOFF_S[-1]
        if self.down_since is None:
            self.down_since = self.wall()
        self.status = "down" if self.collector.latest is not None or self._failures else "connecting"
        self.reason = reason.splitlines()[0] if reason else "unreachable"
        delay = BACKOFF_S[min(self._failures, len(BACKOFF_S) - 1)]
        self._failures += 1
        self.retry_in = delay
        if self._failures > 1:
            self.status = "down"
        return delay

    def _sample_client(self, now: float) -> None:
        """One point per second of the running prompt's client decode tok/s."""
        stats = self._gen_stats
        if stats is None or stats.t_first is None or stats.t_last is None:
            return
        if self._client_points and now - self._client_points[-1][0] < 1.0:
            return
        span = stats.t_last - stats.t_first
        if span > 0 and stats.completion_tokens >= 2:
            self._client_points.append((now, (stats.completion_tokens - 1) / span))

    # -- view ---------------------------------------------------------------------------------

    def rates(self, window: str, now: float | None = None) -> Rates | None:
        """Rates over `window` ('10 s', '60 s' or 'prompt')."""
        now = self.clock() if now is None else now
        if window == "prompt":
            if self.prompt_t0 is None:
                return None
            # A finished prompt ends at the scrape after its last token (later idle time would
            # dilute it); a running one at the newest scrape.
            return self.collector.since(self.prompt_t0, now, until=self.prompt_t_end)
        return self.collector.window(WINDOW_SECONDS[window], now)

    def scope(self, window: str) -> str:
        """'this request' when only the console's prompt ran in the prompt window, else 'engine-wide'."""
        if window == "prompt" and self.prompt_t0 is not None:
            return str(self.collector.attribution(self.prompt_t0, self.prompt_t1).scope)
        return "engine-wide"

    def view(self, window: str) -> ServerView:
        """The panel's numbers now."""
        now = self.clock()
        snap = self.collector.latest
        rates = self.rates(window, now)
        if self.status == "down" or (self.status == "connecting" and self.reason):
            since = _clock_time(self.down_since) if self.down_since is not None else "?"
            retry = f", retrying in {self.retry_in:.1f} s" if self.retry_in is not None else ""
            verb = "disconnected" if self.status == "down" else "not reachable"
            detail = f"{verb} since {since} ({self.reason}){retry}"
        elif self.status == "failed":
            detail = self.reason
        else:
            detail = ""
        series = self.collector.tok_s_series(since=now - CHART_POINTS, smooth_s=1.0)
        server_series = _per_second(series, now)
        client_series = tuple(v for t, v in self._client_points if t >= now - CHART_POINTS)
        r = rates
        # A time window with no tokens (the server idle since the last prompt) would show only
        # dashes: show the last prompt's numbers instead, labelled as such ("this prompt").
        if window != "prompt" and (r is None or not r.generation_tokens):
            prompt_rates = self.rates("prompt", now)
            if prompt_rates is not None and prompt_rates.generation_tokens:
                r, window = prompt_rates, "prompt"
        k = snap.num_speculative_tokens if snap is not None and snap.speculative else 0
        bandwidth = self._bandwidth.view(r, k, snap, self._request_tokens, hardware=self._hardware_line())
        speculative = None if snap is None else (snap.speculative or self._props_speculating)
        verdict, level = make_verdict(
            speculative=speculative,
            acceptance_rate=r.acceptance_rate if r else None,
            mean_acceptance_length=r.mean_acceptance_length if r else None,
            drafts=r.drafts if r else None,
            bandwidth=bandwidth,
            window=window,
        )
        acceptance = r.acceptance_rate if r else None
        length = r.mean_acceptance_length if r else None
        per_position = r.per_position if r else ()
        conditional = r.per_position_conditional if r else ()
        scope = self.scope(window)
        per_request = self.request_spec
        if window == "prompt" and per_request is not None and self.prompt_t_end is not None:
            acceptance = per_request.acceptance_rate
            length = per_request.mean_acceptance_length
            per_position = per_request.per_position
            conditional = _conditional(per_position)
            scope = PER_REQUEST_SCOPE
        return ServerView(
            label=self.spec.label,
            url=self.spec.url,
            status=self.status,
            status_detail=detail,
            model=self.model,
            models=self.models,
            version=self.version,
            speculative=speculative,
            k=(snap.num_speculative_tokens or None) if snap is not None else None,
            facts=self.facts,
            window=window,
            scope=scope,
            acceptance_rate=acceptance,
            mean_acceptance_length=length,
            per_position=per_position,
            per_position_conditional=conditional,
            server_tok_s=r.server_tok_s if r else None,
            steps_per_s=r.steps_per_s if r else None,
            mean_step_s=r.mean_step_s if r else None,
            mean_ttft_s=r.mean_ttft_s if r else None,
            mean_tpot_s=r.mean_tpot_s if r else None,
            kv_cache_usage=snap.kv_cache_usage if snap else None,
            running=snap.requests_running if snap else None,
            waiting=snap.requests_waiting if snap else None,
            restarts=self.collector.restarts,
            server_series=server_series,
            client_series=client_series,
            drafts=r.drafts if r and speculative else None,
            bandwidth=bandwidth,
            verdict=verdict,
            verdict_level=level,
            **self._engine_fields(snap, r),
        )

    def _engine_fields(self, snap: Any, r: Rates | None) -> dict[str, Any]:
        """ServerView fields that differ by engine (core.http.engines knows how)."""
        engine = self.engine
        k = snap.num_speculative_tokens if snap is not None else 0
        note = engines.draft_note(engine, k, r.draft_tokens if r else 0.0, r.drafts if r else 0.0)
        method = self.engine_info.spec_types if self.engine_info is not None else None
        return {
            "engine": engine,
            "method": method,
            "draft_note": note,
            "notes": engines.ENGINE_NOTES.get(engine, {}),
        }

    @property
    def _props_speculating(self) -> bool:
        """llama-server says it drafts (/slots) before its first request fills the spec counters."""
        return self.engine_info is not None and bool(self.engine_info.speculating)

    @property
    def engine(self) -> engines.Engine:
        """The engine behind this server, from the latest page's metrics schema."""
        snap = self.collector.latest
        if snap is None:
            return "llama.cpp" if self.engine_info is not None else "unknown"
        return engines.engine_of_schema(snap.schema)

    # -- hardware -----------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        """The server runs on this machine (loopback URL), so its GPU is the one NVML sees."""
        from urllib.parse import urlsplit

        from mtpwatch.core.launch.vllm_cmd import is_loopback

        return is_loopback(urlsplit(self.spec.url).hostname or "")

    def _hardware_line(self) -> str:
        """Start/stop the NVML sampler as the panel shows/hides it; the reading in words."""
        simulated = self._bandwidth.simulated
        if not self.identified:
            return ""
        if not (self.hardware_wanted and self.is_local and not simulated):
            self.stop_hardware()
            return describe_hardware(None, local=self.is_local, simulated=simulated)
        if self._sampler is None:
            from mtpwatch.core.roofline.nvml import Sampler

            self._sampler = Sampler(peak_gbps=self._bandwidth.peak_gbps).start()
        return describe_hardware(self._sampler.latest(), local=True)

    def stop_hardware(self) -> None:
        """Stop the NVML sampler thread (panel hidden, or shutting down)."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.stop(timeout=2.0)

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
        stats = GenerationStats(clock=self.clock)
        self._gen_stats = stats
        self._client_points = []
        self.prompt_t0 = self.clock()
        self.prompt_t1 = self.prompt_t_end = None
        self.request_spec = None
        stats.start(self.prompt_t0)
        text_only = on_text

        def on_event(event: StreamEvent) -> None:
            if event.text:
                text_only(event.text)

        self._cancelled_stats = stats
        try:
            result = await self.client.generate(request, stats=stats, on_event=on_event)
        finally:
            self.prompt_t1 = self.clock()
            self._gen_stats = None
        if result.error is None:
            await self.poll()  # a scrape after the last token, so the prompt's window is complete
        self.prompt_t_end = self.clock()
        return self._answer(result)

    def _answer(self, result: GenerationResult) -> Answer:
        if result.completion_tokens:
            self._request_tokens = (result.prompt_tokens or 0) + result.completion_tokens
        rates = None
        scope = "engine-wide"
        if self.prompt_t0 is not None:
            rates = self.rates("prompt")
            scope = str(self.collector.attribution(self.prompt_t0, self.prompt_t1).scope)
        acceptance = rates.acceptance_rate if rates else None
        length = rates.mean_acceptance_length if rates else None
        self.request_spec = result.spec_metrics
        if result.spec_metrics is not None:
            # vLLM's own numbers for exactly this request beat counter deltas (no attribution guess).
            acceptance = result.spec_metrics.acceptance_rate
            length = result.spec_metrics.mean_acceptance_length
            scope = PER_REQUEST_SCOPE
        elif result.timings is not None and result.timings.acceptance_rate is not None:
            acceptance = result.timings.acceptance_rate  # llama-server's draft counts of this request
            scope = LLAMACPP_REQUEST_SCOPE
        summary = PromptSummary(
            tokens=result.completion_tokens,
            ttft_s=result.ttft_s,
            decode_tok_s=result.decode_tok_s,
            acceptance_rate=acceptance,
            mean_acceptance_length=length,
            scope=scope,
            approximate=not result.tokens_exact,
            cancelled=result.cancelled,
            error=result.error,
        )
        return Answer(summary=summary, text=result.text, token_ids=result.token_ids)

    def cancelled_answer(self) -> Answer:
        """The answer of a generation the user cancelled (what arrived so far)."""
        stats = self._cancelled_stats or GenerationStats(clock=self.clock)
        self._cancelled_stats = None
        self.prompt_t_end = self.clock()
        return self._answer(stats.finish(cancelled=True))

    # -- shutdown -----------------------------------------------------------------------------

    async def stop_server(self) -> None:
        """Stop the server this feed launched (restart mode between sessions); the client stays open."""
        process, self.process = self.process, None
        pump = getattr(self, "_pump_task", None)
        if pump is not None:
            pump.cancel()
        if process is not None:
            await process.stop(timeout=10.0)
        self.stop_hardware()
        self.status, self.reason, self.identified = "stopped", "", False

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


def _conditional(marginal: tuple[float, ...]) -> tuple[float, ...]:
    """Conditional per-position acceptance (position i given i−1 accepted) from marginal rates."""
    out: list[float] = []
    prev = 1.0
    for p in marginal:
        out.append(p / prev if prev > 0 else 0.0)
        prev = p
    return tuple(out)


def _esc(text: str) -> str:
    from textual.markup import escape

    return escape(text)


def _facts(watcher: LogWatcher) -> tuple[str, ...]:
    """Header facts from the server log: weights, MTP detected, centroids masking, KV cache."""
    f = watcher.facts
    out: list[str] = []
    if f.weights_gib is not None:
        out.append(f"weights {f.weights_gib:.1f} GiB")
    if f.mtp_detected:
        out.append("Detected MTP model")
    if f.spec_method:
        k = f" k={f.num_spec_tokens}" if f.num_spec_tokens else ""
        out.append(f"spec {f.spec_method}{k}")
    if f.centroids_masking:
        out.append("centroids masking on")
    if f.kv_cache_gib is not None:
        out.append(f"KV cache {f.kv_cache_gib:.1f} GiB")
    elif f.kv_cache_tokens is not None:
        out.append(f"KV cache {f.kv_cache_tokens:,} tokens")
    return tuple(out)


def _hint(watcher: LogWatcher) -> str:
    return str(watcher.hints[-1]) if watcher.hints else ""


class _BandwidthModel:
    """The roofline panel's numbers: `core.roofline.compute_roofline` on the window's rates.

    The model config comes from --model-config, else from the simulator's /sim/info; the peak from
    --peak-gbps, --gpu or /sim/info. KV-cache reads are priced at the engine's KV-cache occupancy
    (`kv_cache_usage` × `num_gpu_blocks` × `block_size` of `cache_config_info`) when it is known and
    non-zero, else at the last console prompt's prompt + generated tokens.
    """

    def __init__(self, display: DisplaySettings) -> None:
        self.display = display
        self.spec: Any = None
        self.drafter: Any = None
        self.gpu: str | None = None
        self.peak_gbps: float | None = display.peak_gbps
        self.error = ""
        self.simulated = False
        self.sources = ""
        """Where the config, drafter and peak came from, in words (shown in the panel)."""
        self._loaded = False

    async def load(
        self,
        base_url: str,
        *,
        refs: tuple[str, ...] = (),
        drafter_ref: str | None = None,
        local: bool = False,
    ) -> None:
        """Resolve the model spec and the peak once (a failure becomes a one-line note).

        Model config, in order: --model-config; each of `refs` (the /v1/models entry's `root`, then
        its id: a local directory with config.json, a bundled preset or the local HF cache, never the
        network); the simulator's /sim/info. Drafter: --drafter-config, `drafter_ref` (the speculative
        config in the server log), /sim/info. Peak: --peak-gbps, --gpu, /sim/info, else the local GPU
        through NVML when the server is on loopback.
        """
        if self._loaded:
            return
        self._loaded = True
        from mtpwatch.core.roofline.bytemodel import ConfigError, ModelSpec
        from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu

        info = await _sim_info(base_url)
        self.simulated = bool(info)
        sources: list[str] = []
        try:
            if self.display.model_config:
                self.spec = ModelSpec.from_config(self.display.model_config)
                sources.append("config --model-config")
            else:
                found = _find_config(refs)
                if found is not None:
                    path, where = found
                    self.spec = ModelSpec.from_config(path)
                    sources.append(f"config {where}")
                elif info.get("model_config"):
                    self.spec = ModelSpec.from_config(str(info["model_config"]))
                    sources.append("config from the simulator")
        except (ConfigError, ValueError, OSError) as exc:
            self.error = f"model config: {str(exc).splitlines()[0]}"
        drafter_given = self.display.drafter_config
        for ref, where in (
            (drafter_given, "--drafter-config"),
            (drafter_ref, "server log"),
            (info.get("drafter") if info.get("spec") else None, "simulator"),
        ):
            if not ref:
                continue
            with contextlib.suppress(ConfigError, ValueError, OSError):
                found = _find_config((str(ref),))
                self.drafter = ModelSpec.from_config(found[0] if found else str(ref))
                sources.append(f"drafter {where}")
                break
        if self.display.gpu is not None:
            with contextlib.suppress(UnknownGpuError):
                gpu = lookup_gpu(self.display.gpu)
                self.gpu = gpu.key
                self.peak_gbps = self.peak_gbps or gpu.peak_gbps
                sources.append("peak --gpu")
        elif info.get("gpu"):
            self.gpu = str(info["gpu"]) + " (simulated)"
            self.peak_gbps = self.peak_gbps or float(info.get("peak_gbps") or 0) or None
            sources.append("peak simulator")
        elif local and self.peak_gbps is None:
            name, peak = await asyncio.to_thread(_local_gpu)
            if peak is not None:
                self.gpu, self.peak_gbps = name, peak
                sources.append("peak local GPU (NVML)")
        if self.display.peak_gbps is not None:
            sources.append("peak --peak-gbps")
        self.sources = " · ".join(sources)

    @staticmethod
    def context(snap: Any, request_tokens: int | None) -> tuple[int, str]:
        """KV context tokens for the roofline and where they came from, in words."""
        if snap is not None and snap.kv_cache_usage:
            cfg = snap.cache_config
            try:
                size = int(cfg["num_gpu_blocks"]) * int(cfg["block_size"])
            except (KeyError, ValueError):
                size = 0
            if size > 0:
                return round(snap.kv_cache_usage * size), "KV-cache occupancy, engine-wide"
        if request_tokens:
            return request_tokens, "last prompt: prompt + generated"
        return 0, "KV cache empty"

    def view(
        self, rates: Rates | None, k: int, snap: Any, request_tokens: int | None, *, hardware: str = ""
    ) -> BandwidthView:
        if self.spec is None:
            note = self.error or (
                "no model config: pass --model-config PATH/config.json (and --gpu NAME for a remote server)"
            )
            return BandwidthView(note=note, hardware=hardware)
        if self.peak_gbps is None:
            return BandwidthView(
                note="unknown GPU: pass --gpu NAME or --peak-gbps X for % of peak", hardware=hardware
            )
        from mtpwatch.core.roofline.ceilings import compute_roofline

        tau = rates.mean_acceptance_length if rates is not None and k else None
        if tau is not None:
            tau = min(max(tau, 1.0), k + 1.0)
        context, source = self.context(snap, request_tokens)
        steps, tok = _busy_rates(rates)
        try:
            roof = compute_roofline(
                self.spec,
                peak_gbps=self.peak_gbps,
                gpu=self.gpu or "GPU",
                k=k,
                drafter=self.drafter if k else None,
                context=context,
                mean_acceptance_length=tau,
                # idle (no steps): no "now" figures, so the summary says what the roof allows
                steps_per_s=steps,
                tok_s=tok,
            )
        except ValueError as exc:
            return BandwidthView(note=f"roofline: {exc}", hardware=hardware)
        return BandwidthView(
            gpu=self.gpu,
            peak_gbps=roof.peak_gbps,
            effective_gbps=roof.effective_gbps,
            percent_of_peak=roof.pct_of_peak,
            k=k,
            tau=roof.mean_acceptance_length if k else None,
            tau_source="measured" if tau is not None else roof.acceptance_source,
            ceiling_baseline_tok_s=roof.ceiling_tok_s_baseline,
            ceiling_spec_tok_s=roof.ceiling_tok_s_spec if k else None,
            tok_s=roof.tok_s,
            pct_of_ceiling=roof.pct_of_ceiling,
            acceptance_term=roof.acceptance_term if k else None,
            bandwidth_term=roof.bandwidth_term if k else None,
            compute_term=roof.compute_term if k else None,
            binding=roof.binding if k else "",
            summary=roof.summary,
            context_tokens=context,
            context_source=source,
            hardware=hardware,
            config_source=self.sources,
        )


def _busy_rates(rates: Rates | None) -> tuple[float | None, float | None]:
    """Verify steps/s and tok/s *while decoding*, so idle seconds in a window do not read as slack.

    vLLM's inter-token latency is the time between a request's successive engine steps: its mean
    is the step time, and Δgeneration_tokens / ΔITL-sum is the decode rate of a stream. Without
    ITL observations, fall back to plain window rates (diluted by idle time).
    """
    if rates is None:
        return None, None
    if rates.mean_step_s and rates.tokens_per_step:
        return 1.0 / rates.mean_step_s, rates.tokens_per_step / rates.mean_step_s
    return rates.steps_per_s or None, rates.server_tok_s or None


def _find_config(refs: tuple[str, ...]) -> tuple[str, str] | None:
    """The first of `refs` that resolves to a config.json without the network, and where it was found."""
    from mtpwatch.core.roofline.bytemodel import PRESET_DIR, ConfigError, resolve_config

    for ref in refs:
        if not ref:
            continue
        try:
            path = resolve_config(ref)
        except (ConfigError, ValueError, OSError):
            continue
        if path.parent == PRESET_DIR:
            where = f"bundled for {ref}"
        elif "models--" in str(path):
            where = f"HF cache ({ref})"
        else:
            where = f"served model path {path.parent}"
        return str(path), where
    return None


def _local_gpu() -> tuple[str | None, float | None]:
    """NVML's name and peak GB/s of the local GPU (table first, then NVML's clock × bus width)."""
    from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu

    try:
        from mtpwatch.core.roofline.nvml import local_gpu_reading

        reading = local_gpu_reading()
    except Exception:  # no NVML, no driver: the panel asks for --gpu instead
        return None, None
    name = reading.device_name
    if name:
        with contextlib.suppress(UnknownGpuError):
            gpu = lookup_gpu(name)
            return gpu.key, gpu.peak_gbps
    return name, reading.peak_gbps


async def _sim_info(base_url: str) -> dict[str, Any]:
    """The simulator's /sim/info, or {} for a real vLLM (404) or any failure."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=2.0) as http:
            response = await http.get(base_url.rstrip("/") + "/sim/info")
            if response.status_code == 200:
                data = response.json()
                return data if isinstance(data, dict) else {}
    except (httpx.HTTPError, ValueError):
        pass
    return {}


# -- repeated paired runs (the A/B view's measurement) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class MeasureSettings:
    """How the A/B view measures: runs per prompt and arm, warm-ups dropped, restart mode."""

    runs: int = 12
    """Runs per prompt and arm, warm-up included (the public Spark benchmark: 12, first dropped)."""
    warmup: int = 1
    """Runs per prompt dropped as warm-up."""
    restart: bool = False
    """One server at a time, started and stopped in A, B, A sessions by the bench engine."""
    prompts: tuple[Any, ...] = ()
    """`core.workloads.Prompt`s measured at startup in restart mode (empty: none)."""
    max_tokens: int | None = None
    """Output cap of measured console prompts; None = the console's --max-tokens."""


@dataclass(frozen=True, slots=True)
class MeasureUpdate:
    """What the screen should show after one bench event."""

    line: str = ""
    """The live speed-up line (markup); empty = unchanged."""
    progress: str = ""
    """Progress in words: run i/N, which server is up."""
    arm: int | None = None
    """Panel index `run_line` belongs to."""
    run_line: str = ""
    """One finished run, for that panel's answer pane."""
    summary: str = ""
    """The final summary line (set on the last update)."""


def measure_line(report: Any, *, done: int = 0, total: int = 0, head: bool = True) -> str:
    """'speed-up B/A median 2.07× [95 % CI 1.98–2.15] · 11 pairs · CV A 3 % B 4 %' from a `BenchReport`.

    The CV of each arm is the noisiest prompt's run-to-run CV (pooled over prompts when a prompt
    has a single run); above `stats.CV_FLAG` (10 %) it is flagged.
    """
    from mtpwatch.core.ab import stats
    from mtpwatch.core.ab.bench import CONTENDED

    overall = report.primary.overall
    s = overall.speedup
    lead = "speed-up B/A [dim](decode tok/s, client, paired runs)[/]" if head else "speed-up B/A"
    if s is None:
        text = f"{lead} — waiting for the first pair"
    else:
        ci = s.ci
        text = (
            f"{lead} median [b]{s.median:.2f}×[/] \\[95 % CI {ci.low:.2f}–{ci.high:.2f}] · {s.n_pairs} pairs"
        )
    cvs: list[str] = []
    noisy = False
    for name in ("a", "b"):
        arm = overall.arms.get(name)
        if arm is None or arm.rate is None:
            continue
        cv = arm.max_prompt_cv if arm.max_prompt_cv is not None else arm.rate.cv
        noisy = noisy or cv > stats.CV_FLAG
        cvs.append(f"{name.upper()} {100 * cv:.0f} %")
    if cvs:
        text += " · CV " + " ".join(cvs)
    if noisy:
        text += " · [$text-warning]noisy: CV above 10 %, numbers unreliable[/]"
    if total:
        text += f" · [dim]run {done}/{total}[/]"
    if report.contended:
        text += f" · [$text-warning]race: {CONTENDED}[/]"
    if report.interrupted:
        text += f" · [$text-warning]{_esc(report.interrupted)}[/]"
    return text


class FeedArm:
    """A bench `ManagedArm` over a `ServerFeed` (restart mode): the feed launches the server, so its
    panel shows the startup log and phases; while up the screen polls it; stop frees the GPU."""

    def __init__(
        self,
        feed: ServerFeed,
        progress: Callable[[str, list[str]], None],
        on_up: Callable[[bool], None],
    ) -> None:
        from mtpwatch.core.ab.bench import HttpArm

        self.feed = feed
        self.label = feed.spec.label
        self._progress = progress
        self._on_up = on_up
        self._http = HttpArm(
            feed.spec.url, label=feed.spec.label, model=feed.spec.model, api_key=feed.spec.api_key,
            chat=feed.display.chat,
        )  # fmt: skip

    async def start(self) -> None:
        """Launch the server through the feed; raises `StartupError` when it does not come up."""
        from mtpwatch.core.launch.process import StartupError

        self.feed.status = "starting"
        if not await self.feed.launch(self._progress):
            raise StartupError(f"{self.label}: {self.feed.reason}", None, [])
        self._on_up(True)

    async def stop(self) -> None:
        """Stop the server (idempotent); the panel says 'stopped'."""
        self._on_up(False)
        await self.feed.stop_server()

    async def generate(self, request: Any) -> Any:
        """One request through `HttpArm` (client numbers, token ids)."""
        self._http.model = self._http.model or self.feed.model
        return await self._http.generate(request)

    async def counters(self) -> Any:
        """The spec-decode counters of the server."""
        self._http.model = self._http.model or self.feed.model
        return await self._http.counters()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()


class Measurement:
    """Repeated paired runs of prompts on the two feeds through `core.bench.BenchRunner`.

    Alternate (ABBA, never concurrent), race (both at once: contended, not a measurement) or
    restart (`arms` are `FeedArm`s the engine starts and stops). `updates()` turns bench events
    into `MeasureUpdate`s; cancelling it keeps what was measured (`final()`).
    """

    def __init__(
        self,
        feeds: list[ServerFeed],
        prompts: list[Any],
        settings: MeasureSettings,
        schedule: str,
        *,
        arms: tuple[Any, Any] | None = None,
        max_tokens: int | None = None,
    ) -> None:
        """Raises `BenchConfigError` (one line) for runs/warm-up that measure nothing."""
        from mtpwatch.core.ab.bench import BenchConfig, BenchRunner

        self.feeds = feeds
        self.schedule = "restart" if settings.restart else schedule
        self._owned: list[Any] = []
        if arms is None:
            arms = (self._http_arm(feeds[0]), self._http_arm(feeds[1]))
        self.arms = arms
        config = BenchConfig(
            prompts=prompts,
            runs=settings.runs,
            warmup=settings.warmup,
            schedule=self.schedule,  # type: ignore[arg-type]
            temperature=feeds[0].display.temperature,
        )
        self.runner = BenchRunner(config, arms[0], arms[1])
        self.total = self.runner.total
        self.report: Any = None

    def _http_arm(self, feed: ServerFeed) -> Any:
        from mtpwatch.core.ab.bench import HttpArm

        arm = HttpArm(
            feed.spec.url, label=feed.spec.label, model=feed.model or feed.spec.model,
            api_key=feed.spec.api_key, chat=feed.display.chat,
        )  # fmt: skip
        self._owned.append(arm)
        return arm

    async def updates(self) -> Any:
        """Async iterator of `MeasureUpdate`s; the last one carries the summary."""
        from mtpwatch.core.ab.bench import BenchFinished, PairFinished, RunFinished, StatusChanged

        runs_per_prompt = self.runner.config.runs
        async for event in self.runner.events():
            if isinstance(event, StatusChanged):
                yield MeasureUpdate(progress=_esc(event.message))
            elif isinstance(event, RunFinished):
                rec = event.record
                tag = "warm-up" if rec.warmup else f"run {rec.run + 1}/{runs_per_prompt}"
                if rec.error:
                    body = f"[$text-error]{_esc(rec.error)}[/]"
                else:
                    acc = (
                        f" · accept {100 * rec.acceptance_rate:.0f} %"
                        if rec.acceptance_rate is not None
                        else ""
                    )
                    body = f"{rec.tokens} tok · decode [b]{_fmt(rec.decode_tok_s)}[/] tok/s{acc}"
                yield MeasureUpdate(
                    progress=f"measuring: run {event.done}/{event.total} · {_esc(rec.prompt)}",
                    arm=0 if rec.arm == "a" else 1,
                    run_line=f"{tag} · {body}" + (" · [dim]contended[/]" if rec.contended else ""),
                )
            elif isinstance(event, PairFinished):
                report = self.runner.partial_report()
                yield MeasureUpdate(line=measure_line(report, done=event.done, total=event.total))
            elif isinstance(event, BenchFinished):
                self.report = event.report
                yield self._final_update(event.report)
        await self.aclose()

    def final(self, interrupted: str = "cancelled: partial measurement") -> MeasureUpdate:
        """The summary of what was measured so far (after a cancel or a failure)."""
        report = self.report or self.runner.partial_report(interrupted=interrupted)
        self.report = report
        return self._final_update(report)

    def _final_update(self, report: Any) -> MeasureUpdate:
        line = measure_line(report)
        what = "race" if report.contended else self.schedule
        prompts = len(report.config.prompts)
        summary = (
            f"measured ({what}, {prompts} prompt(s) × {report.config.runs} runs/arm, "
            f"{report.config.warmup} warm-up dropped): " + measure_line(report, head=False)
        )
        return MeasureUpdate(line=line, progress="measurement finished", summary=summary)

    async def aclose(self) -> None:
        """Close the HTTP clients this measurement opened."""
        for arm in self._owned:
            with contextlib.suppress(Exception):
                await arm.aclose()
        for arm in self.arms:
            if isinstance(arm, FeedArm):
                with contextlib.suppress(Exception):
                    await arm.aclose()


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def measurement_prompt(text: str, max_tokens: int) -> Any:
    """A console prompt as a bench `Prompt`."""
    from mtpwatch.core.ab.workloads import Prompt

    return Prompt(id=text[:40], text=text, category="console", max_tokens=max_tokens)


def prompt_set(spec: str, limit: int | None, max_tokens: int | None) -> list[Any]:
    """`core.workloads.resolve` (built-in set name or JSONL path); raises `ValueError` with one line."""
    from mtpwatch.core.ab.workloads import resolve

    return list(resolve(spec, limit=limit, max_tokens=max_tokens))
