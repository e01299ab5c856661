"""The k sweep's table: measured and predicted rows sorted by k, predicted rows capped, the best k
named only where the intervals resolve it."""

from __future__ import annotations

from mtpwatch.core.sweeps.advisor import KMeasure, advise_sweep
from mtpwatch.core.sweeps.resolve import Estimate, resolve
from mtpwatch.core.sweeps.sweep import EXTRAPOLATE, K_MAX, PREDICTED_ROWS, SweepReport, SweepRow
from mtpwatch.render.sweep_table import format_sweep


def _row(
    k: int, speedup: float, ci: tuple[float, float], tau: float, marginal: tuple[float, ...]
) -> SweepRow:
    return SweepRow(k, 100.0 * speedup, 100.0, speedup, ci, 8, 0.8, tau, marginal, {})


def _report(rows: list[SweepRow]) -> SweepReport:
    top = rows[-1]
    assert top.per_position is not None and top.mean_acceptance_length is not None
    measures = [KMeasure(r.k, r.speedup or 0.0, r.mean_acceptance_length or 0.0) for r in rows]
    ks = list(range(min(top.k + EXTRAPOLATE, K_MAX) + 1))
    advice = advise_sweep(measures, top.per_position, 100.0, ks)
    base = SweepRow(0, 100.0, 100.0, 1.0, None, 0, None, None, None, {})
    choice = resolve({r.k: Estimate(r.speedup or 0.0, *(r.ci or (0.0, 0.0))) for r in rows})
    return SweepReport((base, *rows), max(rows, key=lambda r: r.speedup or 0.0).k, advice, {}, choice=choice)


def _ks(text: str) -> list[int]:
    out = []
    for line in text.splitlines():
        head = line[:3].strip()
        if head.isdigit() and ("predicted" in line or "extrapolated" in line or "%" in line):
            out.append(int(head))
    return out


def test_predicted_rows_sorted_between_the_measured_ones() -> None:
    chain = (0.9, 0.8, 0.7, 0.6)
    rows = [
        _row(1, 1.5, (1.4, 1.6), 1.9, chain[:1]),
        _row(2, 1.9, (1.8, 2.0), 2.7, chain[:2]),
        _row(4, 2.3, (2.2, 2.4), 4.0, chain),
    ]
    text = format_sweep(_report(rows), "t")
    ks = _ks(text)
    assert ks == sorted(ks) and 3 in ks and ks.index(3) == ks.index(4) - 1  # k=3 before k=4
    assert "more predicted ks" not in text


def test_a_wide_sweep_prints_a_few_predicted_rows_not_39() -> None:
    chain = tuple(0.98**i for i in range(1, 41))
    rows = [_row(40, 3.0, (2.8, 3.2), 1 + sum(chain), chain)]
    report = _report(rows)
    assert report.advice is not None and len(report.advice.predictions) == 43  # every k in the JSON
    text = format_sweep(report, "t")
    predicted = [
        line for line in text.splitlines() if line.rstrip().endswith(("(predicted)", "(extrapolated)"))
    ]
    assert len(predicted) == PREDICTED_ROWS
    ks = _ks(text)
    assert ks == sorted(ks) and 40 in ks
    assert f"({43 - 1 - 1 - PREDICTED_ROWS} more predicted ks in --json" in text  # less k=0 and k=40


def test_the_best_k_says_whether_the_intervals_resolve_it() -> None:
    chain = (0.9, 0.5)
    rows = [_row(1, 1.28, (1.09, 1.48), 1.9, chain[:1]), _row(2, 1.27, (1.09, 1.43), 2.4, chain)]
    text = format_sweep(_report(rows), "t")
    assert "best k (highest median speed-up): 1 — not resolved: k=1,2 lie within its 95% CI" in text
    assert "a fixed k=1 does as well within the noise" in text
    rows = [_row(1, 1.5, (1.45, 1.55), 1.9, chain[:1]), _row(2, 1.9, (1.8, 2.0), 2.4, chain)]
    assert "best k (highest median speed-up): 2 — resolved" in format_sweep(_report(rows), "t")
