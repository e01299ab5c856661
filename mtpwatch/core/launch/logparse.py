"""Read a vLLM server's log line by line: start-up phase, facts worth showing, failure hints.

`LogWatcher.feed(line)` returns the news in that line as `LogEvent`s (a phase change, a fact, a
hint, a ``SpecDecoding metrics`` line) and keeps the state: `phase`, `phase_started`, `facts`,
`hints`, `spec_lines`. Patterns follow the messages of vLLM 0.32's CPU build (Model Runner V1) and
of 0.33/0.34 on a GPU (Model Runner V2), and the Rust frontend's lines;
docs/vllm-startup-lines.md says which line gives which phase and fact in each, and
tests/data/vllm-startup-*.log hold one log of each. A line that matches nothing costs one cheap
substring check per family (one search of all hint patterns at once for the hints).

Every ``VLLM_LOG_STATS_INTERVAL`` (10 s) a busy server logs a stats line, which tells nothing about
start-up; only its wording is read, as it says which API server runs (`_STATS`; both texts are in
docs/vllm-startup-lines.md): Python's ``Engine 000: Avg prompt throughput: … tokens/s`` (0.32-0.34,
`vllm/v1/metrics/loggers.py:282-339`, logged at :335), or the Rust frontend's ``Avg prompt tput: …
toks/s`` (0.33, 0.34, one line for all engines; `rust/src/llm/src/log_stats.rs:262-300` of the
0.34.0 sdist). Its ``SpecDecoding metrics:`` line has the same text in both
(`vllm/v1/spec_decode/metrics.py:120`, `log_stats.rs:302-329`): `parse_spec_line`."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class Phase(Enum):
    """Start-up phases in the order a vLLM server goes through them."""

    STARTING = "starting"
    LOADING = "loading weights"
    COMPILING = "compiling / warm-up"
    READY = "ready"
    FAILED = "failed"


_ORDER = {phase: i for i, phase in enumerate(Phase)}


@dataclass(frozen=True, slots=True)
class SpecDecodingLine:
    """One ``SpecDecoding metrics:`` line (vLLM logs it every 10 s while drafting)."""

    mean_acceptance_length: float
    accepted_throughput: float
    drafted_throughput: float
    accepted: int
    drafted: int
    per_position: tuple[float, ...]
    acceptance_rate: float
    """Fraction (the log prints a percentage)."""


@dataclass(frozen=True, slots=True)
class Hint:
    """A known failure and what to do about it (one line each)."""

    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.problem}: {self.fix}"


@dataclass(frozen=True, slots=True)
class LogEvent:
    """News from one line: kind is 'phase', 'fact', 'hint' or 'spec'."""

    kind: str
    text: str
    t: float


@dataclass(slots=True)
class LogFacts:
    """What the log told us about the server (None: not seen yet)."""

    vllm_version: str | None = None
    model: str | None = None
    spec_method: str | None = None
    spec_model: str | None = None
    num_spec_tokens: int | None = None
    weights_gib: float | None = None
    weights_s: float | None = None
    mtp_detected: bool = False
    centroids_masking: str | None = None
    frontend: str | None = None
    """'rust' once a line only vLLM's Rust frontend writes was seen (its ready or stats line)."""
    kv_cache_tokens: int | None = None
    kv_cache_gib: float | None = None
    max_concurrency: float | None = None
    listening: str | None = None


