"""Deterministic sample states for the snapshot tests (no server, no clock).

Every figure is derived from the default simulator preset (`mtpwatch.sim.presets`): model, k,
GPU, peak bandwidth, weights, the acceptance profile and the published tok/s the preset
reproduces; the roofline panel goes through the same code as the live app (`BandwidthModel`
→ `core.roofline.compute_roofline`). So the snapshots agree with what `mtpwatch demo` shows, and
stay fixed from run to run. `mtpwatch screenshots` does not use these: it films the simulator.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import replace
from functools import cache

from textual.app import App

from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, ServerSpec
from mtpwatch.core.metrics.rates import Rates
from mtpwatch.session.diagnosis import make_verdict
from mtpwatch.session.launching import StartupProgress
from mtpwatch.session.observers import Observers
from mtpwatch.session.sources import SourceState
from mtpwatch.session.views import Answer, BandwidthView, PromptSummary, ServerView
from mtpwatch.sim.presets import DEFAULT_PRESET, Preset, get_preset
from mtpwatch.ui.widgets.server_panel import ServerPanel

URL_A = "http://127.0.0.1:8001"
URL_B = "http://127.0.0.1:8002"
PROMPT = "Explain how speculative decoding with an MTP drafter speeds up generation."
ANSWER = (
    "Speculative decoding lets a small drafter propose several tokens ahead, and the target model "
    "verifies them all in one forward pass. Each pass streams the weights from memory once, so when "
    "most drafts are accepted the target produces several tokens for the price of one step.\n\n"
    "With multi-token prediction the drafter is a light head that reuses the target's hidden state, "
    "which keeps its cost low and its guesses well aligned with the target."
)
TOKENS = 256
FIRST_PROMPT = "Write a haiku about GPUs"
"""The prompt sent before `PROMPT`: the panes show the newest prompt's summary line (#2), not #1."""
FIRST_ANSWER = "Fans hum in the dark\nten thousand cores wake at once\nthe answer arrives\n"
FIRST_TOKENS = 19
CONTEXT = 20 + TOKENS
"""Prompt + generated tokens of the sample prompt (KV context of the roofline)."""


def preset() -> Preset:
    """The preset the samples (and `mtpwatch demo`) use."""
    return get_preset(DEFAULT_PRESET)


MODEL = preset().model


def _marginal(p: Preset) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(marginal, conditional) per-position acceptance of the preset's profile."""
    cond = p.conditional_acceptance()
    marginal = tuple(math.prod(cond[: i + 1]) for i in range(len(cond)))
    return marginal, cond


def _wave(n: int, base: float, amp: float, phase: float = 0.0) -> tuple[float, ...]:
    return tuple(round(base + amp * math.sin(i / 4 + phase), 1) for i in range(n))


def config(mode: str = "single") -> AppConfig:
    """An AppConfig for the sample views (never started: autostart off)."""
    p = preset()
    title = f"mtpwatch demo ({p.name}, simulated)"
    if mode == "ab":
        servers = [
            ServerSpec(label="A · MTP off", url=URL_A, model=MODEL),
            ServerSpec(label="B · MTP on", url=URL_B, model=MODEL),
        ]
        return AppConfig(servers=servers, mode="ab", title=title)
    if mode == "start":
        launch = LaunchSpec(argv=("vllm", "serve", MODEL), kind="vllm")
        return AppConfig(servers=[ServerSpec(label="MTP on", url=URL_B, launch=launch)], title="mtpwatch")
    return AppConfig(servers=[ServerSpec(label="MTP on", url=URL_B, model=MODEL)], title=title)


@cache
def _bandwidth(spec: bool) -> BandwidthView:
    """The roofline panel of the preset at its published tok/s, through the live app's code."""
    from mtpwatch.core.roofline.modelconfig import ModelSpec
    from mtpwatch.session.bandwidth_inputs import BandwidthModel
    from mtpwatch.session.views import describe_hardware

    p = preset()
    model = BandwidthModel(DisplaySettings())
    model.spec = ModelSpec.from_config(p.model_config)
    model.drafter = ModelSpec.from_config(p.drafter) if spec and p.drafter else None
    model.gpu = f"{p.gpu} (simulated)"
    model.peak_gbps = p.peak_gbps
    k = p.k if spec else 0
    marginal, _ = _marginal(p)
    tau = 1.0 + sum(marginal) if spec else 1.0
    tok_s = p.targets["mtp" if spec else "baseline"]
    rates = Rates(
        window_label="10 s",
        dt_s=10.0,
        mean_acceptance_length=tau if spec else None,
        server_tok_s=tok_s,
        steps_per_s=tok_s / tau,
    )
    hardware = describe_hardware(None, local=True, simulated=True)
    return model.view(rates, k, None, CONTEXT, hardware=hardware)


