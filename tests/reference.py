"""Reference helpers that only tests and the tests/bench scripts use (moved out of `mtpwatch/`).

`same_samples` (NaN-tolerant sample equality), `bootstrap_median_ci` (a seeded percentile bootstrap,
compared with the order-statistic interval the bench reports), `spec_counters` (a `MetricsSnapshot`
of only the speculative counters, for arms without a /metrics page) and `simulate_request` (one
request alone through the simulator's step model, on a virtual clock).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from mtpwatch.core.ab.stats import Interval, percentile_bounds
from mtpwatch.core.metrics.parse import Sample
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.sim.physics import Physics


def same_samples(a: list[Sample], b: list[Sample]) -> bool:
    """Equality that treats NaN values as equal (NaN != NaN otherwise)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.name != y.name or x.labels != y.labels or x.timestamp != y.timestamp:
            return False
        if x.value != y.value and not (math.isnan(x.value) and math.isnan(y.value)):
            return False
    return True


def bootstrap_median_ci(
    values: Sequence[float], confidence: float = 0.95, *, resamples: int = 2000, seed: int = 0
) -> Interval:
    """Percentile bootstrap CI for the median, resampling whole pairs (their ratios) with a fixed seed."""
    if not values:
        raise ValueError("no values for a confidence interval")
    xs = [float(v) for v in values]
    rng = random.Random(seed)
    n = len(xs)
    lo, hi = percentile_bounds(
        [statistics.median(rng.choices(xs, k=n)) for _ in range(resamples)], confidence
    )
    return Interval(
        low=lo, high=hi, coverage=confidence, method=f"percentile bootstrap over pairs (seed {seed})"
    )


def spec_counters(
    drafts: float,
    draft_tokens: float,
    accepted: float,
    accepted_per_pos: tuple[float, ...],
    k: int,
    created: float | None = None,
) -> MetricsSnapshot:
    """A `MetricsSnapshot` that holds only the speculative-decoding counters of one scrape.

    For arms that have no `/metrics` page to parse: cumulative counts summed over engines, `k` the
    number of `position` labels, `created` the counters' `_created` time.
    """
    return MetricsSnapshot(
        schema="vllm",
        speculative=True,
        num_speculative_tokens=k,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted=accepted,
        accepted_per_pos=tuple(accepted_per_pos),
        created=created,
    )


@dataclass(frozen=True, slots=True)
class RequestTrace:
    """One request simulated alone on the virtual clock."""

    ttft_s: float
    """Prefill step duration (arrival → first token; no queueing)."""
    token_times: tuple[float, ...]
    """Virtual time at which each output token was emitted."""
    tokens_per_step: tuple[int, ...]
    """Tokens emitted per engine step (first entry is the prefill step's 1 token)."""
    drafts: int
    """Verify steps that carried drafts."""
    accepted: int
    """Accepted draft tokens (counted before max_tokens truncation, as vLLM does)."""
    accepted_per_pos: tuple[int, ...]
    """Drafts that accepted at least i+1 tokens."""

    @property
    def e2e_s(self) -> float:
        """Arrival → last token."""
        return self.token_times[-1] if self.token_times else 0.0

    @property
    def decode_tok_s(self) -> float:
        """(tokens − 1) / (t_last − t_first), the client-side decode rate."""
        n = len(self.token_times)
        if n < 2:
            return 0.0
        return (n - 1) / (self.token_times[-1] - self.token_times[0])


def simulate_request(
    physics: Physics, *, prompt_tokens: int, max_tokens: int, seed: int = 0, category_factor: float = 1.0
) -> RequestTrace:
    """Run one request alone through the step model (virtual time, deterministic)."""
    rng = random.Random(seed)
    now = physics.step_cost(prefill=[prompt_tokens]).seconds
    ttft = now
    times = [now]
    per_step = [1]
    drafts = accepted_total = 0
    per_pos = [0] * physics.k
    generated = 1
    while generated < max_tokens:
        context = prompt_tokens + generated
        now += physics.step_cost(decode=[context]).seconds
        emitted = 1
        if physics.spec:
            accepted = physics.sample_accepted(rng, generated, category_factor)
            drafts += 1
            accepted_total += accepted
            for i in range(accepted):
                per_pos[i] += 1
            emitted = accepted + 1
        emitted = min(emitted, max_tokens - generated)
        generated += emitted
        times.extend([now] * emitted)
        per_step.append(emitted)
    return RequestTrace(
        ttft_s=ttft,
        token_times=tuple(times),
        tokens_per_step=tuple(per_step),
        drafts=drafts,
        accepted=accepted_total,
        accepted_per_pos=tuple(per_pos),
    )
