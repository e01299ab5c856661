"""What configures one simulated server: `SimOptions`, `make_options` (flat keywords) and `served_preset`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from mtpwatch.sim.faults import Faults
from mtpwatch.sim.presets import DEFAULT_PRESET, Preset
from mtpwatch.sim.replies import VLLM_VERSIONS


@dataclass
class SimOptions:
    preset: str = DEFAULT_PRESET
    host: str = "127.0.0.1"
    port: int = 0
    """0 picks a free port."""
    spec: bool = True
    """False: the baseline twin (same physics, no drafter, no spec counters)."""
    k: int | None = None
    """num_speculative_tokens; None = the preset's."""
    acceptance_scale: float = 1.0
    served_model_name: str | None = None
    seed: int = 0
    speed: float = 1.0
    """Run physics this many times faster than real time (tests use 10–50)."""
    startup_delay_s: float = 0.0
    """Simulated model-load time before the server answers."""
    log_interval_s: float = 10.0
    """Period of the `Engine 000:` / `SpecDecoding metrics:` lines (vLLM: VLLM_LOG_STATS_INTERVAL)."""
    api_key: str | None = None
    max_num_seqs: int | None = None
    mfu_metrics: bool = False
    """Increment vllm:estimated_read_bytes_per_gpu_total (vLLM's --enable-mfu-metrics)."""
    per_request_spec_metrics: bool = False
    """Send `metrics.speculative_decoding` on the final usage chunk (vLLM's
    `--per-request-spec-decode-metrics summary`, vLLM ≥ 0.27)."""
    exit_mode: Literal["process", "server"] = "server"
    """What the exit fault does: end the process (CLI) or just close the server (tests)."""
    exit_after_s: float | None = None
    """Exit fault on a timer."""
    restart_after_s: float | None = None
    """Restart fault on a timer (counters reset, new `_created`)."""
    load: int = 0
    """Background traffic: keep this many requests in flight inside the server (no client needed), so
    an attached monitor sees a busy server. They count in every counter like client requests."""
    load_max_tokens: int = 200
    """max_tokens of each background request."""
    faults: Faults = field(default_factory=Faults)
    model: str | None = None
    """The model as `vllm serve MODEL` names it (default: the preset's HF id)."""
    method: str | None = None
    """Speculative method from `--speculative-config` (default: the preset's)."""
    drafter: str | None = None
    """Drafter model from `--speculative-config` (default: the preset's)."""
    k_schedule: tuple[tuple[int, int, int], ...] | None = None
    """`num_speculative_tokens_per_batch_size` from `--speculative-config`: k per batch-size range."""
    gpu_memory: bool = False
    """Share a simulated GPU with other simulators (ledger) and check vLLM's start-up memory rule."""
    gpu_memory_utilization: float = 0.9
    kv_cache_memory_bytes: int | None = None
    max_model_len: int | None = None
    enforce_eager: bool = False
    gpu_ledger_dir: str | None = None
    """Folder of the simulated GPUs' ledgers (default: `sim.gpu.default_ledger_dir`)."""
    frontend: Literal["python", "rust"] = "python"
    """The API server: vLLM's Python one (Prometheus text, `Engine 000:` lines) or the Rust frontend of
    vLLM 0.33/0.34 (`VLLM_USE_RUST_FRONTEND=1`: OpenMetrics, no `/metrics/`, its own stats line)."""
    vllm_log: Literal["0.32-cpu", "0.34-gpu"] = "0.32-cpu"
    """Which start-up log to print: vLLM 0.32's CPU build (Model Runner V1) or 0.34 on a GPU (Model
    Runner V2); docs/vllm-startup-lines.md has the lines of each."""


def claimed_version(opts: SimOptions) -> str:
    """The vLLM version this simulated server claims: its log flavour's."""
    return VLLM_VERSIONS[opts.vllm_log]


def make_options(**options: Any) -> SimOptions:
    """`SimOptions` from keyword arguments; fault fields (cut_stream_after, ...) may be given flat."""
    faults = Faults(**{k: options.pop(k) for k in list(options) if k in Faults.__dataclass_fields__})
    return SimOptions(**options, faults=faults)


def served_preset(preset: Preset, opts: SimOptions) -> Preset:
    """The preset as a `vllm serve` command line changes it: model, context length, method, drafter.

    ngram drafts by looking the prompt up: no drafter weights, a tiny cost per draft position.
    Other methods keep the preset's drafter costs (an EAGLE-3 head or a draft model of that size).
    """
    changes: dict[str, Any] = {}
    if opts.model:
        changes["model"] = opts.model
    if opts.max_model_len:
        changes["max_model_len"] = opts.max_model_len
    method = opts.method or preset.method
    if method == "ngram":
        changes.update(
            method="ngram", drafter=None, drafter_bytes=0.0, drafter_overhead_s=0.0001, centroids=False
        )
    elif opts.method or opts.drafter:
        changes.update(
            method=method,
            drafter=opts.drafter or preset.drafter,
            centroids=preset.centroids and method == "mtp",
        )
    return replace(preset, **changes) if changes else preset
