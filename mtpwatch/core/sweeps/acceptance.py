"""Which per-position acceptance predicts a k the sweep did not run, and how it is carried there.

A run at k measures the marginal acceptance a_1 … a_k (vLLM's per-position counters / drafts).
Predicting another k' from it has two parts:

- **the source**: the smallest measured k ≥ k' (`acceptance_source`; the least shifted), truncated
  to k' positions (the truncation rule, `core.sweeps.advisor`); above every measured k, the
  largest, its conditional acceptance a_i / a_(i−1) continued geometrically
  (`geometric_conditional`, `extend_marginal`);
- **the shift with k** (`acceptance_scale`): the same prompts read lower acceptance at a larger k
  (vllm#48892: position 1 83.4 % at k=1, 76.2 % at k=8 — drafts at a large k start more often after
  rejections, in harder text), so a source at another k is biased. A sweep measures position 1 at
  every k it ran: ln a_1(k) is interpolated linearly between the measured ks (and continued with
  the nearest segment's slope outside them), and the source's chain is scaled by
  a_1(k') / a_1(source) (every position alike, never above 1). One measured k: no scale.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence


def geometric_conditional(marginal: Sequence[float]) -> tuple[float, float]:
    """(α, β) of the conditional acceptance marginal_i / marginal_(i−1) (marginal_0 = 1) fitted as
    α·β^(i−1), i = 1 … k, by log-linear least squares (one position: β = 1); ValueError when a
    position's acceptance is zero."""
    if not marginal:
        raise ValueError("no positions to fit")
    prev, cond = 1.0, []
    for a in marginal:
        if a <= 0 or prev <= 0:
            raise ValueError("a position accepted nothing: no geometric fit")
        cond.append(min(1.0, a / prev))
        prev = a
    logs = [math.log(c) for c in cond]
    if len(logs) == 1:
        return cond[0], 1.0
    slope, intercept = statistics.linear_regression(range(len(logs)), logs)
    return math.exp(intercept), math.exp(slope)


def extend_marginal(marginal: Sequence[float], k: int) -> tuple[float, ...]:
    """The marginal acceptance of positions 1 … k: measured up to len(marginal), geometric beyond."""
    out = list(marginal[:k])
    if k <= len(marginal):
        return tuple(out)
    alpha, beta = geometric_conditional(marginal)
    for i in range(len(marginal) + 1, k + 1):
        out.append(out[-1] * min(1.0, alpha * beta ** (i - 1)))
    return tuple(out)


def acceptance_source(k: int, measured_ks: Iterable[int]) -> int:
    """The measured k whose per-position acceptance predicts τ at k: the module's source."""
    ks = sorted(measured_ks)
    return next((m for m in ks if m >= k), ks[-1])


def acceptance_scale(k: int, source: int, marginals: Mapping[int, Sequence[float]]) -> float:
    """a_1(k) / a_1(source), ln a_1 interpolated as the module says; 1 with one measured k."""
    pts = sorted((m, math.log(v[0])) for m, v in marginals.items() if v and v[0] > 0)
    if len(pts) < 2 or k == source:
        return 1.0
    return math.exp(interpolate(pts, k) - interpolate(pts, source))


def interpolate(points: Sequence[tuple[float, float]], x: float) -> float:
    """y at x on the line through two or more `points` (sorted by x): the segment around x, beyond
    the ends the nearest one continued (`acceptance_scale`'s ln a_1, the step model's table)."""
    i = min(max(bisect.bisect([p[0] for p in points], x), 1), len(points) - 1)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def chain_at(k: int, marginals: Mapping[int, Sequence[float]], shift: bool = True) -> tuple[float, ...]:
    """Positions 1 … k at k: its source's acceptance (`acceptance_source`, `extend_marginal`),
    scaled by `acceptance_scale` when `shift` (ValueError when above every measured k and a position
    accepted nothing)."""
    source = acceptance_source(k, marginals)
    chain = extend_marginal(marginals[source], k)
    scale = acceptance_scale(k, source, marginals) if shift else 1.0
    return chain if scale == 1.0 else tuple(min(1.0, x * scale) for x in chain)