def _facts(p: Preset, spec: bool) -> tuple[str, ...]:
    facts = [f"weights {p.weights_gib:.1f} GiB"]
    if spec:
        facts += ["Detected MTP model", f"spec {p.method} k={p.k}"]
    return (*facts, f"KV cache {p.kv_cache_tokens:,} tokens")


def view_mtp() -> ServerView:
    """The preset's MTP server after one prompt, 10 s window."""
    p = preset()
    marginal, cond = _marginal(p)
    tau = 1.0 + sum(marginal)
    tok_s = p.targets["mtp"]
    bandwidth = _bandwidth(True)
    drafts = round(10 * tok_s / tau)
    acceptance = sum(marginal) / p.k
    verdict, level = make_verdict(
        method="mtp",
        speculative=True,
        acceptance_rate=acceptance,
        mean_acceptance_length=tau,
        drafts=drafts,
        bandwidth=bandwidth,
        window="10 s",
        k=p.k,
        per_position=marginal,
    )
    return ServerView(
        label="B · MTP on",
        url=URL_B,
        status="up",
        model=MODEL,
        models=(MODEL,),
        version="0.32.0",
        method="mtp",
        speculative=True,
        k=p.k,
        facts=_facts(p, True),
        window="10 s",
        scope="this request",
        acceptance_rate=acceptance,
        mean_acceptance_length=tau,
        per_position=marginal,
        per_position_conditional=cond,
        server_tok_s=tok_s,
        steps_per_s=tok_s / tau,
        mean_step_s=tau / tok_s,
        mean_ttft_s=0.0412,
        mean_tpot_s=1 / tok_s,
        kv_cache_usage=0.0,
        running=0,
        waiting=0,
        server_series=_wave(60, tok_s, tok_s / 10),
        client_series=_wave(30, tok_s * 1.02, tok_s / 12, 1.0),
        drafts=drafts,
        bandwidth=bandwidth,
        verdict=verdict,
        verdict_level=level,
    )


def view_baseline() -> ServerView:
    """The same model without speculation."""
    p = preset()
    tok_s = p.targets["baseline"]
    verdict, level = make_verdict(
        speculative=False,
        acceptance_rate=None,
        mean_acceptance_length=None,
        drafts=None,
        bandwidth=_bandwidth(False),
        window="10 s",
    )
    return ServerView(
        label="A · MTP off",
        url=URL_A,
        status="up",
        model=MODEL,
        models=(MODEL,),
        version="0.32.0",
        speculative=False,
        facts=_facts(p, False),
        window="10 s",
        scope="this request",
        server_tok_s=tok_s,
        steps_per_s=tok_s,
        mean_step_s=1 / tok_s,
        mean_ttft_s=0.0398,
        mean_tpot_s=1 / tok_s,
        kv_cache_usage=0.0,
        running=0,
        waiting=0,
        server_series=_wave(60, tok_s, 1.0),
        client_series=_wave(30, tok_s * 1.01, 0.5, 0.5),
        bandwidth=_bandwidth(False),
        verdict=verdict,
        verdict_level=level,
    )


def view_down() -> ServerView:
    """A server that went away mid-session."""
    return ServerView(
        label="MTP on",
        url=URL_B,
        status="down",
        status_detail="disconnected since 14:03:07 (connection refused), retrying in 4.0 s",
        model=MODEL,
        version="0.32.0",
        method="mtp",
        speculative=True,
        k=preset().k,
    )


def summary(spec: bool) -> PromptSummary:
    """The prompt summary line of each arm, at the preset's published tok/s."""
    p = preset()
    if not spec:
        return PromptSummary(
            tokens=TOKENS, ttft_s=0.041, decode_tok_s=p.targets["baseline"], scope="this request"
        )
    marginal, _ = _marginal(p)
    return PromptSummary(
        tokens=TOKENS,
        ttft_s=0.043,
        decode_tok_s=p.targets["mtp"],
        acceptance_rate=sum(marginal) / p.k,
        mean_acceptance_length=1.0 + sum(marginal),
        scope="this request",
    )


def first_summary(spec: bool) -> PromptSummary:
    """The summary line of the first (short) prompt: lower decode tok/s, as a short answer has."""
    later = summary(spec)
    assert later.decode_tok_s is not None
    return replace(later, tokens=FIRST_TOKENS, ttft_s=0.047, decode_tok_s=round(0.8 * later.decode_tok_s, 1))


