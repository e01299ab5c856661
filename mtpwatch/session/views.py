"""What one frame shows: frozen view models and the pure builders that fill them, in plain text.

`session.server_view.build_server_view` fills a `ServerView` from `mtpwatch.core`; the snapshot tests
build them from fixed sample states, so every panel can be drawn without a server (`mtpwatch
screenshots` films the simulator through the feed instead). `mtpwatch.ui.markup` escapes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["starting", "connecting", "up", "down", "failed", "stopped"]

VerdictLevel = Literal["good", "info", "warn", "bad"]

WINDOWS: tuple[str, ...] = ("10 s", "60 s", "prompt")
"""Acceptance windows the `w` key cycles through."""


@dataclass(frozen=True, slots=True)
class BandwidthView:
    """The roofline panel (issue 5): analytic figures from `core.roofline`, plus a hardware reading;
    every field is None / empty when unknown."""

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
    regime: str = ""
    """`Roofline.regime`: the summary's head in a few words ('bandwidth-bound'; '' when idle)."""
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
    status: Status = "connecting"
    status_detail: str = ""
    """One line: 'disconnected since 12:00:01 (connection refused), retrying in 2.0 s'."""
    model: str | None = None
    """The model_name being watched."""
    models: tuple[str, ...] = ()
    """All models the server lists (shown when there are several)."""
    version: str | None = None
    """vLLM version from /version."""
    method: str | None = None
    """Speculation method when known ('mtp', 'ngram', 'eagle3', 'draft-simple', …: `ServerWatch.method`
    says from where); None: the panel says "speculative", never "MTP"."""
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
    acceptance_since_start: float | None = None
    """accepted / drafted over the server's whole life (its counters' totals; `start --headless`)."""
    running: float | None = None
    waiting: float | None = None
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
    verdict: str = ""
    """One sentence on whether MTP pays off, from the numbers above (`session.diagnosis.make_verdict`)."""
    verdict_level: VerdictLevel = "info"
    engine: str = "vllm"
    """'vllm' or 'llama.cpp' (from the metrics schema); 'unknown' before the first scrape."""
    draft_note: str = ""
    """llama.cpp: 'drafts ≤ 4, mean 3.85 tokens' (its drafts vary in length up to k)."""
    notes: Mapping[str, str] = field(default_factory=dict)
    """Why numbers the engine does not export are n/a ('latency', 'kv', 'counts')."""
    drafted_share: float | None = None
    """Δdrafts / Δ ITL count over `window`: the share of decode steps that drafted
    (`core.metrics.formulas.drafted_share`)."""
    k_schedule: tuple[tuple[int, int, int], ...] | None = None
    """`num_speculative_tokens_per_batch_size` when the command line set one (k follows the batch)."""
    mean_draft_len: float | None = None
    """Δdraft_tokens / Δdrafts over `window`: drafts a drafting step verified (k when every one was
    full length)."""
    as_of_s: float | None = None
    """Seconds since the last good scrape, when the numbers are not current (the server is not up,
    or its last scrape is older than `STALE_AFTER_S`); None while they are: the labels then say
    "as of 15 s ago", never "now" (issue 40, item 7)."""


#: A drafted share below this is shown even without a schedule (a fixed-k server drafts on every
#: decode step, so its share is 1 up to a request still between two scrapes).
DRAFTED_SHARE_SHOWN_BELOW = 0.99


def dynamic_k(view: ServerView) -> bool:
    """The drafted share and the mixed-lengths note apply: a schedule is configured, or fewer than
    `DRAFTED_SHARE_SHOWN_BELOW` of the decode steps drafted (ngram without a match drafts nothing)."""
    if view.speculative is not True or view.engine != "vllm":
        return False
    share = view.drafted_share
    return bool(view.k_schedule) or (share is not None and share < DRAFTED_SHARE_SHOWN_BELOW)


def mixed_lengths(view: ServerView) -> bool:
    """The per-position denominators (Δnum_drafts) mix draft lengths: a schedule with two ks above
    0, or drafting steps that verified fewer than k drafts on average (ngram's short matches)."""
    if not dynamic_k(view):
        return False
    ks = {k for _, _, k in view.k_schedule or () if k > 0}
    short = view.mean_draft_len is not None and view.k is not None and view.mean_draft_len < view.k - 0.01
    return len(ks) > 1 or short


STALE_AFTER_S = 10.0
"""A scrape older than this (the shortest window) no longer shows the server as it is now."""


def stale_age(
    status: Status, last_scrape_t: float | None, now: float, after_s: float = STALE_AFTER_S
) -> float | None:
    """`ServerView.as_of_s` from the status and when the last good scrape was taken (None: current,
    or nothing scraped yet). `after_s`: the age past which an up server's numbers are old (at least
    `STALE_AFTER_S`; more where the scrapes are further apart)."""
    if last_scrape_t is None:
        return None
    age = max(0.0, now - last_scrape_t)
    return age if status != "up" or age > max(after_s, STALE_AFTER_S) else None


@dataclass(frozen=True, slots=True)
class PromptSummary:
    """One line per finished prompt per server; its acceptance is over the prompt's window."""

    tokens: int
    """Completion tokens."""
    ttft_s: float | None
    """Client time to first token."""
    decode_tok_s: float | None
    """(tokens − 1) / (t_last − t_first), client side."""
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    scope: str = "engine-wide"
    """'this request' or 'engine-wide'."""
    approximate: bool = False
    """True when the server gave no per-chunk usage (tokens counted from chunks)."""
    cancelled: bool = False
    error: str | None = None
    """One line when the request failed."""
    client_tokens_per_step: float | None = None
    """(tokens − 1) / (chunks − 1): tokens per decode step the client received
    (`core.metrics.formulas.client_tokens_per_step`); None when the token count is not exact."""
    eos_overcount: float | None = None
    """How far this request's server mean length exceeds `client_tokens_per_step`: vLLM counted
    drafts accepted past the answer's end (`core.metrics.formulas.eos_overcount`, vllm#56101)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One server's answer to one console prompt: its text, token ids and summary line's numbers."""

    summary: PromptSummary
    text: str = ""
    token_ids: tuple[int, ...] | None = None
    """Output token ids when the server sent them."""


def window_words(window: str) -> str:
    """'10 s', '60 s' or 'this prompt' (the 'prompt' window in words)."""
    return "this prompt" if window == "prompt" else window


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
    return {"dflash": "DFlash", "dspark": "DSpark"}.get(m, method)


def spec_label(method: str | None, k: int | None) -> str:
    """The header's speculation label: 'MTP k=4', 'ngram k=4', or 'speculative k=4' when unknown."""
    name = method_name(method) if method else "speculative"
    return f"{name} k={k}" if k is not None else f"{name} k ?"


def describe_hardware(reading: Any, *, local: bool, simulated: bool = False) -> str:
    """The roofline panel's hardware line from a `core.roofline.nvml.HardwareReading` (or None);
    NVML's utilization.memory is shown only as "memory busy %" (it is time, not bytes)."""
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
