"""`BenchOptions`: every option of one `mtpwatch bench`, built once from the command line.

The bench, its k sweep (`core.sweeps.kscan`) and its context-length sweep read their settings from
this one frozen object instead of a long list of parameters; the click command only parses, builds
it (`from_params`) and hands it on. Nothing here parses or checks a value: the fields hold what
click gave (`concurrency` and `lengths` still as the typed comma lists).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from mtpwatch.core.ab import workloads

RESUME_FIXED = (
    "url",
    "ab",
    "prompts_spec",
    "limit",
    "runs",
    "warmup",
    "max_tokens",
    "lengths",
    "schedule",
    "launch_a",
    "launch_b",
    "concurrency",
    "temperature",
    "chat",
    "model",
    "startup_timeout",
)
"""Options that define a bench; a resumed bench takes them from its log."""


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """What one `mtpwatch bench` was asked, by the click parameters' names (their defaults are the flags')."""

    url: str | None
    ab: tuple[str, str] | None
    prompts_spec: str
    limit: int | None
    runs: int
    warmup: int
    max_tokens: int | None
    lengths: str | None
    schedule: str
    launch_a: str | None
    launch_b: str | None
    startup_timeout: float
    concurrency: str
    temperature: float
    chat: bool
    model: str | None
    api_key: str | None
    require_identical: bool
    json_out: bool
    """--json: the report as JSON on stdout instead of the table."""
    json_path: Path | None
    """--json-file PATH (or the deprecated --json PATH): the report written there."""
    csv_path: Path | None
    progress: bool | None
    progress_interval: float
    label: str | None
    metadata: tuple[str, ...]
    gpu: str | None
    jsonl_path: Path | None
    resume_path: Path | None
    plot: bool
    # the k sweep (--start MODEL --sweep-k …)
    start_model: str | None
    sweep_k: str
    method: str | None
    drafter: str | None
    vllm_cmd: str
    gpu_memory: float | None
    gpu_free: float | None
    drafter_gib: float | None
    show_plan: bool
    step_times: Path | None
    verify_schedule: bool
    # acceptance against context length (--context-lengths …)
    context_lengths: str | None
    # how the command line gave them
    given: frozenset[str] = frozenset()
    """The options typed on the command line (not defaults, config files or the environment)."""
    extra: tuple[str, ...] = ()
    """The arguments after ``--``: flags for every vLLM server a k sweep starts."""

    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], *, given: Iterable[str] = (), extra: Iterable[str] = ()
    ) -> BenchOptions:
        """From the command's parsed parameters by name (a name this class lacks is an error)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - names)
        if unknown:
            raise TypeError(f"BenchOptions has no field {', '.join(unknown)}")
        return cls(**params, given=frozenset(given), extra=tuple(extra))

    def typed(self, name: str) -> bool:
        """Whether option `name` was typed on the command line."""
        return name in self.given

    def arm_options(self) -> dict[str, Any]:
        """What every arm's requests carry: the served model, the API key, the endpoint."""
        return {"model": self.model, "api_key": self.api_key, "chat": self.chat}


def workload_name(prompts_spec: str) -> str:
    """A built-in set's name, or the prompt file's name (the report and the table name it)."""
    return prompts_spec if prompts_spec in workloads.BUILTIN_SETS else Path(prompts_spec).name