class StillSource:
    """A source that shows one view and nothing else: what the A/B line reads of an arm (which arm
    speculates, its model) in a test that injects the panels' states (`load`). It takes no prompt
    and starts no server."""

    def __init__(self, view: ServerView) -> None:
        self.shown = view
        self.observers = Observers()
        spec = ServerSpec(label=view.label, url=view.url, model=view.model)
        self._state = SourceState(
            spec=spec, display=DisplaySettings(), status=view.status, reason="", model=view.model,
            version=view.version, spec_method=view.method, drafter_ref=None, launch_facts=None,
            engine_info=None, prompt_rates=None,
        )  # fmt: skip

    def state(self) -> SourceState:
        return self._state

    async def launch(self, progress: StartupProgress) -> bool:
        return False

    async def poll(self) -> float:
        return 1.0

    async def rest(self, delay: float) -> None:
        return None

    def view(self, window: str) -> ServerView:
        return self.shown

    def sample_hardware(self, on: bool) -> None:
        return None

    async def generate(self, prompt: str, on_text: Callable[[str], None]) -> Answer:
        raise AssertionError("a still source takes no prompt")

    def cancelled_answer(self) -> Answer:
        raise AssertionError("a still source takes no prompt")

    async def close(self, *, server_only: bool = False) -> None:
        return None


def startup_lines() -> list[str]:
    """vLLM-like start-up log lines of the preset."""
    p = preset()
    return [
        "INFO 05-04 14:00:01 [api_server.py:1600] vLLM API server version 0.32.0",
        "INFO 05-04 14:00:03 [core.py:75] Initializing a V1 LLM engine (v0.32.0) with config: "
        f"model='{MODEL}'",
        f"INFO 05-04 14:00:04 [gpu_model_runner.py:2100] Starting to load model {MODEL}...",
        f"INFO 05-04 14:00:05 [gemma4_mtp.py:88] Detected MTP model: using {p.k} speculative tokens",
        "INFO 05-04 14:00:19 [default_loader.py:291] Loading weights took 13.62 seconds",
        "INFO 05-04 14:00:20 [gpu_model_runner.py:2159] "
        f"Model loading took {p.weights_gib} GiB and 14.9 seconds",
        "INFO 05-04 14:00:31 [backends.py:548] Compiling a graph for dynamic shape takes 9.82 s",
    ]


async def load(app: App[int], kind: str) -> None:
    """Inject the sample state of `kind` ('single', 'ab', 'down', 'start') into a non-started app."""
    panels = list(app.screen.query(ServerPanel))
    p = preset()
    if kind == "start":
        panels[0].show_startup(
            "[b]compiling / warm-up[/] · 31.4 s since start\n"
            f"[dim]weights {p.weights_gib:.1f} GiB · Detected MTP model · spec {p.method} k={p.k}[/]",
            startup_lines(),
        )
        return
    pairs: list[tuple[ServerPanel, ServerView, PromptSummary | None]]
    if kind == "ab":
        pairs = [(panels[0], view_baseline(), summary(False)), (panels[1], view_mtp(), summary(True))]
    elif kind == "down":
        pairs = [(panels[0], view_down(), None)]
    else:
        pairs = [(panels[0], view_mtp(), summary(True))]
    for panel, view, prompt_summary in pairs:
        panel.show(view)
        if prompt_summary is not None:
            # Two prompts: every layout must show the newest one's summary line (#2).
            panel.begin_answer(FIRST_PROMPT)
            panel.stream.feed(FIRST_ANSWER)
            panel.add_summary(first_summary(view.speculative is True))
            panel.begin_answer(PROMPT)
            panel.stream.feed(ANSWER)
            panel.add_summary(prompt_summary)
        await panel.settle()
    if kind == "ab":
        from textual.widgets import Static

        from mtpwatch.ui.markup.ab import speedup_groups
        from mtpwatch.ui.screens.monitor import MonitorScreen
        from mtpwatch.ui.widgets.packed_line import PackedLine

        screen = app.screen
        assert isinstance(screen, MonitorScreen)
        ratio = p.targets["mtp"] / p.targets["baseline"]
        first = first_summary(True).decode_tok_s or 0.0
        first /= first_summary(False).decode_tok_s or 1.0
        screen.ab.speedups.ratios[:] = [first, ratio]
        screen.query_one("#speedup", PackedLine).show(
            speedup_groups(
                ratio,
                statistics.median(screen.ab.speedups.ratios),
                2,
                race=False,
                label="B/A",
                compact=screen.has_class("-narrow"),  # as `MonitorScreen` draws it
            )
        )
        screen.query_one("#lossless", Static).update(
            f"[$text-success]lossless: outputs identical[/] ({TOKENS} token ids, temperature 0)"
        )
