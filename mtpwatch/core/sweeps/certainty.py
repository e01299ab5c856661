"""How sure the sweep advisor is: intervals on its predictions, and how acceptance moves with k.

Both inputs of `advisor.advise_sweep` are noisy: each k's median paired speed-up (a dozen pairs on
a loaded CPU spreads ±10–30 %) and its per-position acceptance (a few hundred drafts). Both are
resampled together:

- **the resample**: each measured k's pairs (its run against its own k=0 run, same prompt and run
  number) are drawn again with replacement *within each prompt* (the later measurement asks the
  same prompts), `RESAMPLES` times with a fixed seed; each draw recomputes the k's median paired
  speed-up, mean acceptance length and per-position acceptance (`KSample`), refits the step model
  (the point estimate's kind, line or table, kept) and predicts every k again;
- **the interval** of a prediction, and of each measured ρ(k) = t(k)/t0, is the 2.5 and 97.5
  percentiles of its draws (`core.ab.stats.percentile_bounds`); the step model uses the table only
  where the line lies outside ρ's (`advisor.fit_ratios`);
- **measure it** only where an unmeasured k's interval reaches above the best measured k's median
  speed-up. The best k is chosen among the measured ks (`core.sweeps.resolve`): a prediction never
  replaces one;
- **acceptance across ks**: position i's acceptance at two ks on the same prompts shifts
  (`core.sweeps.acceptance`, vllm#48892). Each pair of neighbouring measured ks gives its relative
  change with its interval ("position 1 at k=6 reads 11 % below k=4"): the bias of predicting a
  smaller k from a larger one, which the advisor limits by reading each k from the nearest above;
- **server lives**: a later measurement runs on new starts of both servers, and two starts of one
  server differ (`sweep.baseline_lives`; up to 6 % on a quiet CPU build, 20–39 % on a loaded one).
  Where the sweep measured lives, each drawn prediction is multiplied by a life ratio drawn from
  them and their reciprocals: if a k server's lives vary as the k=0 server's, its new life over the
  k=0 server's new life is distributed as the k=0 server's second life over its first. Without
  measured lives the interval covers this sweep's runs only, and says so (`Certainty.lives`).
"""

from __future__ import annotations

import itertools
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from mtpwatch.core.ab.records import match_pairs
from mtpwatch.core.ab.stats import percentile_bounds
from mtpwatch.core.jsonout import JsonFields, key
from mtpwatch.core.sweeps.advisor import KMeasure, SweepAdvice, advise_sweep
from mtpwatch.core.sweeps.resolve import best_median

#: Resamples of the bootstrap (seeded: the same sweep gives the same intervals).
RESAMPLES = 1000
CONFIDENCE = 0.95
SEED = 0


@dataclass(frozen=True, slots=True)
class PairSample:
    """One measured pair at k: the k run's rate over its k=0 run's, and the k run's counter deltas."""

    prompt: int
    ratio: float
    drafts: float
    accepted_per_pos: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class KSample:
    k: int
    pairs: tuple[PairSample, ...]

    def measure(self) -> KMeasure:
        """Median paired speed-up and mean acceptance length 1 + Σaccepted / Σdrafts."""
        return KMeasure(self.k, statistics.median(p.ratio for p in self.pairs), 1.0 + sum(self.marginal()))

    def marginal(self) -> tuple[float, ...]:
        """Σaccepted_i / Σdrafts per position (vLLM's per-position formula over the runs)."""
        drafts = sum(p.drafts for p in self.pairs)
        sums = [sum(p.accepted_per_pos[i] for p in self.pairs) for i in range(self.k)]
        return tuple(x / drafts for x in sums) if drafts > 0 else tuple(0.0 for _ in sums)

    def resample(self, rng: random.Random) -> KSample:
        """The pairs drawn again with replacement, prompt by prompt."""
        out: list[PairSample] = []
        for prompt in sorted({p.prompt for p in self.pairs}):
            group = [p for p in self.pairs if p.prompt == prompt]
            out.extend(rng.choices(group, k=len(group)))
        return KSample(self.k, tuple(out))


def samples_of(k: int, report: Any) -> KSample | None:
    """The measured pairs of a k's bench report at its primary point (None: no usable pair)."""
    point = report.config.primary
    pairs = []
    for a, b in match_pairs(report.records):
        if a.point != point or a.warmup or b.warmup or a.error or b.error:
            continue
        if not a.rate or b.rate is None or not b.drafts or b.accepted_per_pos is None:
            continue
        if len(b.accepted_per_pos) != k:
            continue
        pairs.append(PairSample(b.prompt_index, b.rate / a.rate, b.drafts, tuple(b.accepted_per_pos)))
    return KSample(k, tuple(pairs)) if pairs else None