_PREFIX = re.compile(
    r"^(?:\([^)]*pid=\d+\)\s+)?(?:(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \S+ \[[^\]]*\]\s?)?"
)
_LEVEL_ERROR = re.compile(r"(?:^|\s)(?:ERROR|CRITICAL) \d\d-\d\d ")
_EXCEPTION = re.compile(r"^[\w.]*(?:Error|Exception)\b[:(]")
_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_SPEC_FIELDS = {
    "mean_acceptance_length": re.compile(r"Mean acceptance length: " + _NUM),
    "accepted_throughput": re.compile(r"Accepted throughput: " + _NUM),
    "drafted_throughput": re.compile(r"Drafted throughput: " + _NUM),
    "accepted": re.compile(r"Accepted: (\d+) tokens"),
    "drafted": re.compile(r"Drafted: (\d+) tokens"),
    "acceptance_rate": re.compile(r"Avg Draft acceptance rate: " + _NUM + "%"),
}
_STATS = re.compile(  # `rust`: the Rust frontend's
    r"Avg prompt throughput: " + _NUM + r" tokens/s, Avg generation throughput: " + _NUM + r" tokens/s, "
    r"Running: \d+ reqs, Waiting: \d+ reqs\b|(?P<rust>Avg prompt tput: " + _NUM + r" toks/s, Avg "
    r"generation tput: " + _NUM + r" toks/s, Reqs Running: \d+, Waiting: \d+\b)"
)
_PER_POS = re.compile(r"Per-position acceptance rate: ([0-9., ]*[0-9])")
_SPEC_CONFIG = re.compile(
    r"speculative_config=SpeculativeConfig\(method='([^']*)', model=(?:'([^']*)'|None), "
    r"num_spec_tokens=(\d+)\)"
)
_ENGINE_INIT = re.compile(r"Initializing a V1 LLM engine \(v([^)]+)\) with config: model='([^']*)'")
# 0.32: the logo's "version 0.32.0"; 0.33/0.34 without the logo: "vLLM server version 0.34.0, serving
# model M" (vllm/entrypoints/common/startup.py:18), hence no comma in the version
_BANNER_VERSION = re.compile(r"(?:version|vLLM API server version) v?(\d+\.\d+\.\d+[^\s,]*)")
_SERVING_MODEL = re.compile(r"(?:, serving model |█  model   )(\S+)")
# the Rust frontend's ready line (rust/src/server/src/lib.rs:352): tracing's fields after the message
_RUST_READY = "OpenAI server is ready to accept requests"
_RUST_ADDRESS = re.compile(r'bind_address="?([^"\s]+)"?(?:.*?scheme="?(\w+)"?)?')
_LOAD_WEIGHTS = re.compile(r"Loading weights took " + _NUM + " seconds")
_MODEL_LOADING = re.compile(r"Model loading took " + _NUM + r" GiB(?: memory)? and " + _NUM + " seconds")
_KV_TOKENS = re.compile(
    r"KV cache size: ([0-9,]+) tokens, Maximum concurrency for [0-9,]+ tokens per request: " + _NUM + "x"
)
_KV_GIB = re.compile(r"(?:Available KV cache memory: |Explicitly set \()" + _NUM)
_CHECKPOINT = re.compile(r"Checkpoint size: " + _NUM + " GiB")
_CENTROIDS = re.compile(r"centroids masking enabled \(([^)]*)\)")
_LISTEN = re.compile(r"(?:Starting vLLM (?:API )?server(?: \d+)? on|Uvicorn running on) (\S+)")

_LOADING_MARKS = (
    "Starting to load model",
    "Loading model",
    "Loading weights",
    "Loading safetensors",
    "Loading drafter model",
)
# Not a bare "torch.compile": "Enforce eager set, disabling torch.compile" comes before loading.
_COMPILING_MARKS = (
    "Model loading took",
    "torch.compile takes",
    "torch.compile took",
    "init engine (profile",
    "Compiling a graph",
    "Capturing CUDA graphs",
    "Warming up",
    "KV cache size:",
    "Dynamo bytecode transform",
)
_READY_MARKS = ("Application startup complete", _RUST_READY)

