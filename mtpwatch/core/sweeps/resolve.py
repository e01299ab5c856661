"""When a sweep's data names a best k, and when it only says which ks do as well within the noise.

The rule, stated once (every table that names a best k reads it from here):

- the statistic is each k's **median paired speed-up** over k=0 with its distribution-free 95 %
  interval (`core.ab.stats.median_ci`, the bench's own); k=0 is 1.0 exactly (it is the baseline);
- the best k has the highest median (ties to the smaller k; k=0 when no median beats 1.0);
- it is **resolved** only where the lower end of its interval lies above the median of every other
  candidate (the next-best k, and 1.0 for k=0): the data then excludes the runner-up. When the best
  is k=0, it is resolved only where every k's interval lies below 1.0;
- an interval that covers less than 95 % (too few pairs: `median_ci`'s min–max) resolves nothing;
- otherwise the ks whose median lies inside the best's interval (k=0 when 1.0 does) do as well
  within the noise, and the choice is the **smallest** of them: the cheapest config the data cannot
  tell from the best (fewer drafts verified, less memory, and a smaller k's acceptance is
  measured, not truncated).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mtpwatch.core.jsonout import JsonFields, key

RULE = (
    "best k = highest median paired speed-up; named only where its 95% CI's lower end lies above the "
    "next-best k's median (k=0 counts as 1.0); otherwise the smallest k whose median lies inside the "
    "best's CI does as well within the noise"
)


@dataclass(frozen=True, slots=True)
class Estimate:
    """One k's median paired speed-up over k=0 and its 95 % interval."""

    speedup: float
    low: float
    high: float
    coverage: float = 0.95
    """What [low, high] achieves (`core.ab.stats.median_ci`): below 0.95 with too few pairs."""


@dataclass(frozen=True, slots=True)
class Choice(JsonFields):
    """What the data says at one point (one concurrency, or a sweep's one)."""

    JSON_KEYS = "best resolved within k weak"

    best: int
    """The k with the highest median (0 when none beats 1.0)."""
    within: tuple[int, ...] = field(metadata=key("within_noise"))
    """Every k the best's interval cannot tell from it, the best included, sorted (k=0 as 1.0)."""
    weak: bool = field(default=False, metadata=key("weak_interval"))
    """The best's interval covers less than 95 %: it resolves nothing, whatever it excludes."""

    @property
    def resolved(self) -> bool:
        """The best's 95 % interval excludes every other k."""
        return self.within == (self.best,) and not self.weak

    @property
    def k(self) -> int:
        """The choice: the best where resolved, else the smallest k within the noise."""
        return self.within[0]


def best_median(speedups: Mapping[int, float]) -> int:
    """The k with the highest median paired speed-up (ties to the smaller k); 0 when none beats 1.0."""
    k = max(sorted(speedups), key=lambda m: speedups[m])
    return k if speedups[k] > 1.0 else 0


def resolve(estimates: Mapping[int, Estimate]) -> Choice:
    """The choice among measured ks ≥ 1 (k=0 is always a candidate at 1.0); ValueError: no estimate."""
    if not estimates:
        raise ValueError("nothing measured")
    best_k = best_median({k: e.speedup for k, e in estimates.items()})
    if best_k == 0:
        within = [0, *(k for k, e in estimates.items() if e.high >= 1.0)]
        weak = any(e.coverage < 0.95 for e in estimates.values())
        return Choice(0, tuple(sorted(within)), weak)
    best = estimates[best_k]
    within = [k for k, e in estimates.items() if e.speedup >= best.low]
    if best.low <= 1.0:
        within.append(0)
    return Choice(best_k, tuple(sorted(set(within))), best.coverage < 0.95)


def common_choice(choices: Mapping[int, Choice]) -> int | None:
    """The smallest k within the noise of the best at every point (None: no one k is)."""
    if not choices:
        return None
    common = set.intersection(*(set(c.within) for c in choices.values()))
    return min(common) if common else None
