"""What the app is asked to watch: servers to attach to or start, and display settings.

Built by the CLI (`mtpwatch/commands/*`), read by the UI and by tests. No Textual here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # an annotation only: the workloads' prompt files stay unread at start-up
    from mtpwatch.core.ab.workloads import Prompt

Schedule = Literal["alternate", "race", "restart"]
"""How the A/B view runs a prompt on two servers: 'alternate' (ABBA, never concurrent), 'race'
(both at once: contended, not a measurement) or 'restart' (one server at a time, A, B, A sessions)."""


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """A server process mtpwatch starts and therefore owns (and stops on exit)."""

    argv: tuple[str, ...]
    """Full command line, e.g. ('vllm', 'serve', 'MODEL', '--host', '127.0.0.1', ...)."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Extra environment variables on top of mtpwatch's own environment (may hold VLLM_API_KEY, so
    kept out of repr: a traceback that prints locals must not print the key)."""
    kind: Literal["vllm", "sim", "llama.cpp"] = "vllm"
    """What the process is; the simulator prints vLLM-like logs, so both go through one path."""
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
    """Base URL, e.g. http://127.0.0.1:8000 (normalised by core.http.urls.normalize_url)."""
    model: str | None = None
    """`model_name` to show when several are served; None = the first one /v1/models lists."""
    api_key: str | None = field(default=None, repr=False)
    """Bearer token for /metrics and the OpenAI endpoints (falls back to VLLM_API_KEY); not in repr."""
    launch: LaunchSpec | None = None
    """Set when mtpwatch starts this server itself; None when attaching."""


@dataclass(frozen=True, slots=True)
class DisplaySettings:
    """How the app polls and what it assumes about the hardware. A field without a docstring is the
    display option of its name: its help (`commands.options.display_options`) says what it does."""

    scrape_interval_s: float = 0.5
    """Seconds between /metrics scrapes (2 Hz by default: the views' rate, `session.view_pacing`,
    each scrape drawn as it lands; a 4 Hz scrape cost a one-core server ~1 % of its decode speed
    against ~0.5 % at 2 Hz, docs/cost.md)."""
    idle_interval_s: float = 0.5
    """Seconds between scrapes while the server is idle (`Collector.idle`) and no console prompt
    runs; never shorter than `scrape_interval_s`. A prompt from the console scrapes at once."""
    chat: bool = False
    max_tokens: int = 256
    temperature: float = 0.0
    """Sampling temperature; 0 makes MTP on/off outputs comparable token by token."""
    gpu: str | None = None
    peak_gbps: float | None = None
    model_config: str | None = None
    drafter_config: str | None = None
    theme: str | None = None
    max_fps: int = 25
    """At most this many redraws a second of a streaming answer (`--fps`); the numbers redraw at
    most twice a second. Each redraw costs CPU (Textual composes the screen) and bytes over SSH."""
    spec_method: str | None = None
    """The speculation method when the user says (--spec-method: 'mtp', 'ngram', 'eagle', …); a log
    mtpwatch read wins. Unknown: the panel says "speculative", never "MTP"."""


@dataclass(frozen=True, slots=True)
class MeasureSettings:
    """How the A/B view measures: runs per prompt and arm, warm-ups dropped, restart mode."""

    runs: int = 12
    """Runs per prompt and arm, warm-up included (the public Spark benchmark: 12, first dropped)."""
    warmup: int = 1
    restart: bool = False
    """One server at a time, started and stopped in A, B, A sessions by the bench engine."""
    prompts: tuple[Prompt, ...] = ()
    """Prompts measured at startup in restart mode (empty: none)."""
    max_tokens: int | None = None
    """Output cap of measured console prompts; None = the console's --max-tokens."""
    save_path: str | None = None
    """Where Ctrl+S saves the last measurement, and where it is saved on exit (`--save FILE`);
    None: Ctrl+S writes mtpwatch-ab-<UTC time>.json in the current folder, nothing on exit."""


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """Many servers in one table (`attach URL URL …`, `--file`, `--prometheus`). A field without a
    docstring is the attach option of its name (`--window` for `window_s`): its help says what it does."""

    urls: tuple[str, ...] = ()
    """Servers scraped directly (normalised base URLs), in display order."""
    prometheus: str | None = None
    selector: str = ""
    window_s: float = 10.0
    api_key: str | None = field(default=None, repr=False)
    """Bearer token for the servers' /metrics (falls back to VLLM_API_KEY); never in a repr."""


@dataclass(frozen=True, slots=True)
class AppConfig:
    """Everything `mtpwatch.ui.app.run_app` needs."""

    servers: Sequence[ServerSpec]
    """One server (attach/start) or two (ab/demo)."""
    display: DisplaySettings = field(default_factory=DisplaySettings)
    mode: Literal["single", "ab"] = "single"
    """'ab' shows two identical panels side by side with one prompt console."""
    title: str = "mtpwatch"
    fleet: FleetSettings | None = None
    """Set: the app opens the fleet view (one row per server); Enter opens a row's monitor."""
    record: str | None = None
    """Write what the app sees to this file (`--record`); None = no recording."""
    schedule: Schedule = "alternate"
    prefill: str = ""
    """Text put in the prompt box at start (the demo suggests a prompt)."""
    measure: MeasureSettings | None = None
    """Runs and warm-up of F6 measurements, restart mode, where Ctrl+S saves; None = the defaults."""
    loop: bool = False
    """Send the built-in prompts in turn until quit (`demo --loop`, `replay --loop`)."""
    speed: float = 1.0
    """A replay's starting speed (`replay --speed`)."""