#: (pattern, problem, fix): a known failure in the log and what to do about it.
_HINTS: tuple[tuple[re.Pattern[str], Hint], ...] = tuple(
    (re.compile(pattern), Hint(problem, fix))
    for pattern, problem, fix in (
        (
            r"Address already in use|\[Errno 98\]",
            "port already in use",
            "another program listens on this port: pick another --port (`ss -ltnp` shows who holds it)",
        ),
        (
            r"No available memory for the cache blocks|KV cache is needed, which is larger than the "
            r"available KV cache memory",
            "not enough memory for the KV cache",
            "lower --max-model-len, or raise --gpu-memory-utilization (CPU build: VLLM_CPU_KVCACHE_SPACE)",
        ),
        (
            r"does not recognize this architecture|are not supported for now|"
            r"Unrecognized model in|model type `[^`]+` but Transformers does not recognize",
            "unknown model type or architecture",
            "this vLLM/transformers is too old for the model: upgrade vLLM (Gemma 4 MTP needs a recent one)",
        ),
        (
            r"All drafting layers should belong to the same kv cache group",
            "draft model on a hybrid-attention target (sliding + full layers)",
            "add `-- --disable-hybrid-kv-cache-manager`",
        ),
        (
            r"operator torchvision::nms does not exist",
            "torchvision does not match this torch",
            "pip uninstall -y torchvision torchaudio torchcodec in vLLM's environment",
        ),
        (
            r"PackageNotFoundError: No package metadata was found for vllm",
            "the `vllm` CLI cannot find its own package metadata (CPU build named vllm-cpu)",
            "use --vllm 'python -m vllm.entrypoints.openai.api_server', or add a vllm dist-info shim",
        ),
        (
            r"Free memory on device .* is less than desired GPU memory utilization",
            "not enough free GPU memory at start-up (another process holds it)",
            "another vLLM (on a Spark the desktop too: memory is unified) holds it: give each server on "
            "this GPU its own smaller --gpu-memory-utilization (mtpwatch ab --start plans them; see "
            "--plan), use --kv-cache-memory-bytes, stop the other server, or use --restart",
        ),
        (
            r"unrecognized arguments: ",
            "vLLM does not know a flag",
            "this vLLM version has no such option: check `vllm serve --help` and the flags after --",
        ),
        (
            r"Invalid repository ID or local directory specified|is not a valid model identifier|"
            r"Repository Not Found|Repo id must be in the form",
            "model not found",
            "MODEL is neither a local folder with a config.json nor a Hugging Face repo id this machine "
            "can fetch: check the path (offline: HF_HUB_OFFLINE, a token: HF_TOKEN)",
        ),
        (
            r"CUDA out of memory|OutOfMemoryError",
            "CUDA out of memory",
            "another process may hold the GPU (nvidia-smi); lower "
            "--gpu-memory-utilization or --max-model-len, or use a smaller model",
        ),
        (
            r"Failed to infer device type",
            "vLLM found no device",
            "no usable GPU for this build (check nvidia-smi / the CPU build's version)",
        ),
    )
)
_ANY_HINT = re.compile("|".join(f"(?:{pattern.pattern})" for pattern, _ in _HINTS))
"""Every hint's pattern at once: one search tells whether a line can hold any hint."""


