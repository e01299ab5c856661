"""What one frame shows: frozen view models and the pure functions that turn them into text.

The live feed (`mtpwatch.ui.live`) builds these from `mtpwatch.core`; snapshot tests and
`mtpwatch screenshots` build them directly, so every panel can be drawn without a server.
Nothing here imports Textual widgets: the render functions return markup strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from textual.markup import escape

Status = Literal["starting", "connecting", "up", "down", "failed", "stopped"]

WINDOWS: tuple[str, ...] = ("10 s", "60 s", "prompt")
"""Acceptance windows the `w` key cycles through."""


@dataclass(frozen=True, slots=True)
class BandwidthView:
    """The roofline panel's numbers; every field None when unknown."""

    effective_gbps: float | None = None
    """Analytic bytes per verify step × steps/s, in GB/s."""
    peak_gbps: float | None = None
    """Peak memory bandwidth of the GPU (table or --peak-gbps)."""
    percent_of_peak: float | None = None
    """effective / peak × 100."""
    ceiling_baseline_tok_s: float | None = None
    """Bandwidth-bound tok/s without speculation (one token per weight pass)."""
    ceiling_spec_tok_s: float | None = None
    """Bandwidth-bound tok/s with the measured mean acceptance length."""
    binding: str = ""
    """Which term of the step's bytes dominates, in words."""
    gpu: str | None = None
    """GPU name the peak came from."""
    hardware: str | None = None
    """A hardware reading (NVML GPM DRAM bandwidth) when the GPU is local; None otherwise."""
    note: str = ""
    """Why a number is missing (e.g. how to give a model config)."""


@dataclass(frozen=True, slots=True)
class ServerView:
    """Everything one server panel draws in one frame. Safe to drop all but the newest."""

    label: str
    """Panel name: 'A', 'MTP on', ..."""
    url: str
    """Base URL of the server."""
    status: Status = "connecting"
    """What the poller last saw."""
    status_detail: str = ""
    """One line: 'disconnected since 12:00:01 (connection refused), retrying in 2.0 s'."""
    model: str | None = None
    """The model_name being watched."""
    models: tuple[str, ...] = ()
    """All models the server lists (shown when there are several)."""
    version: str | None = None
    """vLLM version from /version."""
    speculative: bool | None = None
    """False when the spec-decode counters are absent ("speculation off")."""
    k: int | None = None
    """num_speculative_tokens (number of `position` labels)."""
    facts: tuple[str, ...] = ()
    """Facts read from the server log (weights GiB, 'Detected MTP model', KV cache size)."""
    window: str = "10 s"
    """Window of the acceptance and rate numbers below."""
    scope: str = "engine-wide"
    """'this request' when only the console's prompt ran in the window, else 'engine-wide'."""
    acceptance_rate: float | None = None
    """Δaccepted / Δdraft_tokens over `window`."""
    mean_acceptance_length: float | None = None
    """1 + Δaccepted / Δdrafts over `window`."""
    per_position: tuple[float, ...] = ()
    """Marginal per-position acceptance Δper_pos[i] / Δdrafts."""
    per_position_conditional: tuple[float | None, ...] = ()
    """Conditional per-position acceptance Δper_pos[i] / Δper_pos[i-1]."""
    server_tok_s: float | None = None
    """Δgeneration_tokens / Δt over `window` (server-side, all requests)."""
    steps_per_s: float | None = None
    """Engine verify steps per second over `window`."""
    mean_step_s: float | None = None
    """ITL Δsum/Δcount: per engine step, not per token under speculation."""
    mean_ttft_s: float | None = None
    """Server TTFT histogram Δsum/Δcount over `window`."""
    mean_tpot_s: float | None = None
    """Server TPOT histogram Δsum/Δcount over `window` (per token, finished requests)."""
    kv_cache_usage: float | None = None
    """KV-cache use, 0..1."""
    running: float | None = None
    """Requests running now."""
    waiting: float | None = None
    """Requests waiting now."""
    restarts: int = 0
    """Counter resets seen (server restarts)."""
    server_series: tuple[float, ...] = ()
    """Server tok/s, one point per second, oldest first."""
    client_series: tuple[float, ...] = ()
    """Client decode tok/s of the current prompt, one point per second."""
    bandwidth: BandwidthView = field(default_factory=BandwidthView)
    """The roofline panel."""


