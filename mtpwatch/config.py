"""What the app is asked to watch: servers to attach to or start, and display settings.

Built by the CLI (`mtpwatch/commands/*`), read by the UI and by tests. No Textual here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """A server process mtpwatch starts and therefore owns (and stops on exit)."""

    argv: tuple[str, ...]
    """Full command line, e.g. ('vllm', 'serve', 'MODEL', '--host', '127.0.0.1', ...)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables on top of mtpwatch's own environment."""
    kind: Literal["vllm", "sim", "llama.cpp"] = "vllm"
    """What the process is; all go through one path (the simulator prints vLLM-like logs)."""
    keep: bool = False
    """Leave the server running when mtpwatch exits (prints how to attach and stop)."""
    startup_timeout_s: float = 900.0
    """Give up waiting for /health after this long, stop the process and show its last log lines."""


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One server the app watches."""

    label: str
    """Short name shown in the panel title: 'A', 'B', 'MTP on', 'baseline', ..."""
    url: str
    """Base URL, e.g. http://127.0.0.1:8000 (normalised by core.client.normalize_url)."""
    model: str | None = None
    """`model_name` to show when several are served; None = the first one /v1/models lists."""
    api_key: str | None = None
    """Bearer token for /metrics and the OpenAI endpoints (falls back to VLLM_API_KEY)."""
    launch: LaunchSpec | None = None
    """Set when mtpwatch starts this server itself; None when attaching."""


@dataclass(frozen=True, slots=True)
class DisplaySettings:
    """How the app polls and what it assumes about the hardware."""

    scrape_interval_s: float = 0.25
    """Seconds between /metrics scrapes (4 Hz by default)."""
    chat: bool = False
    """Send prompts to /v1/chat/completions instead of /v1/completions."""
    max_tokens: int = 256
    """max_tokens of prompts typed in the console."""
    temperature: float = 0.0
    """Sampling temperature; 0 makes MTP on/off outputs comparable token by token."""
    gpu: str | None = None
    """GPU name for the peak-bandwidth table when the server is remote (e.g. 'GB10', 'H100 SXM')."""
    peak_gbps: float | None = None
    """Override the peak memory bandwidth in GB/s."""
    model_config: str | None = None
    """Path to the served model's config.json for the analytic bandwidth model."""
    drafter_config: str | None = None
    """Path to the drafter's config.json (MTP assistant, EAGLE head, draft model)."""


@dataclass(frozen=True, slots=True)
class AppConfig:
    """Everything `mtpwatch.ui.app.run_app` needs."""

    servers: Sequence[ServerSpec]
    """One server (attach/start) or two (ab/demo)."""
    display: DisplaySettings = field(default_factory=DisplaySettings)
    mode: Literal["single", "ab"] = "single"
    """'ab' shows two identical panels side by side with one prompt console."""
    title: str = "mtpwatch"
