"""Several saved bench reports side by side: the same prompts matched, differences with CIs.

Each report's speed-up is recomputed from its own runs over only the measurements that every
report has (same prompt, concurrency and forced length), so a report that ran more prompts does
not win or lose by its workload. The difference of each report to the first (the reference) is
median(B/A of this report) − median(B/A of the reference), with a seeded two-sample bootstrap CI:
two reports' runs are separate sessions, so they are not paired run by run.

Provenance that makes a comparison doubtful (GPU, vLLM version and model per arm, prompt set hash,
temperature) is compared too, and each difference is one warning line; so is a GPU or a model one
report does not record (it cannot be checked), and a report whose arms serve two models.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mtpwatch.core.ab import stats
from mtpwatch.core.provenance import MUST_BE_KNOWN, arm_warnings, comparable_fields
from mtpwatch.core.reports.reportfile import SavedReport, opt_float

Key = tuple[str, int, int | None]


class CompareError(ValueError):
    """Reports that cannot be compared; `str()` is one line."""


@dataclass(frozen=True, slots=True)
class Row:
    """One report's numbers over the matched measurements."""

    name: str
    k: int | None
    pairs: int
    a_rate: float | None
    """Median of arm A's measured speeds over the matched measurements."""
    b_rate: float | None
    speedup: stats.SpeedupSummary | None
    diff: stats.Interval | None
    """CI of median speed-up − the reference's; None for the reference itself."""
    diff_median: float | None
    acceptance_rate: float | None
    """Arm B's acceptance over all its measured runs (from the report; not re-matched)."""
    mean_acceptance_length: float | None


@dataclass(frozen=True, slots=True)
class Comparison:
    """The table `mtpwatch compare` prints."""

    rows: list[Row]
    matched: list[Key]
    """The (prompt, concurrency, length) measurements present in every report."""
    unmatched: dict[str, int]
    """Per report, how many of its measurements were left out because another report lacks them."""
    warnings: list[str]


def provenance_warnings(reports: Sequence[SavedReport]) -> list[str]:
    """The warning lines of the module docstring's last paragraph (the arms' ones: `arm_warnings`)."""
    out: list[str] = []
    missing = [r.name for r in reports if not r.meta]
    if missing:
        out.append(
            f"no provenance block in {', '.join(missing)}: GPU, vLLM version and prompt set cannot be checked"
        )
    fields = {r.name: comparable_fields(r.meta, r.data) for r in reports}
    keys = list(dict.fromkeys(k for f in fields.values() for k in f))
    for key in keys:
        values = {n: f.get(key) for n, f in fields.items()}
        known = {v for v in values.values() if v is not None}
        shown = "; ".join(f"{n}: {v if v is not None else '?'}" for n, v in values.items())
        if len(known) > 1:
            out.append(f"{key} differs between reports ({shown})")
        unknown = [n for n, v in values.items() if v is None and n not in missing]
        if len(known) <= 1 and key in MUST_BE_KNOWN and unknown:  # said once above without `meta`
            out.append(
                f"{key} not recorded in {', '.join(unknown)}: cannot check it is the same in every "
                f"report ({shown})"
            )
    for r in reports:
        arms = r.meta.get("arms")
        if isinstance(arms, Mapping):
            out.extend(f"{r.name}: {w}" for w in arm_warnings(arms))
    return out


def compare(reports: Sequence[SavedReport]) -> Comparison:
    """Compare `reports` (the first is the reference); raises `CompareError` when nothing matches."""
    if len(reports) < 2:
        raise CompareError("give at least two reports to compare")
    paired = [r.pairs() for r in reports]
    single = [r.name for r, p in zip(reports, paired, strict=True) if not p]
    if single:
        raise CompareError(
            f"{single[0]} has no measured A/B pairs (a one-server bench, or every run failed): "
            "compare needs --ab reports"
        )
    common = set.intersection(*(set(p) for p in paired))
    if not common:
        raise CompareError(
            "the reports have no measurement in common (same prompt, concurrency and length): "
            "were they run on the same prompt set?"
        )
    matched = sorted(common, key=lambda k: (k[1], -1 if k[2] is None else k[2], k[0]))
    ratios: list[list[float]] = []
    rows: list[Row] = []
    for report, pairs in zip(reports, paired, strict=True):
        base = [a for key in matched for a, _ in pairs[key]]
        treat = [b for key in matched for _, b in pairs[key]]
        ratios.append([b / a for a, b in zip(base, treat, strict=True)])
        diff = diff_median = None
        if rows:
            diff = stats.bootstrap_median_diff_ci(ratios[0], ratios[-1])
            diff_median = statistics.median(ratios[-1]) - statistics.median(ratios[0])
        arm_b = report.arm("b")
        rows.append(
            Row(
                name=report.name,
                k=report.k,
                pairs=len(base),
                a_rate=statistics.median(base),
                b_rate=statistics.median(treat),
                speedup=stats.speedup(base, treat),
                diff=diff,
                diff_median=diff_median,
                acceptance_rate=opt_float(arm_b.get("acceptance_rate")),
                mean_acceptance_length=opt_float(arm_b.get("mean_acceptance_length")),
            )
        )
    unmatched = {r.name: n for r, p in zip(reports, paired, strict=True) if (n := len(set(p) - common))}
    return Comparison(rows, matched, unmatched, provenance_warnings(reports))


def _ci(median: float | None, ci: stats.Interval, **more: Any) -> dict[str, Any]:
    return {"median": median, "ci_low": ci.low, "ci_high": ci.high, **more}


def to_json(comparison: Comparison) -> dict[str, Any]:
    """A JSON document of the comparison (`mtpwatch compare --json`)."""
    return {
        "tool": "mtpwatch compare",
        "matched": [{"prompt": p, "concurrency": c, "length": length} for p, c, length in comparison.matched],
        "unmatched": comparison.unmatched,
        "reports": [
            {
                "name": r.name,
                "k": r.k,
                "pairs": r.pairs,
                "a_tok_s_median": r.a_rate,
                "b_tok_s_median": r.b_rate,
                "speedup": None
                if r.speedup is None
                else _ci(r.speedup.median, r.speedup.ci, pairs=r.speedup.n_pairs),
                "diff_vs_reference": None
                if r.diff is None
                else _ci(r.diff_median, r.diff, method=r.diff.method),
                "acceptance_rate": r.acceptance_rate,
                "mean_acceptance_length": r.mean_acceptance_length,
            }
            for r in comparison.rows
        ],
        "warnings": comparison.warnings,
    }