@dataclass(frozen=True, slots=True)
class PromptSummary:
    """One line per finished prompt per server."""

    tokens: int
    """Completion tokens."""
    ttft_s: float | None
    """Client time to first token."""
    decode_tok_s: float | None
    """(tokens − 1) / (t_last − t_first), client side."""
    acceptance_rate: float | None = None
    """Acceptance over the prompt's window."""
    mean_acceptance_length: float | None = None
    """Mean acceptance length over the prompt's window."""
    scope: str = "engine-wide"
    """'this request' or 'engine-wide'."""
    approximate: bool = False
    """True when the server gave no per-chunk usage (tokens counted from chunks)."""
    cancelled: bool = False
    """Stopped by the user."""
    error: str | None = None
    """One line when the request failed."""


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "—" if x is None else format(x, fmt)


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{1000 * x:.1f} ms"


STATUS_STYLE: dict[str, str] = {
    "up": "$success",
    "starting": "$warning",
    "connecting": "$warning",
    "down": "$error",
    "failed": "$error",
    "stopped": "$text-muted",
}


def render_header(view: ServerView, *, compact: bool = False) -> str:
    """Server, model, version, k and connection status: two lines (one when compact)."""
    style = STATUS_STYLE[view.status]
    status = f"[{style}]● {view.status}[/]"
    if view.status_detail:
        status += f" [{style}]{escape(view.status_detail)}[/]"
    model = escape(view.model or "model ?")
    if len(view.models) > 1:
        model += f" [dim](1 of {len(view.models)} served)[/]"
    if view.speculative is False:
        spec = "[$warning]speculation off[/]"
    elif view.k is not None:
        spec = f"k={view.k}"
    else:
        spec = "k ?"
    version = f"vLLM {escape(view.version)}" if view.version else "vLLM ?"
    restarts = f" · [$warning]{view.restarts} restart(s)[/]" if view.restarts else ""
    if compact:
        return f"{model} · {spec} · {status}{restarts}"
    line1 = f"{escape(view.url)}  {status}{restarts}"
    line2 = f"{model} · {version} · {spec}"
    if view.facts:
        line2 += " · [dim]" + escape(" · ".join(view.facts)) + "[/]"
    return f"{line1}\n{line2}"


def render_numbers(view: ServerView, *, compact: bool = False) -> str:
    """The key numbers, each with its source and window."""
    win = f"[dim]{view.window}, {view.scope}[/]"
    if view.speculative is False:
        acc = "acceptance [dim]— (no spec-decode counters: speculation off)[/]"
    else:
        acc = (
            f"acceptance [b]{_pct(view.acceptance_rate)}[/]  "
            f"mean length [b]{_num(view.mean_acceptance_length, '.2f')}[/]  {win}"
        )
    srv = f"server tok/s [b]{_num(view.server_tok_s)}[/] [dim]({view.window}, engine)[/]"
    lat = (
        f"TTFT {_ms(view.mean_ttft_s)} · TPOT {_ms(view.mean_tpot_s)}/token · "
        f"ITL {_ms(view.mean_step_s)}/step [dim](server, {view.window})[/]"
    )
    kv = (
        f"KV cache {_pct(view.kv_cache_usage)} · running {_num(view.running, '.0f')} · "
        f"waiting {_num(view.waiting, '.0f')} [dim](server, now)[/]"
    )
    if compact:
        if view.speculative is False:
            acc = "acceptance — [dim](speculation off)[/]"
        else:
            acc = (
                f"accept [b]{_pct(view.acceptance_rate)}[/] "
                f"len [b]{_num(view.mean_acceptance_length, '.2f')}[/] "
                f"{win}"
            )
        line2 = (
            f"server [b]{_num(view.server_tok_s)}[/] tok/s · ITL {_ms(view.mean_step_s)}/step · "
            f"KV {_pct(view.kv_cache_usage)} · "
            f"run {_num(view.running, '.0f')} wait {_num(view.waiting, '.0f')}"
        )
        return f"{acc}\n{line2}"
    return "\n".join([acc, srv, lat, kv])


