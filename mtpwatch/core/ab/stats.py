"""Paired A/B statistics: medians, confidence intervals, CV, ABBA order and break-even.

Pure functions on lists of floats (no numpy: the inputs are tens to hundreds of numbers).
The speed-up of a pair is ``treatment / baseline`` (B / A: MTP on over MTP off), so values above
1.0 mean the treatment is faster.

Confidence interval of the median: the default is the distribution-free order-statistic interval
(the sign-test / binomial interval). For any continuous distribution its coverage is at least the
nominal level, it needs no seed, and it stays valid at the seed benchmark's 11 pairs, where the
bootstrap distribution of a median has only a handful of distinct values and under-covers.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mtpwatch.core.ab.arms import ArmName
from mtpwatch.core.jsonout import JsonFields, key, round_or_none

#: A coefficient of variation above this is flagged as "noisy" (AIPerf's threshold).
CV_FLAG = 0.10


@dataclass(frozen=True, slots=True)
class Interval:
    """A confidence interval with the coverage it actually achieves."""

    low: float
    high: float
    coverage: float
    """Achieved coverage: at least the requested level unless there are too few values."""
    method: str
    """How it was computed, in words a report can print."""


@dataclass(frozen=True, slots=True)
class Summary:
    """Location and dispersion of a list of measurements (e.g. decode tok/s per run)."""

    n: int
    median: float
    mean: float
    stdev: float
    """Sample standard deviation (n − 1); 0.0 when n < 2."""
    cv: float
    """stdev / mean; 0.0 when n < 2 or the mean is 0."""
    min: float
    max: float


def summarize(values: Sequence[float]) -> Summary:
    """Median, mean, sample standard deviation and CV of `values` (must not be empty)."""
    if not values:
        raise ValueError("no values to summarize")
    xs = [float(v) for v in values]
    mean = statistics.fmean(xs)
    stdev = statistics.stdev(xs) if len(xs) > 1 else 0.0
    cv = stdev / mean if len(xs) > 1 and mean != 0 else 0.0
    return Summary(
        n=len(xs), median=statistics.median(xs), mean=mean, stdev=stdev, cv=cv, min=min(xs), max=max(xs)
    )


def paired_ratios(baseline: Sequence[float], treatment: Sequence[float]) -> list[float]:
    """Per-pair speed-up ``treatment[i] / baseline[i]``; pairs with a non-positive baseline are skipped."""
    if len(baseline) != len(treatment):
        raise ValueError(f"unpaired data: {len(baseline)} baseline values, {len(treatment)} treatment values")
    return [t / b for b, t in zip(baseline, treatment, strict=True) if b > 0]


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X ≤ k) for X ~ Binomial(n, 1/2), exactly."""
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / float(2**n)


