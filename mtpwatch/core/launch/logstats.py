"""vLLM's periodic stats line, as its Python API server and its Rust frontend word it.

Every ``VLLM_LOG_STATS_INTERVAL`` (10 s) a busy server logs its throughput, queue and KV cache use. The
two API servers word it differently (read in the released sources; docs/vllm-startup-lines.md):

- Python (0.32, 0.33, 0.34; `vllm/v1/metrics/loggers.py:282-339`, logged at :335):
  ``Engine 000: Avg prompt throughput: 2.7 tokens/s, Avg generation throughput: 12.8 tokens/s,
  Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%``
  (``CPU KV cache usage`` on the CPU build; ``Deferred``, ``KV fetch`` and ``Preemptions`` parts only
  when non-zero, the prefix-cache part only once it was queried).
- Rust frontend (0.33, 0.34; `rust/src/llm/src/log_stats.rs:262-300` of the 0.34.0 sdist):
  ``Avg prompt tput: 2.7 toks/s, Avg generation tput: 12.8 toks/s, Reqs Running: 0, Waiting: 0,
  GPU KV cache used: 0.0%, Prefix cache hit rate: 0.0%`` (no engine prefix: one line for all engines).

Its ``SpecDecoding metrics:`` line has the same text in both (`vllm/v1/spec_decode/metrics.py:120`,
`log_stats.rs:302-329`), parsed by `logparse.parse_spec_line`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_NUM = r"([0-9]+(?:\.[0-9]+)?)"
_PYTHON = re.compile(
    r"(?:Engine (?P<engine>\d+): )?Avg prompt throughput: " + _NUM + r" tokens/s, Avg generation throughput: "
    r"" + _NUM + r" tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs\b"
)
_PYTHON_KV = re.compile(r"(?:GPU|CPU|XPU|TPU|\w+) KV cache usage: " + _NUM + "%")
_RUST = re.compile(
    r"Avg prompt tput: " + _NUM + r" toks/s, Avg generation tput: " + _NUM + r" toks/s, "
    r"Reqs Running: (\d+), Waiting: (\d+)\b"
)
_RUST_KV = re.compile(r"GPU KV cache used: " + _NUM + "%")
_PREFIX_HIT = re.compile(r"(?<!External )Prefix cache hit rate: " + _NUM + "%")
Frontend = Literal["python", "rust"]
#: Per API server: the words its stats line starts with, the line (its last four groups: prompt and
#: generation tokens/s, running and waiting requests) and its KV cache part.
_FRONTENDS: tuple[tuple[str, Frontend, re.Pattern[str], re.Pattern[str]], ...] = (
    ("Avg prompt tput: ", "rust", _RUST, _RUST_KV),
    ("Avg prompt throughput: ", "python", _PYTHON, _PYTHON_KV),
)


@dataclass(frozen=True, slots=True)
class StatsLine:
    frontend: Frontend
    """Which API server wrote it (their wording differs)."""
    prompt_tok_s: float
    """Prompt tokens per second over the interval."""
    generation_tok_s: float
    """Generated tokens per second over the interval."""
    running: int
    """Requests running at the end of the interval."""
    waiting: int
    """Requests waiting at the end of the interval."""
    kv_cache_usage: float | None
    """KV cache use as a fraction (the line prints a percentage); None when absent."""
    prefix_cache_hit_rate: float | None
    """Prefix-cache hit rate as a fraction over the interval; None when absent."""
    engine: str | None = None
    """The Python line's engine index (``000``); None on the Rust frontend's."""


def _fraction(pattern: re.Pattern[str], line: str) -> float | None:
    match = pattern.search(line)
    return float(match.group(1)) / 100.0 if match else None


def parse_stats_line(line: str) -> StatsLine | None:
    """Parse either frontend's periodic stats line; None for any other line."""
    for marker, frontend, pattern, kv in _FRONTENDS:
        if marker not in line:
            continue
        match = pattern.search(line)
        if match is None:
            return None
        prompt, generation, running, waiting = match.groups()[-4:]
        return StatsLine(
            frontend=frontend,
            prompt_tok_s=float(prompt),
            generation_tok_s=float(generation),
            running=int(running),
            waiting=int(waiting),
            kv_cache_usage=_fraction(kv, line),
            prefix_cache_hit_rate=_fraction(_PREFIX_HIT, line),
            engine=match.groupdict().get("engine"),
        )
    return None
