"""Deterministic sample states for snapshot tests and `mtpwatch screenshots` (no server, no clock).

The numbers are shaped like the simulator's Gemma 4 E4B on GB10 preset (MTP k=4 vs no speculation),
so screenshots look like a real session; they are fixed, so SVGs do not change from run to run.
"""

from __future__ import annotations

import math

from textual.app import App

from mtpwatch.config import AppConfig, LaunchSpec, ServerSpec
from mtpwatch.ui.view import BandwidthView, PromptSummary, ServerView
from mtpwatch.ui.widgets.server_panel import ServerPanel

URL_A = "http://127.0.0.1:8001"
URL_B = "http://127.0.0.1:8002"
MODEL = "google/gemma-4-E4B-it"
PROMPT = "Explain how speculative decoding with an MTP drafter speeds up generation."
ANSWER = (
    "Speculative decoding lets a small drafter propose several tokens ahead, and the target model "
    "verifies them all in one forward pass. Each pass streams the weights from memory once, so when "
    "most drafts are accepted the target produces several tokens for the price of one step.\n\n"
    "With multi-token prediction the drafter is a light head that reuses the target's hidden state, "
    "which keeps its cost low and its guesses well aligned with the target."
)


def _wave(n: int, base: float, amp: float, phase: float = 0.0) -> tuple[float, ...]:
    return tuple(round(base + amp * math.sin(i / 4 + phase), 1) for i in range(n))


def config(mode: str = "single") -> AppConfig:
    """An AppConfig for the sample views (never started: autostart off)."""
    if mode == "ab":
        servers = [
            ServerSpec(label="A · MTP off", url=URL_A, model=MODEL),
            ServerSpec(label="B · MTP on", url=URL_B, model=MODEL),
        ]
        return AppConfig(servers=servers, mode="ab", title="mtpwatch demo (gemma4-e4b-gb10, simulated)")
    if mode == "start":
        launch = LaunchSpec(argv=("vllm", "serve", MODEL), kind="vllm")
        return AppConfig(servers=[ServerSpec(label="MTP on", url=URL_B, launch=launch)], title="mtpwatch")
    return AppConfig(servers=[ServerSpec(label="MTP on", url=URL_B, model=MODEL)], title="mtpwatch")


def view_mtp() -> ServerView:
    """A server with MTP k=4, mid-generation."""
    return ServerView(
        label="B · MTP on",
        url=URL_B,
        status="up",
        model=MODEL,
        models=(MODEL,),
        version="0.32.0",
        speculative=True,
        k=4,
        facts=("weights 15.0 GiB", "Detected MTP model", "KV cache 86.4 GiB"),
        window="10 s",
        scope="engine-wide",
        acceptance_rate=0.62,
        mean_acceptance_length=3.48,
        per_position=(0.84, 0.66, 0.54, 0.44),
        per_position_conditional=(0.84, 0.79, 0.82, 0.81),
        server_tok_s=71.3,
        steps_per_s=20.5,
        mean_step_s=0.0488,
        mean_ttft_s=0.0412,
        mean_tpot_s=0.0141,
        kv_cache_usage=0.012,
        running=1,
        waiting=0,
        server_series=_wave(60, 68, 9),
        client_series=_wave(30, 72, 6, 1.0),
        bandwidth=BandwidthView(
            effective_gbps=205.0,
            peak_gbps=273.0,
            percent_of_peak=75.1,
            ceiling_baseline_tok_s=27.3,
            ceiling_spec_tok_s=95.0,
            binding="target weights (86 % of bytes per step)",
            gpu="GB10",
            note="",
        ),
    )


def view_baseline() -> ServerView:
    """The same model without speculation."""
    return ServerView(
        label="A · MTP off",
        url=URL_A,
        status="up",
        model=MODEL,
        models=(MODEL,),
        version="0.32.0",
        speculative=False,
        facts=("weights 15.0 GiB", "KV cache 86.4 GiB"),
        window="10 s",
        server_tok_s=24.1,
        steps_per_s=24.1,
        mean_step_s=0.0415,
        mean_ttft_s=0.0398,
        mean_tpot_s=0.0415,
        kv_cache_usage=0.011,
        running=0,
        waiting=0,
        server_series=_wave(60, 24, 1.5),
        client_series=_wave(30, 24.5, 0.8, 0.5),
        bandwidth=BandwidthView(
            effective_gbps=232.0,
            peak_gbps=273.0,
            percent_of_peak=85.0,
            ceiling_baseline_tok_s=27.3,
            ceiling_spec_tok_s=None,
            binding="target weights (94 % of bytes per step)",
            gpu="GB10",
        ),
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
        speculative=True,
        k=4,
    )


SUMMARY_MTP = PromptSummary(
    tokens=256,
    ttft_s=0.043,
    decode_tok_s=72.4,
    acceptance_rate=0.63,
    mean_acceptance_length=3.52,
    scope="this request",
)
SUMMARY_BASE = PromptSummary(tokens=256, ttft_s=0.041, decode_tok_s=24.3, scope="this request")

STARTUP_LINES = [
    "INFO 05-04 14:00:01 [api_server.py:1600] vLLM API server version 0.32.0",
    f"INFO 05-04 14:00:03 [core.py:75] Initializing a V1 LLM engine (v0.32.0) with config: model='{MODEL}'",
    "INFO 05-04 14:00:04 [gpu_model_runner.py:2100] Starting to load model google/gemma-4-E4B-it...",
    "INFO 05-04 14:00:05 [gemma4_mtp.py:88] Detected MTP model: using 4 speculative tokens",
    "INFO 05-04 14:00:19 [default_loader.py:291] Loading weights took 13.62 seconds",
    "INFO 05-04 14:00:20 [gpu_model_runner.py:2159] Model loading took 15.0 GiB and 14.9 seconds",
    "INFO 05-04 14:00:31 [backends.py:548] Compiling a graph for dynamic shape takes 9.82 s",
]


async def load(app: App[int], kind: str) -> None:
    """Inject the sample state of `kind` ('single', 'ab', 'down', 'start') into a non-started app."""
    panels = list(app.screen.query(ServerPanel))
    if kind == "start":
        panels[0].show_startup(
            "[b]compiling / warm-up[/] · 31.4 s since start\n"
            "[dim]weights 15.0 GiB · Detected MTP model · spec mtp k=4[/]",
            STARTUP_LINES,
        )
        return
    pairs: list[tuple[ServerPanel, ServerView, PromptSummary | None]]
    if kind == "ab":
        pairs = [(panels[0], view_baseline(), SUMMARY_BASE), (panels[1], view_mtp(), SUMMARY_MTP)]
    elif kind == "down":
        pairs = [(panels[0], view_down(), None)]
    else:
        pairs = [(panels[0], view_mtp(), SUMMARY_MTP)]
    for panel, view, summary in pairs:
        panel.show(view)
        if summary is not None:
            panel.begin_answer(PROMPT)
            panel.stream.feed(ANSWER)
            panel.add_summary(summary)
        await panel.settle()
    if kind == "ab":
        from mtpwatch.ui.screens.monitor import MonitorScreen

        screen = app.screen
        assert isinstance(screen, MonitorScreen)
        screen.speedups = [2.91, 2.98]
        from textual.widgets import Static

        from mtpwatch.ui.view import render_speedup

        screen.query_one("#speedup", Static).update(render_speedup(2.98, 2.95, 2, race=False))
        screen.query_one("#lossless", Static).update(
            "[$success]lossless: outputs identical[/] (256 token ids, temperature 0)"
        )