def median_ci(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """Distribution-free confidence interval for the median from order statistics.

    The interval is ``[x(j), x(n+1−j)]`` of the sorted values with the largest ``j`` such that
    ``2·P(Binom(n, ½) ≤ j−1) ≤ 1 − confidence``. With fewer than 6 values no such ``j`` exists at
    95 %; the interval is then ``[min, max]`` and `coverage` says how much less than asked it covers.
    """
    if not values:
        raise ValueError("no values for a confidence interval")
    xs = sorted(float(v) for v in values)
    n = len(xs)
    alpha = 1.0 - confidence
    j = 1
    while j + 1 <= (n + 1) // 2 and 2 * _binom_cdf_half(j, n) <= alpha:
        j += 1
    coverage = 1.0 - 2 * _binom_cdf_half(j - 1, n)
    return Interval(xs[j - 1], xs[n - j], coverage, "distribution-free order-statistic CI for the median")


def percentile_bounds(replicates: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The percentile bootstrap's interval: the (1 − confidence)/2 and (1 + confidence)/2 quantiles
    of the replicates (order statistics, no interpolation)."""
    if not replicates:
        raise ValueError("no replicates")
    xs = sorted(replicates)
    n, alpha = len(xs), 1.0 - confidence
    return xs[max(0, math.floor(alpha / 2 * n))], xs[min(n - 1, math.ceil((1 - alpha / 2) * n) - 1)]


def bootstrap_median_diff_ci(
    reference: Sequence[float],
    other: Sequence[float],
    confidence: float = 0.95,
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap CI of median(other) − median(reference), two independent samples.

    Each resample draws both samples again with replacement (a fixed seed: the same input gives the
    same interval). Used to compare speed-ups of two separate bench reports, whose pairs are not
    matched run by run (only prompt by prompt).
    """
    if not reference or not other:
        raise ValueError("no values for a confidence interval")
    xs = [float(v) for v in reference]
    ys = [float(v) for v in other]
    rng = random.Random(seed)
    diffs = [
        statistics.median(rng.choices(ys, k=len(ys))) - statistics.median(rng.choices(xs, k=len(xs)))
        for _ in range(resamples)
    ]
    lo, hi = percentile_bounds(diffs, confidence)
    return Interval(lo, hi, confidence, f"percentile bootstrap, two samples (seed {seed})")


@dataclass(frozen=True, slots=True)
class SpeedupSummary:
    """Paired speed-up (treatment / baseline) with its confidence interval."""

    n_pairs: int
    median: float
    ci: Interval
    mean: float
    cv: float
    ratio_of_means: float | None
    """mean(treatment) / mean(baseline): the seed article's way; shown next to the paired median."""

    def to_json(self) -> dict[str, Any]:
        """The report's `speedup` object."""
        return {
            "median": round(self.median, 4),
            "ci_low": round(self.ci.low, 4),
            "ci_high": round(self.ci.high, 4),
            "ci_coverage": round(self.ci.coverage, 4),
            "ci_method": self.ci.method,
            "mean": round(self.mean, 4),
            "cv": round(self.cv, 4),
            "ratio_of_means": round_or_none(self.ratio_of_means, 4),
            "pairs": self.n_pairs,
        }


def speedup(baseline: Sequence[float], treatment: Sequence[float]) -> SpeedupSummary:
    """Summarise paired runs: median of per-pair ratios with a distribution-free 95 % CI."""
    ratios = paired_ratios(baseline, treatment)
    if not ratios:
        raise ValueError("no valid pairs (every baseline value was zero)")
    s = summarize(ratios)
    mean_a = statistics.fmean(baseline) if baseline else 0.0
    rom = statistics.fmean(treatment) / mean_a if mean_a > 0 else None
    return SpeedupSummary(s.n, s.median, median_ci(ratios), s.mean, s.cv, ratio_of_means=rom)


def abba_order(runs: int, first: ArmName = "a") -> list[tuple[ArmName, ArmName]]:
    """Order of the two arms for each run of one prompt: AB, BA, AB, BA, ...

    Alternating which arm goes first makes a slow drift (thermals, page cache, a neighbour's job)
    add to A in half the pairs and to B in the other half, so it cancels in the paired ratios.
    """
    other: ArmName = "b" if first == "a" else "a"
    return [(first, other) if i % 2 == 0 else (other, first) for i in range(runs)]


def restart_phases(measured_runs: int) -> list[tuple[ArmName, int]]:
    """Server sessions for the restart schedule: A, then B, then A again (the ABBA of sessions).

    Returns (arm, measured runs in that session). B's two middle sessions are one session (no point
    restarting B into B); A's runs are split around it so drift during B's session affects both
    halves of A equally.
    """
    first = (measured_runs + 1) // 2
    phases: list[tuple[ArmName, int]] = [("a", first), ("b", measured_runs)]
    if measured_runs - first > 0:
        phases.append(("a", measured_runs - first))
    return phases


def restart_session(pair: int, measured_runs: int) -> int:
    """Which of A's two sessions (`restart_phases`) ran A's measured run number `pair`: 0 or 1."""
    return 0 if pair < restart_phases(measured_runs)[0][1] else 1


@dataclass(frozen=True, slots=True)
class BreakEven(JsonFields):
    """Where the speed-up against output length crosses 1.0; `to_json()`: a `break_even` entry."""

    kind: Literal["above", "always", "never", "mixed"]
    length: float | None = field(metadata=key(nd=1))
    """Interpolated output length (tokens) above which the treatment pays off; None unless kind='above'."""
    verdict: str


def break_even(points: Sequence[tuple[int, float]], treatment: str = "MTP") -> BreakEven:
    """Find the output length above which the treatment pays off, from (length, median speed-up) points.

    The crossing is interpolated linearly in log(length), because lengths are tried on a geometric
    grid (8, 32, 64, ...) and the speed-up rises smoothly in log length as the fixed per-request cost
    is amortised. "Pays off" means a median speed-up above 1.0; the crossing reported is the last one,
    above which every length tried pays off.
    """
    if not points:
        raise ValueError("no lengths to find a break-even from")
    pts = sorted((int(length), float(s)) for length, s in points)
    wins = [s > 1.0 for _, s in pts]
    tried = ", ".join(str(length) for length, _ in pts)
    if all(wins):
        return BreakEven("always", None, f"{treatment} pays off at every length tried ({tried} tokens)")
    if not any(wins):
        return BreakEven("never", None, f"{treatment} never pays off at the lengths tried ({tried} tokens)")
    if not wins[-1]:
        good = ", ".join(str(length) for (length, _), w in zip(pts, wins, strict=True) if w)
        return BreakEven(
            "mixed",
            None,
            f"{treatment} pays off only at some lengths ({good} tokens), "
            f"not at the longest tried ({pts[-1][0]})",
        )
    j = len(pts) - 1
    while j > 0 and wins[j - 1]:
        j -= 1
    (l0, s0), (l1, s1) = pts[j - 1], pts[j]
    t = (1.0 - s0) / (s1 - s0)
    length = math.exp(math.log(l0) + t * (math.log(l1) - math.log(l0)))
    return BreakEven("above", length, f"{treatment} pays off above ~{length:.0f} output tokens here")