def render_bars(
    marginal: Sequence[float], conditional: Sequence[float | None], *, width: int = 20, window: str = ""
) -> str:
    """One bar per draft position: `pos 1 ██████▌     62%  cond 62%` (marginal bar, conditional beside)."""
    if not marginal:
        return "per-position acceptance [dim]— (no drafts yet)[/]"
    eighths = " ▏▎▍▌▋▊▉█"
    lines = [f"per-position acceptance [dim]marginal (bar) · conditional · {window}[/]"]
    for i, value in enumerate(marginal):
        v = min(max(value, 0.0), 1.0)
        full, rem = divmod(round(v * width * 8), 8)
        bar = "█" * full + (eighths[rem] if rem else "")
        cond = conditional[i] if i < len(conditional) else None
        lines.append(f"pos {i + 1} [$accent]{bar:<{width}}[/] {_pct(value):>4}  cond {_pct(cond):>4}")
    return "\n".join(lines)


def render_bandwidth(bw: BandwidthView, window: str = "") -> str:
    """Roofline panel: effective GB/s (analytic), % of peak, ceilings, binding term, hardware reading."""
    if bw.effective_gbps is None and bw.peak_gbps is None:
        return "bandwidth [dim]— " + escape(bw.note or "no model config known") + "[/]"
    gpu = escape(bw.gpu or "GPU ?")
    eff = _num(bw.effective_gbps, ".0f")
    peak = _num(bw.peak_gbps, ".0f")
    pct = "—" if bw.percent_of_peak is None else f"{bw.percent_of_peak:.0f}%"
    lines = [
        f"bandwidth [b]{eff} GB/s[/] of {peak} GB/s peak ({gpu}) = [b]{pct}[/] "
        f"[dim](analytic, {window or 'now'})[/]",
        f"ceiling tok/s: baseline {_num(bw.ceiling_baseline_tok_s, '.0f')} · "
        f"spec {_num(bw.ceiling_spec_tok_s, '.0f')}",
    ]
    if bw.binding:
        lines.append(f"[dim]bound by {escape(bw.binding)}[/]")
    lines.append(f"hardware: {escape(bw.hardware)}" if bw.hardware else "[dim]hardware: analytic only[/]")
    if bw.note:
        lines.append(f"[dim]{escape(bw.note)}[/]")
    return "\n".join(lines)


def render_summary(n: int, s: PromptSummary) -> str:
    """One line per finished prompt: tokens, TTFT, decode tok/s, acceptance and its scope."""
    if s.error:
        return f"#{n} [$error]{escape(s.error)}[/]"
    approx = "≈" if s.approximate else ""
    acc = ""
    if s.acceptance_rate is not None or s.mean_acceptance_length is not None:
        acc = (
            f" · accept {_pct(s.acceptance_rate)} len {_num(s.mean_acceptance_length, '.2f')} "
            f"[dim]({s.scope})[/]"
        )
    ttft = _ms(s.ttft_s)
    tail = " · [$warning]cancelled[/]" if s.cancelled else ""
    return (
        f"#{n} {approx}{s.tokens} tok · TTFT {ttft} · decode [b]{_num(s.decode_tok_s)}[/] tok/s "
        f"[dim](client)[/]{acc}{tail}"
    )


def render_speedup(last: float | None, median: float | None, n: int, *, race: bool) -> str:
    """The line between A/B panes: B over A decode tok/s."""
    if last is None:
        text = "speed-up B/A (decode tok/s, client): — send a prompt"
    else:
        text = (
            f"speed-up B/A (decode tok/s, client): last [b]{last:.2f}×[/] · "
            f"median {_num(median, '.2f')}× over {n}"
        )
    if race:
        text += "  [$warning]race: contended — not a measurement[/]"
    return text