def _strip(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\r\n"), count=1)


def parse_spec_line(line: str) -> SpecDecodingLine | None:
    """Parse a ``SpecDecoding metrics:`` line; None for any other line."""
    if "SpecDecoding metrics:" not in line:
        return None
    values: dict[str, Any] = {}
    for name, pattern in _SPEC_FIELDS.items():
        if (match := pattern.search(line)) is None:
            return None
        values[name] = float(match.group(1))
    per_pos = _PER_POS.search(line)
    values["per_position"] = tuple(float(x) for x in per_pos.group(1).split(",")) if per_pos else ()
    values["accepted"], values["drafted"] = int(values["accepted"]), int(values["drafted"])
    values["acceptance_rate"] /= 100.0  # the log prints a percentage
    return SpecDecodingLine(**values)


@dataclass(slots=True)
class LogWatcher:
    """Feed it a server's log lines; it tracks phase, facts, hints and SpecDecoding lines."""

    clock: Callable[[], float] = time.monotonic
    phase: Phase = Phase.STARTING
    phase_started: dict[Phase, float] = field(default_factory=dict)
    facts: LogFacts = field(default_factory=LogFacts)
    hints: list[Hint] = field(default_factory=list)
    spec_lines: list[SpecDecodingLine] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """ERROR lines and the last lines of tracebacks, for a failure report."""

    def __post_init__(self) -> None:
        self.phase_started.setdefault(Phase.STARTING, self.clock())

    def _advance(self, phase: Phase, now: float, events: list[LogEvent]) -> None:
        if self.phase is Phase.FAILED or _ORDER[phase] <= _ORDER[self.phase]:
            return
        self.phase = phase
        self.phase_started[phase] = now
        elapsed = now - self.phase_started[Phase.STARTING]
        events.append(LogEvent("phase", f"{phase.value} (+{elapsed:.0f} s)", now))

    def mark_ready(self) -> list[LogEvent]:
        """/health answered: the server is ready whatever the log said."""
        events: list[LogEvent] = []
        self._advance(Phase.READY, self.clock(), events)
        return events

    def mark_failed(self, returncode: int | None) -> list[LogEvent]:
        """The process exited (or start-up was abandoned)."""
        now = self.clock()
        if self.phase is Phase.FAILED:
            return []
        self.phase = Phase.FAILED
        self.phase_started[Phase.FAILED] = now
        return [LogEvent("phase", f"failed (exit status {returncode})", now)]

    def feed(self, line: str) -> list[LogEvent]:
        """Take one log line; return what it told us that is new."""
        now = self.clock()
        events: list[LogEvent] = []
        message = _strip(line)
        if not message.strip():
            return events

        if "SpecDecoding metrics:" in message:
            spec = parse_spec_line(message)
            if spec is not None:
                self.spec_lines.append(spec)
                per_pos = ", ".join(f"{p:.3f}" for p in spec.per_position)
                text = (
                    f"vLLM: acceptance {spec.acceptance_rate:.1%}, mean length "
                    f"{spec.mean_acceptance_length:.2f}, per position {per_pos}"
                )
                events.append(LogEvent("spec", text, now))
            return events
        if "Avg prompt t" in message and (stats := _STATS.search(message)):
            if stats["rust"]:
                self._rust_frontend(now, events)
            return events  # the periodic stats line: nothing new for start-up

        self._phase_from(message, now, events)
        self._facts_from(message, now, events)
        self._serving_from(message, now, events)
        self._hints_from(message, now, events)
        if _LEVEL_ERROR.search(line) or _EXCEPTION.match(message):
            self.errors.append(message)
        return events

    def _phase_from(self, message: str, now: float, events: list[LogEvent]) -> None:
        if any(mark in message for mark in _READY_MARKS):
            self._advance(Phase.READY, now, events)
        elif any(mark in message for mark in _COMPILING_MARKS):
            self._advance(Phase.COMPILING, now, events)
        elif any(mark in message for mark in _LOADING_MARKS):
            self._advance(Phase.LOADING, now, events)

    def _facts_from(self, message: str, now: float, events: list[LogEvent]) -> None:
        facts = self.facts
        if facts.vllm_version is None and "version" in message and (match := _BANNER_VERSION.search(message)):
            facts.vllm_version = match.group(1)
            events.append(LogEvent("fact", f"vLLM {facts.vllm_version}", now))
        if "Initializing a V1 LLM engine" in message:
            if match := _ENGINE_INIT.search(message):
                if facts.vllm_version is None:
                    facts.vllm_version = match.group(1)
                    events.append(LogEvent("fact", f"vLLM {facts.vllm_version}", now))
                facts.model = match.group(2)
            spec = _SPEC_CONFIG.search(message)
            if spec:
                facts.spec_method, facts.spec_model = spec.group(1), spec.group(2)
                facts.num_spec_tokens = int(spec.group(3))
                drafter = f", drafter {facts.spec_model}" if facts.spec_model else ""
                said = f"speculative decoding: {facts.spec_method}, k={facts.num_spec_tokens}{drafter}"
                events.append(LogEvent("fact", said, now))
            elif "speculative_config=None" in message:
                events.append(LogEvent("fact", "speculative decoding: off", now))
        elif "Checkpoint size:" in message:
            if (match := _CHECKPOINT.search(message)) and facts.weights_gib is None:
                facts.weights_gib = float(match.group(1))
        elif "Loading weights took" in message:
            # CPU build: the size comes from "Checkpoint size", there is no "Model loading took".
            if (match := _LOAD_WEIGHTS.search(message)) and facts.weights_s is None:
                facts.weights_s = float(match.group(1))
                size = f"{facts.weights_gib:.2f} GiB " if facts.weights_gib is not None else ""
                events.append(LogEvent("fact", f"weights: {size}loaded in {facts.weights_s:.1f} s", now))
        elif "Model loading took" in message:
            if match := _MODEL_LOADING.search(message):
                facts.weights_gib, facts.weights_s = float(match.group(1)), float(match.group(2))
                said = f"weights: {facts.weights_gib:.2f} GiB loaded in {facts.weights_s:.1f} s"
                events.append(LogEvent("fact", said, now))
        elif "Detected MTP model" in message:
            if not facts.mtp_detected:
                facts.mtp_detected = True
                events.append(LogEvent("fact", "MTP drafter detected (shares the target's weights)", now))
        elif "centroids masking enabled" in message:
            match = _CENTROIDS.search(message)
            facts.centroids_masking = match.group(1) if match else "enabled"
            events.append(LogEvent("fact", f"Gemma 4 MTP centroids masking: {facts.centroids_masking}", now))
        elif "KV cache size:" in message:
            if match := _KV_TOKENS.search(message):
                facts.kv_cache_tokens = int(match.group(1).replace(",", ""))
                facts.max_concurrency = float(match.group(2))
                most = f"max concurrency {facts.max_concurrency:.1f}x"
                events.append(LogEvent("fact", f"KV cache: {facts.kv_cache_tokens:,} tokens ({most})", now))
        elif "KV cache memory" in message or "GiB for KV cache" in message:
            if match := _KV_GIB.search(message):
                facts.kv_cache_gib = float(match.group(1))
                events.append(LogEvent("fact", f"KV cache memory: {facts.kv_cache_gib:.2f} GiB", now))
        elif "Starting vLLM" in message or "Uvicorn running on" in message:
            match = _LISTEN.search(message)
            if match and facts.listening is None:
                facts.listening = match.group(1)

    def _rust_frontend(self, now: float, events: list[LogEvent]) -> None:
        if self.facts.frontend is None:
            self.facts.frontend = "rust"
            events.append(LogEvent("fact", "API server: vLLM's Rust frontend (OpenMetrics /metrics)", now))

    def _serving_from(self, message: str, now: float, events: list[LogEvent]) -> None:
        """The model from the banner (0.33/0.34 `vLLM server version V, serving model M`, or the logo's
        `model` line), and the Rust frontend's ready line (its address)."""
        facts = self.facts
        if facts.model is None and ("serving model " in message or "  model   " in message):
            if match := _SERVING_MODEL.search(message):
                facts.model = match.group(1)
        elif message.startswith(_RUST_READY) or f"] {_RUST_READY}" in message:
            self._rust_frontend(now, events)
            if (match := _RUST_ADDRESS.search(message)) and facts.listening is None:
                facts.listening = f"{match.group(2) or 'http'}://{match.group(1)}"

    def _hints_from(self, message: str, now: float, events: list[LogEvent]) -> None:
        if "Retrying with a new port" in message:  # vLLM's own internal port, handled by vLLM
            return
        if not _ANY_HINT.search(message):
            return
        for pattern, hint in _HINTS:
            if hint not in self.hints and pattern.search(message):
                self.hints.append(hint)
                events.append(LogEvent("hint", str(hint), now))


def watch_lines(lines: Iterable[str]) -> LogWatcher:
    """A `LogWatcher` that has read `lines` (a whole log, or its last lines)."""
    watcher = LogWatcher()
    for line in lines:
        watcher.feed(line)
    return watcher


_WRAPPER = re.compile(r"root cause above|^EngineCore failed to start\.?$", re.I)
"""Error lines that only point at an earlier one (vLLM's API server after its engine died)."""
REASON_MAX = 240
"""Characters of a failure reason kept for a one-line report."""


def failure_reason(lines: list[str]) -> str | None:
    """Why a server died, from the last lines of its log: its last error line that is not a wrapper
    pointing at an earlier one (vLLM: ``ValueError: Free memory on device ...``, not ``RuntimeError:
    Engine core initialization failed. See root cause above``), else the last line; None when
    empty."""
    errors = [e.strip() for e in watch_lines(lines).errors if e.strip()]
    causes = [e for e in errors if not _WRAPPER.search(e)]
    text = (causes or errors or [_strip(x).strip() for x in lines if x.strip()] or [""])[-1]
    if not text:
        return None
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"