@dataclass(frozen=True, slots=True)
class AcceptanceShift(JsonFields):
    """Position i's acceptance at a larger k against a smaller one, on the same prompts."""

    JSON_KEYS = "position k_low k_high at_low at_high change ci"
    JSON_PROPS = {"change": key(nd=4)}

    position: int
    """1-based."""
    k_low: int
    k_high: int
    at_low: float = field(metadata=key(nd=4))
    at_high: float = field(metadata=key(nd=4))
    ci: tuple[float, float] | None = field(metadata=key("change_ci", nd=4))
    """95 % interval of the relative change (bootstrap over runs)."""

    @property
    def change(self) -> float:
        """at_high / at_low − 1 (negative: the larger k reads low)."""
        return self.at_high / self.at_low - 1.0 if self.at_low > 0 else 0.0

    def line(self) -> str:
        """'position 1 at k=6 reads 11.0% below k=4 (0.81 vs 0.91; 95% CI −16.0% … −5.0%)'."""
        word = "below" if self.change < 0 else "above"
        ci = f"; 95% CI {100 * self.ci[0]:+.1f}% … {100 * self.ci[1]:+.1f}%" if self.ci else ""
        if self.ci and self.ci[1] - self.ci[0] < 5e-4:  # every run of a prompt drafted alike
            ci = "; the same in every run: the runs repeat at temperature 0, the prompts are the sample"
        return (
            f"position {self.position} at k={self.k_high} reads {100 * abs(self.change):.1f}% {word} "
            f"k={self.k_low} ({self.at_high:.3f} vs {self.at_low:.3f}{ci})"
        )


def _shift_values(marginals: Mapping[int, Sequence[float]]) -> dict[tuple[int, int, int], float]:
    """(position, k_low, k_high) → relative change, for neighbouring measured ks, every common position."""
    return {
        (i + 1, lo, hi): marginals[hi][i] / marginals[lo][i] - 1.0
        for lo, hi in itertools.pairwise(sorted(marginals))
        for i in range(lo)
        if marginals[lo][i] > 0
    }


