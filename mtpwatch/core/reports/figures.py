"""The data behind each `mtpwatch plot` figure, taken from saved bench reports.

Pure: every function returns plain series (no drawing), so the terminal plots, their table
fallback and the tests read the same numbers. Per-position acceptance uses vLLM's definitions
from `mtpwatch.core.metrics.formulas` (marginal as written in the report; conditional derived).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.reports.reportfile import Interval, SavedReport, opt_float, speedup_interval


@dataclass(frozen=True, slots=True)
class LengthPoint:
    """Speed-up at one forced output length (one point of a `--lengths` sweep)."""

    concurrency: int
    length: int
    speedup: Interval


def length_sweep(report: SavedReport) -> dict[int, list[LengthPoint]]:
    """Per concurrency, the speed-up at each forced length, sorted by length."""
    out: dict[int, list[LengthPoint]] = {}
    for pt in report.data.get("points") or []:
        if not isinstance(pt, Mapping):
            continue
        length, conc = pt.get("length"), pt.get("concurrency")
        sp = speedup_interval(pt.get("speedup"))
        if not isinstance(length, int) or not isinstance(conc, int) or sp is None:
            continue
        out.setdefault(conc, []).append(LengthPoint(conc, length, sp))
    return {conc: sorted(points, key=lambda p: p.length) for conc, points in out.items()}


def break_even_verdicts(report: SavedReport) -> dict[int, str]:
    """The bench's own break-even verdict per concurrency (already computed when it ran)."""
    out: dict[int, str] = {}
    for conc, be in (report.data.get("break_even") or {}).items():
        if isinstance(be, Mapping) and isinstance(be.get("verdict"), str):
            try:
                out[int(conc)] = be["verdict"]
            except ValueError:
                continue
    return out


@dataclass(frozen=True, slots=True)
class CategoryPoint:
    """Speed-up of one category at the report's primary point."""

    category: str
    speedup: Interval
    acceptance_rate: float | None
    """Arm B's acceptance rate in this category."""


def category_speedups(report: SavedReport) -> list[CategoryPoint]:
    """Per category, in the report's order (categories without a speed-up are left out)."""
    out: list[CategoryPoint] = []
    for name, group in (report.data.get("categories") or {}).items():
        if not isinstance(group, Mapping) or (sp := speedup_interval(group.get("speedup"))) is None:
            continue
        b = (group.get("arms") or {}).get("b") or {}
        out.append(CategoryPoint(str(name), sp, opt_float(b.get("acceptance_rate"))))
    return out


@dataclass(frozen=True, slots=True)
class RunSeries:
    """One arm's measured speed per run, in the order the runs finished."""

    order: list[int]
    """Index of each run in the report's run list (both arms share one axis)."""
    rate: list[float]


def run_series(report: SavedReport) -> dict[str, RunSeries]:
    """Per arm, speed per successful measured run in run order (drift shows as a slope)."""
    out: dict[str, RunSeries] = {}
    for r in report.runs:
        if r.rate is None or r.error or r.warmup:
            continue
        s = out.setdefault(r.arm, RunSeries([], []))
        s.order.append(r.order)
        s.rate.append(r.rate)
    return out


@dataclass(frozen=True, slots=True)
class PositionCurve:
    """Per-position acceptance of one arm: marginal (vLLM's) and conditional."""

    marginal: tuple[float, ...]
    """P(the first i+1 drafts were all accepted) = Δaccepted_per_pos[i] / Δdrafts."""
    conditional: tuple[float | None, ...]
    """P(draft i accepted | drafts 0..i−1 accepted) = marginal[i] / marginal[i−1]."""
    mean_acceptance_length: float | None


def position_curves(report: SavedReport) -> dict[str, PositionCurve]:
    """Per arm with speculative decoding, its per-position curve from the report."""
    out: dict[str, PositionCurve] = {}
    for arm in ("a", "b"):
        data = report.arm(arm)
        marginal = data.get("per_position")
        if not isinstance(marginal, list) or not marginal:
            continue
        values = tuple(float(x) for x in marginal if isinstance(x, int | float))
        mal = opt_float(data.get("mean_acceptance_length"))
        out[arm] = PositionCurve(values, F.conditional_from_marginal(values), mal)
    return out


@dataclass(frozen=True, slots=True)
class KPoint:
    """Speed-up of one report of a k sweep."""

    k: int
    speedup: Interval
    name: str
    mean_acceptance_length: float | None


@dataclass(frozen=True, slots=True)
class ContextPoint:
    """Acceptance and speed-up at one prompt length of a context-length sweep (arm B, else A)."""

    length: int
    acceptance_rate: float | None
    per_position: tuple[float, ...]
    speedup: Interval | None


def context_sweep(reports: Sequence[SavedReport]) -> list[ContextPoint]:
    """One point per report of a context-length sweep (`reportfile.CONTEXT_KIND`), by length."""
    out: list[ContextPoint] = []
    for r in reports:
        n = r.data.get("context_length")
        if not isinstance(n, int):
            continue
        arm = r.arm("b") or r.arm("a")
        pos = arm.get("per_position")
        per_position = (
            tuple(float(x) for x in pos if isinstance(x, int | float)) if isinstance(pos, list) else ()
        )
        out.append(ContextPoint(n, opt_float(arm.get("acceptance_rate")), per_position, r.speedup))
    return sorted(out, key=lambda p: p.length)


def k_sweep(reports: Sequence[SavedReport]) -> list[KPoint]:
    """One point per report that has both a k and a speed-up, sorted by k."""
    points = [
        KPoint(r.k, sp, r.name, opt_float(r.arm("b").get("mean_acceptance_length")))
        for r in reports
        if r.k is not None and (sp := r.speedup) is not None
    ]
    return sorted(points, key=lambda p: p.k)
