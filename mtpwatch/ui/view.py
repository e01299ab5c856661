"""What one frame shows: frozen view models and the pure functions that turn them into text.

The live feed (`mtpwatch.ui.feed.ServerFeed`) builds these from `mtpwatch.core`; the snapshot
tests build them directly from fixed sample states, so every panel can be drawn without a server
(`mtpwatch screenshots` films the simulator through the feed instead). Nothing here imports
Textual widgets: the render functions return markup strings, and they alone escape text.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from textual.markup import escape

Status = Literal["starting", "connecting", "up", "down", "failed", "stopped"]

VerdictLevel = Literal["good", "info", "warn", "bad"]

WINDOWS: tuple[str, ...] = ("10 s", "60 s", "prompt")
"""Acceptance windows the `w` key cycles through."""


@dataclass(frozen=True, slots=True)
class BandwidthView:
    """The roofline panel (issue 5): analytic figures from `core.roofline`, plus a hardware reading.

    Every field is None / empty when unknown; `note` says why the panel is empty.
    """

    gpu: str | None = None
    """GPU name the peak came from ('GB10 (simulated)', 'H100 SXM', ...)."""
    peak_gbps: float | None = None
    """Peak memory bandwidth (table, --gpu, --peak-gbps or the simulator)."""
    effective_gbps: float | None = None
    """Analytic bytes per verify step × steps/s, in GB/s."""
    percent_of_peak: float | None = None
    """effective / peak × 100."""
    k: int = 0
    """Speculative tokens per step (0: plain decoding)."""
    tau: float | None = None
    """Mean acceptance length used for the speculative ceiling."""
    tau_source: str = ""
    """'measured' or 'assumed: every draft accepted (upper bound)'."""
    ceiling_baseline_tok_s: float | None = None
    """Bandwidth-bound tok/s without speculation (one token per weight pass)."""
    ceiling_spec_tok_s: float | None = None
    """Bandwidth-bound tok/s with speculation at `tau` tokens per step."""
    tok_s: float | None = None
    """Server tok/s in the window (what the ceiling is compared with)."""
    pct_of_ceiling: float | None = None
    """tok_s as % of the ceiling that applies (spec when k > 0)."""
    acceptance_term: float | None = None
    """Rule-of-thumb term A = 1 + α·k = τ."""
    bandwidth_term: float | None = None
    """Term B = spec ceiling / baseline ceiling (drafter and MoE union priced in)."""
    compute_term: float | None = None
    """Term C (None when the GPU's FLOP rate is unknown)."""
    binding: str = ""
    """'acceptance', 'bandwidth' or 'compute': the smallest term."""
    summary: str = ""
    """`Roofline.summary`: the state in one sentence."""
    context_tokens: int | None = None
    """Tokens of context the KV-cache reads were priced at."""
    context_source: str = ""
    """Where `context_tokens` came from, in words."""
    hardware: str = ""
    """The hardware reading line: GPM DRAM GB/s and %, memory busy %, or why there is none."""
    note: str = ""
    """Why the panel is empty (e.g. how to give a model config)."""
    config_source: str = ""
    """Where the model config (and drafter, peak) came from, in words."""
    clock_speed: float = 1.0
    """The simulator's clock speed-up (`mtpwatch sim --speed`, from its /sim/info): its rates, and so
    % of peak and % of the ceiling, are that many times what the modelled GPU allows. 1: a real server."""

    @property
    def past_peak(self) -> bool:
        """The bandwidth figure is over the physical limit (% of peak > 100). The ceiling in tok/s
        is not a physical limit: it is priced at the window's τ (see `past_ceiling`)."""
        return self.percent_of_peak is not None and self.percent_of_peak > 100.5

    @property
    def past_ceiling(self) -> bool:
        """tok/s above the ceiling while the bandwidth is within the peak: more tokens per step
        arrived than the window's mean acceptance length τ, which the ceiling is priced at
        (% of ceiling = % of peak × tokens per step / τ)."""
        return (
            not self.past_peak
            and self.pct_of_ceiling is not None
            and self.pct_of_ceiling > 100.5
            and self.clock_speed == 1.0
        )


def clock_note(bw: BandwidthView) -> str:
    """Why a figure is past the physical peak, in words ('' when none is and the clock is real)."""
    if bw.clock_speed != 1.0:
        return (
            f"simulated ×{bw.clock_speed:g} clock (mtpwatch sim --speed {bw.clock_speed:g}): rates are "
            f"{bw.clock_speed:g}× the modelled GPU's, so % of peak and of the ceiling can pass 100"
        )
    if bw.past_peak:
        return (
            "over the physical peak: the model config or the peak is wrong "
            "(check --model-config, --gpu, --peak-gbps)"
        )
    return ""


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
    method: str | None = None
    """Speculation method when known ('mtp', 'ngram', 'eagle3', …: the server log, --spec-method, or
    llama-server's /slots speculation type such as 'draft-simple'); None: the panel says
    "speculative", never "MTP"."""
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
    scrape: str = ""
    """How /metrics is read: 'filtered, 6.7 KB' or 'full page (filter ignored)' (`ScrapeState.text`)."""
    server_series: tuple[float, ...] = ()
    """Server tok/s, one point per second, oldest first."""
    client_series: tuple[float, ...] = ()
    """Client decode tok/s of the current prompt, one point per second."""
    drafts: float | None = None
    """Δ verify steps with drafts over `window` (how much evidence the acceptance numbers rest on)."""
    bandwidth: BandwidthView = field(default_factory=BandwidthView)
    """The roofline panel."""
    verdict: str = ""
    """One sentence on whether MTP pays off, from the numbers above (`make_verdict`)."""
    verdict_level: VerdictLevel = "info"
    """How to colour the verdict."""
    engine: str = "vllm"
    """'vllm' or 'llama.cpp' (from the metrics schema); 'unknown' before the first scrape."""
    draft_note: str = ""
    """llama.cpp: 'drafts ≤ 4, mean 3.85 tokens' (its drafts vary in length up to k)."""
    notes: Mapping[str, str] = field(default_factory=dict)
    """Why numbers the engine does not export are n/a ('latency', 'kv', 'counts')."""


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
    return "—" if x is None else f"{100 * x:.0f} %"


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "—" if x is None else format(x, fmt)


def _ms(x: float | None, per: str = "") -> str:
    return "—" if x is None else f"{1000 * x:.1f} ms{per}"


def _wrap(text: str, width: int | None) -> list[str]:
    """Plain `text` wrapped to `width` cells (one line when no width is known)."""
    if not width or width < 20:
        return [text]
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def window_words(window: str) -> str:
    """'10 s', '60 s' or 'this prompt' (the 'prompt' window in words)."""
    return "this prompt" if window == "prompt" else window


STATUS_STYLE: dict[str, str] = {
    "up": "$success",
    "starting": "$warning",
    "connecting": "$warning",
    "down": "$error",
    "failed": "$error",
    "stopped": "$text-muted",
}

VERDICT_STYLE: dict[str, str] = {
    "good": "$text-success",
    "info": "$text-muted",
    "warn": "$text-warning",
    "bad": "$text-error",
}

MIN_DRAFTS = 50
"""Drafts needed before a near-zero acceptance is called a failure (fewer is noise or warm-up)."""
LOW_ACCEPTANCE = 0.05
LOW_MEAN_LENGTH = 1.2

DRAFTER_MISMATCH = "drafter and target disagree — check you pair an -it target with its -it assistant"
MTP_SLOWER = "MTP is slower here: short answers or MoE expert union?"


def method_name(method: str | None) -> str:
    """What to call a speculation method on screen: 'MTP', 'ngram', 'EAGLE-3', …; None → 'speculation'.

    Only a method the server log, the launch or the user named is called by name: an ngram or EAGLE
    server is not "MTP", and an unknown one is plain "speculation".
    """
    if not method:
        return "speculation"
    m = method.lower()
    if "mtp" in m:
        return "MTP"
    if m in ("eagle3", "eagle-3"):
        return "EAGLE-3"
    if "eagle" in m:
        return "EAGLE"
    if m in ("draft_model", "draft"):
        return "draft model"
    return method


def spec_label(method: str | None, k: int | None) -> str:
    """The header's speculation label: 'MTP k=4', 'ngram k=4', or 'speculative k=4' when unknown."""
    name = method_name(method) if method else "speculative"
    return f"{name} k={k}" if k is not None else f"{name} k ?"


def make_verdict(
    *,
    method: str | None = None,
    speculative: bool | None,
    acceptance_rate: float | None,
    mean_acceptance_length: float | None,
    drafts: float | None,
    bandwidth: BandwidthView,
    window: str,
) -> tuple[str, VerdictLevel]:
    """Whether MTP pays off on this server, in one sentence, from the numbers shown beside it.

    The caller passes the acceptance the panel shows (`core.metrics.attribution.prompt_acceptance`),
    so the sentence never reads another source than the figures next to it.

    Known failure signatures first: acceptance near 0 over enough drafts (a mismatched drafter),
    then a mean acceptance length under 1.2; otherwise the analytic ceiling with speculation
    against the baseline ceiling (the bandwidth term), when the roofline is known.
    """
    where = f"(server, {window_words(window)})"
    name = method_name(method)
    if speculative is False:
        return "no speculation: this server is the baseline", "info"
    if speculative is None:
        return "", "info"
    if not drafts and acceptance_rate is None:
        return f"{name}: no drafts yet {where} — send a prompt", "info"
    # drafts is None when only the acceptance rate is known (llama.cpp timings beside other traffic)
    enough = drafts is not None and drafts >= MIN_DRAFTS
    if acceptance_rate is not None and acceptance_rate < LOW_ACCEPTANCE and enough:
        return (
            f"{name} is failing: {100 * acceptance_rate:.1f} % of drafts accepted over {drafts:.0f} drafts: "
            f"{DRAFTER_MISMATCH}",
            "bad",
        )
    tau = mean_acceptance_length
    if tau is not None and tau < LOW_MEAN_LENGTH:
        return (
            f"{name} barely helps: {tau:.2f} tokens per verify step (< {LOW_MEAN_LENGTH}) {where}; "
            "drafting costs more than it saves",
            "warn",
        )
    bw = bandwidth
    if bw.bandwidth_term is not None and bw.ceiling_baseline_tok_s and bw.ceiling_spec_tok_s:
        ratio = bw.bandwidth_term
        ceilings = f"{bw.ceiling_spec_tok_s:.0f} vs {bw.ceiling_baseline_tok_s:.0f} tok/s"
        if ratio >= 1.1:
            return (
                f"{name} is paying off: τ {_num(tau, '.2f')} tokens/step lifts the bandwidth ceiling "
                f"{ratio:.2f}× over the baseline's ({ceilings}, analytic) {where}",
                "good",
            )
        if ratio >= 1.0:
            return (
                f"{name} is break-even: its ceiling is only {ratio:.2f}× the baseline's ({ceilings}) {where}",
                "warn",
            )
        return (
            f"{name} costs more than it brings: its ceiling is {ratio:.2f}× the baseline's ({ceilings}); "
            f"the step's extra bytes outweigh {_num(tau, '.2f')} tokens per step {where}",
            "bad",
        )
    return f"{name}: {_num(tau, '.2f')} tokens per verify step {where}; no roofline to compare with", "info"


def describe_hardware(reading: Any, *, local: bool, simulated: bool = False) -> str:
    """The hardware line of the roofline panel, from a `core.roofline.nvml.HardwareReading` (or None).

    Measured DRAM bandwidth (GPM) is shown as GB/s and % of peak; NVML's utilization.memory only
    as "memory busy %" (it is time, not bytes); otherwise the reading's reason, in words.
    """
    if simulated:
        return "hardware: analytic only (simulated server: no GPU to read)"
    if not local:
        return "hardware: analytic only (remote server: NVML readings need the GPU on this machine)"
    if reading is None:
        return "hardware: analytic only (no reading yet)"
    parts: list[str] = []
    name = f" {reading.device_name}" if reading.device_name else ""
    if reading.dram_gbps is not None and reading.dram_bw_util_pct is not None:
        interval = f", {reading.interval_s:.1f} s" if reading.interval_s else ""
        parts.append(
            f"GPM DRAM {reading.dram_gbps:.0f} GB/s = {reading.dram_bw_util_pct:.0f} % of peak "
            f"(NVML{name}{interval})"
        )
    if reading.memory_busy_pct is not None:
        parts.append(f"memory busy {reading.memory_busy_pct:.0f} % (time, not bandwidth)")
    if reading.dram_gbps is None:
        reason = reading.reason or "no bandwidth counter"
        parts.append(f"bandwidth: analytic only ({reason})")
    return "hardware: " + " · ".join(parts)


def render_header(view: ServerView, *, compact: bool = False) -> str:
    """Server, model, version, k and connection status: two lines (one when compact)."""
    style = STATUS_STYLE[view.status]
    status = f"[{style}]● {view.status}[/]"
    detail = f"[{style}]{escape(view.status_detail)}[/]" if view.status_detail else ""
    if detail and not compact:
        status += " " + detail
    model = escape(view.model or "model ?")
    if len(view.models) > 1:
        model += f" [dim](1 of {len(view.models)} served)[/]"
    llama = view.engine == "llama.cpp"
    if view.speculative is False:
        spec = "[$text-warning]speculation off[/]"
    elif llama and (view.k is not None or view.method):
        spec = f"{escape(view.method or 'spec')} k≤{view.k or '?'}"
    elif view.speculative is None and view.k is None:
        spec = "k ?"
    else:
        spec = spec_label(view.method, view.k)
    name = "llama.cpp" if llama else "vLLM"
    version = f"{name} {escape(view.version)}" if view.version else f"{name} ?"
    restarts = f" · [$text-warning]{view.restarts} restart(s)[/]" if view.restarts else ""
    if compact:  # the detail (why, since when, next retry) gets its own line
        # The status first: a narrow border title cuts its end, and the model name can be long.
        return f"{status}{restarts} · {spec} · {model}" + (f"\n{detail}" if detail else "")
    scrape = f" · [dim]scrape: {escape(view.scrape)}[/]" if view.scrape else ""
    line1 = f"{escape(view.url)} · {status}{restarts}{scrape}"
    line2 = f"{model} · {version} · {spec}"
    if view.facts:
        line2 += " · [dim]" + escape(" · ".join(view.facts)) + " (server log)[/]"
    return f"{line1}\n{line2}"


def render_numbers(view: ServerView, *, compact: bool = False) -> str:
    """The key numbers, each with its source and window; what the engine does not export says why."""
    w = window_words(view.window)
    src = f"[dim](server, {w}, {view.scope})[/]"
    notes = view.notes
    if notes:
        return _render_numbers_missing(view, w, src, compact=compact)
    if compact:  # 80×24: the three headline numbers, each in one line
        if view.speculative is False:
            acc = "acceptance — [dim](speculation off)[/]"
        else:
            acc = (
                f"accept [b]{_pct(view.acceptance_rate)}[/] · "
                f"len [b]{_num(view.mean_acceptance_length, '.2f')}[/] · "
                f"{render_positions(view.per_position)} {src}"
            )
        line2 = (
            f"[b]{_num(view.server_tok_s)}[/] tok/s [dim](server, {w})[/] · "
            f"{render_bandwidth_short(view.bandwidth)} · ITL {_ms(view.mean_step_s, '/step')} · "
            f"KV {_pct(view.kv_cache_usage)} · run {_num(view.running, '.0f')}"
        )
        return f"{acc}\n{line2}"
    if view.speculative is False:
        acc = "acceptance [dim]— (no spec-decode counters: speculation off)[/]"
    else:
        drafts = "" if view.drafts is None else f" · {view.drafts:,.0f} drafts"
        acc = (
            f"acceptance [b]{_pct(view.acceptance_rate)}[/] · "
            f"mean length [b]{_num(view.mean_acceptance_length, '.2f')}[/] tokens/step{drafts} {src}"
        )
    srv = (
        f"server tok/s [b]{_num(view.server_tok_s)}[/] · steps/s {_num(view.steps_per_s)} "
        f"[dim](server, {w}, engine-wide)[/]"
    )
    lat = (
        f"TTFT {_ms(view.mean_ttft_s)} · TPOT {_ms(view.mean_tpot_s, '/token')} · "
        f"ITL {_ms(view.mean_step_s, '/step')} [dim](server, {w})[/]"
    )
    kv = (
        f"KV cache {_pct(view.kv_cache_usage)} · running {_num(view.running, '.0f')} · "
        f"waiting {_num(view.waiting, '.0f')} [dim](server, now)[/]"
    )
    return "\n".join([acc, srv, lat, kv])


def render_positions(marginal: Sequence[float]) -> str:
    """Per-position acceptance in one line: `pos 76 47 22 %` (marginal, % per draft position)."""
    if not marginal:
        return "pos —"
    return "pos [b]" + " ".join(f"{100 * min(max(v, 0.0), 1.0):.0f}" for v in marginal) + "[/] %"


def render_bandwidth_short(bw: BandwidthView) -> str:
    """Bandwidth against the peak in one phrase: `BW 58 % of 273 GB/s` (analytic, while decoding)."""
    if bw.peak_gbps is None or bw.ceiling_baseline_tok_s is None:
        return "BW — [dim](no model config)[/]" if bw.peak_gbps is not None else "BW — [dim](peak ?)[/]"
    if bw.percent_of_peak is None:
        return f"BW — [dim]of {bw.peak_gbps:.0f} GB/s (idle)[/]"
    text = f"BW [b]{bw.percent_of_peak:.0f} %[/] of {bw.peak_gbps:.0f} GB/s"
    if bw.clock_speed != 1.0:  # F1 and the roofline panel say why in full
        text += f" [$text-warning](sim ×{bw.clock_speed:g} clock)[/]"
    elif bw.past_peak:
        text += " [$text-warning](> peak: check --model-config/--gpu)[/]"
    return text


def _render_numbers_missing(view: ServerView, w: str, src: str, *, compact: bool) -> str:
    """`render_numbers` for an engine without latency histograms or a KV gauge (llama.cpp)."""
    notes = view.notes
    draft = f" [dim]({escape(view.draft_note)})[/]" if view.draft_note else ""
    if view.speculative is False:
        acc = "acceptance — [dim](speculation off)[/]"
    elif compact:
        acc = (
            f"accept [b]{_pct(view.acceptance_rate)}[/] · "
            f"len [b]{_num(view.mean_acceptance_length, '.2f')}[/] {src}"
        )
    else:
        drafts = "" if view.drafts is None else f" · {view.drafts:,.0f} drafts"
        acc = (
            f"acceptance [b]{_pct(view.acceptance_rate)}[/] · "
            f"mean length [b]{_num(view.mean_acceptance_length, '.2f')}[/] tokens/step{drafts}{draft} {src}"
        )
    kv = "KV n/a" if "kv" in notes else f"KV {_pct(view.kv_cache_usage)}"
    run = f"run {_num(view.running, '.0f')} · wait {_num(view.waiting, '.0f')} [dim](now)[/]"
    if compact:
        lat = "ITL n/a" if "latency" in notes else f"ITL {_ms(view.mean_step_s, '/step')}"
        return f"{acc}\n[b]{_num(view.server_tok_s)}[/] tok/s · {lat} [dim](server, {w})[/] · {kv} · {run}"
    counts = notes.get("counts")
    srv = (
        f"server tok/s [b]{_num(view.server_tok_s)}[/] · steps/s {_num(view.steps_per_s)} "
        f"[dim](server, {w}, engine-wide" + (f"; {escape(counts)}" if counts else "") + ")[/]"
    )
    if "latency" in notes:
        lat = f"TTFT · TPOT · ITL [dim]{escape(notes['latency'])}[/]"
    else:
        lat = (
            f"TTFT {_ms(view.mean_ttft_s)} · TPOT {_ms(view.mean_tpot_s, '/token')} · "
            f"ITL {_ms(view.mean_step_s, '/step')} [dim](server, {w})[/]"
        )
    kv_line = (
        f"KV cache [dim]{escape(notes['kv'])}[/]"
        if "kv" in notes
        else f"KV cache {_pct(view.kv_cache_usage)}"
    )
    kv_line += (
        f" · running {_num(view.running, '.0f')} · waiting {_num(view.waiting, '.0f')} [dim](server, now)[/]"
    )
    return "\n".join([acc, srv, lat, kv_line])


def render_verdict(view: ServerView, width: int | None = None) -> str:
    """The verdict, wrapped to `width` (empty when there is nothing to say yet)."""
    if not view.verdict:
        return ""
    style = VERDICT_STYLE[view.verdict_level]
    return "\n".join(f"[{style}]{escape(line)}[/]" for line in _wrap(view.verdict, width))


def render_bars(
    marginal: Sequence[float], conditional: Sequence[float | None], *, width: int = 20, window: str = ""
) -> str:
    """One bar per draft position: `pos 1 ██████▌     62 %  cond 62 %` (marginal bar, conditional beside)."""
    where = f"server, {window_words(window)}" if window else "server"
    if not marginal:
        return f"per-position acceptance [dim]— no drafts in the window ({where})[/]"
    eighths = " ▏▎▍▌▋▊▉█"
    lines = [f"per-position acceptance [dim]bar: marginal · cond: given the previous ({where})[/]"]
    for i, value in enumerate(marginal):
        v = min(max(value, 0.0), 1.0)
        full, rem = divmod(round(v * width * 8), 8)
        bar = "█" * full + (eighths[rem] if rem else "")
        cond = conditional[i] if i < len(conditional) else None
        lines.append(f"pos {i + 1} [$accent]{bar:<{width}}[/] {_pct(value):>5} · cond {_pct(cond):>5}")
    return "\n".join(lines)


def render_bandwidth(
    bw: BandwidthView, window: str = "", width: int | None = None, *, method: str | None = None
) -> str:
    """Roofline panel: analytic GB/s and % of peak, ceilings, the three terms, summary, hardware line."""
    hardware = f"[dim]{escape(bw.hardware)}[/]" if bw.hardware else ""
    if bw.peak_gbps is None or bw.ceiling_baseline_tok_s is None:
        head = "roofline [dim]— " + escape(bw.note or "no model config known") + "[/]"
        return head + (f"\n{hardware}" if hardware else "")
    w = window_words(window or "10 s")
    gpu = escape(bw.gpu or "GPU ?")
    context = ""
    if bw.context_tokens is not None:
        context = f" · KV context {bw.context_tokens:,} tokens [dim]({escape(bw.context_source)})[/]"
    lines = [f"roofline [dim](analytic, {w})[/]{context}"]
    if bw.effective_gbps is not None:
        lines.append(
            f"bandwidth [b]{bw.effective_gbps:.0f} GB/s[/] = [b]{_num(bw.percent_of_peak, '.0f')} %[/] "
            f"of {gpu}'s {bw.peak_gbps:.0f} GB/s peak [dim](analytic, while decoding, {w})[/]"
        )
        note = clock_note(bw)
        if note:  # a figure past the physical peak says why, next to it
            lines.extend(f"[$text-warning]{escape(line)}[/]" for line in _wrap(note, width))
    else:
        lines.append(
            f"bandwidth — [dim](idle: no steps in the window) · {gpu}'s peak {bw.peak_gbps:.0f} GB/s[/]"
        )
    ceiling = f"ceiling baseline [b]{bw.ceiling_baseline_tok_s:.1f}[/] tok/s"
    if bw.k and bw.ceiling_spec_tok_s is not None:
        tau = _num(bw.tau, ".2f")
        src = "" if bw.tau_source == "measured" else " [dim](assumed: all drafts accepted)[/]"
        ceiling += f" · {method_name(method)} at τ {tau}{src}: [b]{bw.ceiling_spec_tok_s:.1f}[/] tok/s"
    if bw.tok_s and bw.pct_of_ceiling is not None:
        ceiling += f" · now {bw.tok_s:.1f} tok/s = [b]{bw.pct_of_ceiling:.0f} %[/] of it"
        if bw.past_ceiling:
            ceiling += " [$text-warning](more tokens per step than the window's τ: windows differ)[/]"
    lines.append(ceiling)
    if bw.k and bw.acceptance_term is not None and bw.bandwidth_term is not None:
        terms = []
        for name, label, value in (
            ("acceptance", "acceptance 1+α·k", bw.acceptance_term),
            ("bandwidth", "bandwidth", bw.bandwidth_term),
            ("compute", "compute", bw.compute_term),
        ):
            text = f"{label} {_num(value, '.2f')}"
            terms.append(f"[b reverse $accent] {text} [/]" if name == bw.binding else text)
        bound = min(v for v in (bw.acceptance_term, bw.bandwidth_term, bw.compute_term) if v is not None)
        why = ""
        if bw.binding == "acceptance" and bw.bandwidth_term < bw.acceptance_term:
            # The bandwidth term is τ · bytes_0/bytes_k: within 2 % of τ the drafter is effectively free.
            extra = 100.0 * (bw.acceptance_term / bw.bandwidth_term - 1.0)
            why = f" [dim](drafts add {extra:.0f} % bytes)[/]"
        binds = f"[b]{escape(bw.binding)}[/] binds{why}"
        lines.append("speed-up ≤ min(" + " · ".join(terms) + f") = {bound:.2f}× → {binds}")
    elif not bw.k:
        lines.append("[dim]speed-up terms: none (plain decoding, k = 0)[/]")
    if bw.summary:
        lines.extend(f"[i]{escape(line)}[/]" for line in _wrap(bw.summary, width))
    if hardware:
        lines.append(hardware)
    if bw.config_source:
        lines.append(f"[dim]inputs: {escape(bw.config_source)}[/]")
    return "\n".join(lines)


def render_summary(n: int, s: PromptSummary, *, compact: bool = False) -> str:
    """One line per finished prompt: tokens, TTFT, decode tok/s (client), acceptance and scope (server).

    Compact (80 columns): the same numbers in under 78 cells (TTFT in whole ms, `acc`, no scope;
    "cancelled" first, where the cut does not reach it).
    """
    if s.error:
        return f"#{n} [$text-error]{escape(s.error)}[/]"
    approx = "≈" if s.approximate else ""
    if compact:
        head = f"#{n} [$text-warning]cancelled[/] · " if s.cancelled else f"#{n} "
        ttft = "—" if s.ttft_s is None else f"{1000 * s.ttft_s:.0f} ms"
        acc = ""
        if s.acceptance_rate is not None or s.mean_acceptance_length is not None:
            acc = (
                f" · acc {_pct(s.acceptance_rate)} · len {_num(s.mean_acceptance_length, '.2f')} "
                "[dim](server)[/]"
            )
        return (
            f"{head}{approx}{s.tokens} tok · TTFT {ttft} · [b]{_num(s.decode_tok_s)}[/] tok/s "
            f"[dim](client)[/]{acc}"
        )
    acc = ""
    if s.acceptance_rate is not None or s.mean_acceptance_length is not None:
        acc = (
            f" · accept {_pct(s.acceptance_rate)} · len {_num(s.mean_acceptance_length, '.2f')} "
            f"[dim](server, {s.scope})[/]"
        )
    tail = " · [$text-warning]cancelled[/]" if s.cancelled else ""
    return (
        f"#{n} {approx}{s.tokens} tok · TTFT {_ms(s.ttft_s)} · decode [b]{_num(s.decode_tok_s)}[/] tok/s "
        f"[dim](client)[/]{acc}{tail}"
    )


def render_speedup(
    last: float | None,
    median: float | None,
    n: int,
    *,
    race: bool,
    label: str = "B/A",
    slower: bool = False,
) -> str:
    """The line between A/B panes: decode tok/s ratio (client), last prompt and median."""
    if last is None:
        text = f"speed-up {label} [dim](decode tok/s, client)[/]: — send a prompt"
    else:
        # The figures and their count first, the source after: an 80-column screen cuts the end.
        text = (
            f"speed-up {label}: last [b]{last:.2f}×[/] · median {_num(median, '.2f')}× over {n} prompt(s) "
            "[dim](decode tok/s, client)[/]"
        )
    if slower:
        text += f" · [$text-warning]{MTP_SLOWER}[/]"
    if race:
        text += " · [$text-warning]race: contended, not a measurement[/]"
    return text


@dataclass(frozen=True, slots=True)
class StartupView:
    """A server mtpwatch is starting: its phase in the log, or why it failed."""

    phase: str = ""
    """The log's current phase ('loading weights', ...)."""
    elapsed_s: float = 0.0
    """Seconds since the process started."""
    facts: tuple[str, ...] = ()
    """Header facts read from the log so far (weights, spec method, KV cache)."""
    error: str | None = None
    """Set when the start failed: the one-line reason."""
    hint: str = ""
    """A fix the log suggests, for a failed start."""


def render_startup(view: StartupView) -> str:
    """The start-up pane's phase line (and facts), or the failure with its hint."""
    if view.error is not None:
        hint = f"\n[$warning]hint: {escape(view.hint)}[/]" if view.hint else ""
        return f"[$error]failed: {escape(view.error)}[/]" + hint
    line = f"[b]{escape(view.phase)}[/] · {view.elapsed_s:.1f} s since start"
    facts = " · ".join(view.facts)
    return line + (f"\n[dim]{escape(facts)}[/]" if facts else "")