def acceptance_shifts(
    marginals: Mapping[int, Sequence[float]],
    draws: Sequence[Mapping[int, Sequence[float]]] = (),
) -> tuple[AcceptanceShift, ...]:
    """Every common position's change between neighbouring measured ks; intervals from `draws`
    (the bootstrap's resampled marginals) where given."""
    values = _shift_values(marginals)
    drawn = [_shift_values(d) for d in draws]
    out = []
    for (pos, lo, hi), _ in sorted(values.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        reps = [d[(pos, lo, hi)] for d in drawn if (pos, lo, hi) in d]
        ci = percentile_bounds(reps, CONFIDENCE) if reps else None
        out.append(AcceptanceShift(pos, lo, hi, marginals[lo][pos - 1], marginals[hi][pos - 1], ci))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Certainty(JsonFields):
    """The advisor's intervals, the acceptance shifts between ks, and which ks are worth measuring."""

    JSON_KEYS = "method confidence resamples intervals held_out best_measured_k measure_it shifts lives"
    confidence: ClassVar[float] = CONFIDENCE

    intervals: Mapping[int, tuple[float, float]] = field(metadata=key("speedup_ci", nd=4, str_keys=True))
    """Per predicted k, the 95 % interval of the predicted paired speed-up."""
    measured: Mapping[int, float]
    """Each measured k's median paired speed-up (what a prediction must beat to be worth a run)."""
    shifts: tuple[AcceptanceShift, ...] = field(default=(), metadata=key("acceptance_shifts"))
    resamples: int = RESAMPLES
    method: str = "percentile bootstrap over runs, within each prompt"
    held_out: Mapping[int, tuple[float, float]] = field(
        default_factory=dict, metadata=key("held_out_speedup_ci", nd=4, str_keys=True)
    )
    """Per measured k below the largest, the interval of its held-out prediction."""
    lives: tuple[float, ...] = field(default=(), metadata=key("life_ratios", nd=4))
    """The k=0 server's measured life ratios the intervals were widened by (empty: not widened)."""

    def scope(self) -> str:
        if not self.lives:
            return "this sweep's runs only, not a new server start's"
        spread = max(abs(r - 1.0) for r in self.lives)
        return f"this sweep's runs and a new server start's (lives up to {100 * spread:.1f}% apart)"

    @property
    def best_measured(self) -> tuple[int, float] | None:
        """(k, median speed-up) of the fastest measured k, k=0 (the baseline, 1.0) among them."""
        if not self.measured:
            return None
        k = best_median(self.measured)  # `core.sweeps.resolve`'s best
        return k, self.measured.get(k, 1.0)

    @property
    def best_measured_k(self) -> int | None:
        return self.best_measured[0] if self.best_measured else None

    @property
    def measure_it(self) -> list[int]:
        return [k for k in sorted(self.intervals) if self.worth_measuring(k)]

    def worth_measuring(self, k: int) -> bool:
        """An unmeasured k whose interval reaches above the best measured k's median."""
        best, ci = self.best_measured, self.intervals.get(k)
        return k not in self.measured and k > 0 and best is not None and ci is not None and ci[1] > best[1]

    def verdicts(self, advice: SweepAdvice) -> list[str]:
        """One line per unmeasured predicted k ≥ 1 up to twice the largest measured: its interval and
        whether it could beat the best measured k."""
        best = self.best_measured
        if best is None:
            return []
        top = max(self.measured)
        lines = []
        for p in advice.predictions:
            if p.k == 0 or p.k in self.measured or p.k > 2 * top or p.k not in self.intervals:
                continue
            lo, hi = self.intervals[p.k]
            head = f"k={p.k} predicted {p.speedup:.2f}× [{lo:.2f}, {hi:.2f}]"
            if self.worth_measuring(p.k):
                lines.append(f"{head}: could beat the measured k={best[0]} ({best[1]:.2f}×): measure it")
            else:
                lines.append(f"{head}: below the measured k={best[0]} ({best[1]:.2f}×) across its interval")
        return lines

    def bias_line(self) -> str | None:
        """Position 1's shift between each pair of neighbouring measured ks, in one line."""
        first = [s for s in self.shifts if s.position == 1]
        return "acceptance across ks: " + "; ".join(s.line() for s in first) if first else None


def step_ratio_spread(
    samples: Mapping[int, KSample], resamples: int = RESAMPLES
) -> dict[int, tuple[float, float]]:
    """Each measured k's ρ(k) = τ_k / S_k interval (bootstrap over its runs)."""
    out = {}
    for k, sample in sorted(samples.items()):
        rng = random.Random(SEED + k)
        reps = [sample.resample(rng).measure().step_ratio for _ in range(resamples)]
        out[k] = percentile_bounds(reps, CONFIDENCE)
    return out


def certainty(
    samples: Mapping[int, KSample],
    advice: SweepAdvice,
    ks: Sequence[int],
    resamples: int = RESAMPLES,
    lives: Sequence[float] = (),
) -> Certainty:
    """The intervals of `advice`'s predictions and held-out figures, redrawing every measured k's runs
    and, with `lives` (the k=0 server's life ratios), a new server start's ratio for each figure."""
    rng = random.Random(SEED)
    life = [f for r in lives if r > 0 for f in (r, 1.0 / r)] or [1.0]
    top = max(samples)
    kind: Literal["linear", "table"] | None = advice.fit.kind if advice.fit.kind != "two-point" else None
    draws: dict[int, list[float]] = {}
    held: dict[int, list[float]] = {}
    marginal_draws = []
    for _ in range(resamples):
        drawn = {k: s.resample(rng) for k, s in samples.items()}
        marginals = {k: d.marginal() for k, d in drawn.items()}
        marginal_draws.append(marginals)
        try:
            again = advise_sweep(
                [d.measure() for d in drawn.values()], marginals[top], advice.baseline_tok_s, ks,
                advice.fit if advice.serving_fit is not None else None, marginals=marginals, kind=kind,
            )  # fmt: skip
        except ValueError:
            continue
        for p in again.predictions:
            draws.setdefault(p.k, []).append(p.speedup * rng.choice(life))
        for k, v in again.held_out.items():
            held.setdefault(k, []).append(v * rng.choice(life))
    return Certainty(
        {k: percentile_bounds(v, CONFIDENCE) for k, v in draws.items()},
        {k: s.measure().speedup for k, s in samples.items()},
        acceptance_shifts({k: s.marginal() for k, s in samples.items()}, marginal_draws),
        resamples,
        held_out={k: percentile_bounds(v, CONFIDENCE) for k, v in held.items()},
        lives=tuple(r for r in lives if r > 0),
    )
