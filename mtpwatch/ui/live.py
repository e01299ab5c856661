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
from mtpwatch.core.client import ServerError, VllmClient
from mtpwatch.core.generation import GenerationRequest, GenerationResult, GenerationStats, StreamEvent
from mtpwatch.core.logparse import LogWatcher
from mtpwatch.core.rates import Collector, Rates, delta_rates
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
    from mtpwatch.core.bench import first_difference

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
        self._last_scrape: tuple[Any, float] | None = None
        self._prompt_bounds: tuple[tuple[Any, float], tuple[Any, float], int] | None = None
        """(scrape before the prompt, scrape after its last token, restarts then) of the last prompt."""
        self._client_points: list[tuple[float, float]] = []
        self._gen_stats: GenerationStats | None = None
        self._cancelled_stats: GenerationStats | None = None
        self._bandwidth = _BandwidthModel(display)
        self._scrape_lock = asyncio.Lock()
        self._request_tokens: int | None = None
        """Prompt + generated tokens of the last console prompt (KV context when the engine says 0)."""
        self._sampler: Any = None
        self.hardware_wanted = False
        """Set by the screen: the roofline panel is visible, so a local GPU may be sampled."""

    # -- launching ----------------------------------------------------------------------------

    async def launch(self, progress: Callable[[str, list[str]], None]) -> bool:
        """Start the server of `spec.launch`, stream its log to `progress`, wait for /health.

        Returns False (status 'failed', reason set, last lines shown) when it dies or times out.
        """
        from mtpwatch.core.process import ServerProcess, StartupError

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
            self._last_scrape = (snapshot, now)
        if self.model is None and snapshot.model:
            self.model = snapshot.model
        if snapshot.models:
            self.models = tuple(snapshot.models)
        self.status, self.reason, self.down_since, self.retry_in = "up", "", None, None
        self._failures = 0
        self._sample_client(now)
        return self.display.scrape_interval_s

    async def _identify(self) -> None:
        with contextlib.suppress(ServerError, OSError, ValueError):
            models = await self.client.models()
            names = tuple(m.id for m in models)
            if names:
                self.models = names
                if self.model is None:
                    self.model = names[0]
        with contextlib.suppress(ServerError, OSError, ValueError):
            self.version = await self.client.version()
        await self._bandwidth.load(self.client.base_url)
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
            bounds = self._prompt_bounds
            if bounds is not None and bounds[2] == self.collector.restarts:
                # A finished prompt: from the scrape before it to the one after its last token.
                # (`Collector.since` always runs to the newest scrape, which dilutes it afterwards.)
                (before, t_before), (after, t_after), _ = bounds
                return delta_rates(before, after, t_after - t_before, "prompt")
            return self.collector.since(self.prompt_t0, now)
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
        k = snap.num_speculative_tokens if snap is not None and snap.speculative else 0
        bandwidth = self._bandwidth.view(r, k, snap, self._request_tokens, hardware=self._hardware_line())
        speculative = None if snap is None else snap.speculative
        # No drafts in a time window (idle since the prompt): judge the last prompt instead.
        judged, judged_window, judged_bw = r, window, bandwidth
        if (r is None or not r.drafts) and window != "prompt" and speculative:
            prompt_rates = self.rates("prompt", now)
            if prompt_rates is not None and prompt_rates.drafts:
                judged, judged_window = prompt_rates, "prompt"
                judged_bw = self._bandwidth.view(prompt_rates, k, snap, self._request_tokens)
        verdict, level = make_verdict(
            speculative=speculative,
            acceptance_rate=judged.acceptance_rate if judged else None,
            mean_acceptance_length=judged.mean_acceptance_length if judged else None,
            drafts=judged.drafts if judged else None,
            bandwidth=judged_bw,
            window=judged_window,
        )
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
            scope=self.scope(window),
            acceptance_rate=r.acceptance_rate if r else None,
            mean_acceptance_length=r.mean_acceptance_length if r else None,
            per_position=r.per_position if r else (),
            per_position_conditional=r.per_position_conditional if r else (),
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
        )

    # -- hardware -----------------------------------------------------------------------------

    @property
    def is_local(self) -> bool:
        """The server runs on this machine (loopback URL), so its GPU is the one NVML sees."""
        from urllib.parse import urlsplit

        host = (urlsplit(self.spec.url).hostname or "").lower()
        return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")

    def _hardware_line(self) -> str:
        """Start/stop the NVML sampler as the panel shows/hides it; the reading in words."""
        simulated = self._bandwidth.simulated
        if not self.identified:
            return ""
        if not (self.hardware_wanted and self.is_local and not simulated):
            self.stop_hardware()
            return describe_hardware(None, local=self.is_local, simulated=simulated)
        if self._sampler is None:
            from mtpwatch.core.nvml import Sampler

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
        )
        stats = GenerationStats(clock=self.clock)
        self._gen_stats = stats
        self._client_points = []
        self.prompt_t0 = self.clock()
        self.prompt_t1 = self.prompt_t_end = None
        self._prompt_bounds = None
        start_scrape = self._last_scrape
        restarts = self.collector.restarts
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
        end_scrape = self._last_scrape
        if start_scrape is not None and end_scrape is not None and end_scrape is not start_scrape:
            self._prompt_bounds = (start_scrape, end_scrape, restarts)
        return self._answer(result)

    def _answer(self, result: GenerationResult) -> Answer:
        if result.completion_tokens:
            self._request_tokens = (result.prompt_tokens or 0) + result.completion_tokens
        rates = None
        scope = "engine-wide"
        if self.prompt_t0 is not None:
            rates = self.rates("prompt")
            scope = str(self.collector.attribution(self.prompt_t0, self.prompt_t1).scope)
        summary = PromptSummary(
            tokens=result.completion_tokens,
            ttft_s=result.ttft_s,
            decode_tok_s=result.decode_tok_s,
            acceptance_rate=rates.acceptance_rate if rates else None,
            mean_acceptance_length=rates.mean_acceptance_length if rates else None,
            scope=scope,
            approximate=result.approximate,
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
        self._loaded = False

    async def load(self, base_url: str) -> None:
        """Resolve the model spec and the peak once (a failure becomes a one-line note)."""
        if self._loaded:
            return
        self._loaded = True
        from mtpwatch.core.bandwidth import ConfigError, ModelSpec
        from mtpwatch.core.gpus import UnknownGpuError, lookup_gpu

        info = await _sim_info(base_url)
        self.simulated = bool(info)
        config = self.display.model_config or info.get("model_config")
        try:
            if config:
                self.spec = ModelSpec.from_config(str(config))
            if info.get("drafter") and info.get("spec"):
                with contextlib.suppress(ConfigError, ValueError, OSError):
                    self.drafter = ModelSpec.from_config(str(info["drafter"]))
        except (ConfigError, ValueError, OSError) as exc:
            self.error = f"model config: {str(exc).splitlines()[0]}"
        if self.display.gpu is not None:
            with contextlib.suppress(UnknownGpuError):
                gpu = lookup_gpu(self.display.gpu)
                self.gpu = gpu.key
                self.peak_gbps = self.peak_gbps or gpu.peak_gbps
        elif info.get("gpu"):
            self.gpu = str(info["gpu"]) + " (simulated)"
            self.peak_gbps = self.peak_gbps or float(info.get("peak_gbps") or 0) or None

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
        from mtpwatch.core.roofline import compute_roofline

        tau = rates.mean_acceptance_length if rates is not None and k else None
        if tau is not None:
            tau = min(max(tau, 1.0), k + 1.0)
        context, source = self.context(snap, request_tokens)
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
                steps_per_s=(rates.steps_per_s or None) if rates is not None else None,
                tok_s=(rates.server_tok_s or None) if rates is not None else None,
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
        )


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
