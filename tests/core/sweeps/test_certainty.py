"""How sure the sweep advisor is (`core.sweeps.certainty`): intervals from redrawing the runs, the
acceptance shift between ks, "measure it" only where an interval admits a win, measured ks first."""

from __future__ import annotations

import random

import pytest

from mtpwatch.core.ab.plan import BenchConfig, RunUnits, build_plan
from mtpwatch.core.ab.records import RunRecord
from mtpwatch.core.ab.report import build_report
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.sweeps.acceptance import acceptance_scale, acceptance_source
from mtpwatch.core.sweeps.advisor import KMeasure, SweepAdvice, advise_sweep, fit_ratios
from mtpwatch.core.sweeps.certainty import (
    AcceptanceShift,
    Certainty,
    KSample,
    PairSample,
    acceptance_shifts,
    certainty,
    step_ratio_spread,
)
from mtpwatch.core.sweeps.sweep import sweep_from_reports
from mtpwatch.render.sweep_table import format_sweep

#: The truth of the synthetic sweeps: conditional acceptance 0.9, 0.7, 0.5, 0.3, 0.2, 0.15.
BASE = (0.9, 0.63, 0.315, 0.0945, 0.0189, 0.0028)


def _truth_speedup(k: int) -> float:
    """τ(k) / ρ(k) with ρ = 1.1 + 0.05·k."""
    return (1.0 + sum(BASE[:k])) / (1.1 + 0.05 * k)


def _sample(k: int, noise: float, seed: int, shift: float = 0.0, pairs: int = 4) -> KSample:
    """Three prompts × `pairs` pairs; the speed-up jittered by ±`noise`; position acceptance read
    `shift` lower per k above 1 (the cross-k bias), with a little per-run jitter."""
    rng = random.Random(seed)
    out = []
    for prompt in range(3):
        for _ in range(pairs):
            ratio = _truth_speedup(k) * (1.0 + rng.uniform(-noise, noise))
            scale = (1.0 - shift * (k - 1)) * (1.0 + rng.uniform(-0.05, 0.05))
            per_pos = tuple(100.0 * min(1.0, a * scale) for a in BASE[:k])
            out.append(PairSample(prompt, ratio, 100.0, per_pos))
    return KSample(k, tuple(out))


def _advise(samples: dict[int, KSample], ks: list[int]) -> tuple[SweepAdvice, Certainty]:
    measures = [s.measure() for s in samples.values()]
    marginals = {k: s.marginal() for k, s in samples.items()}
    top = max(samples)
    advice = advise_sweep(
        measures, marginals[top], 20.0, ks, marginals=marginals, spread=step_ratio_spread(samples, 200)
    )
    return advice, certainty(samples, advice, ks, resamples=200)


def test_intervals_hold_the_prediction_and_widen_with_the_noise() -> None:
    ks = list(range(7))
    widths = {}
    for noise in (0.02, 0.25):
        samples = {k: _sample(k, noise, seed=k) for k in (1, 2, 4)}
        advice, sure = _advise(samples, ks)
        p3 = advice.at(3)
        lo, hi = sure.intervals[3]
        assert p3 is not None and lo <= p3.speedup <= hi
        widths[noise] = hi - lo
        assert set(sure.held_out) == {1, 2}
    assert widths[0.25] > 2 * widths[0.02]


def test_server_lives_widen_every_interval_by_their_measured_ratio() -> None:
    samples = {k: _sample(k, 0.02, seed=k) for k in (1, 2, 4)}
    measures = [s.measure() for s in samples.values()]
    marginals = {k: s.marginal() for k, s in samples.items()}
    ks = list(range(7))
    advice = advise_sweep(measures, marginals[4], 20.0, ks, marginals=marginals)
    runs_only = certainty(samples, advice, ks, resamples=300)
    lives = certainty(samples, advice, ks, resamples=300, lives=[1.2, 0.95])
    assert runs_only.lives == () and "runs only" in runs_only.scope()
    assert lives.scope() == "this sweep's runs and a new server start's (lives up to 20.0% apart)"
    assert lives.to_json()["life_ratios"] == [1.2, 0.95]
    for k in (3, 5, 6):
        lo, hi = runs_only.intervals[k]
        wide_lo, wide_hi = lives.intervals[k]
        # a life ratio of 1.2 or its reciprocal lands in the tails: the bounds move out by about it
        assert wide_lo < lo / 1.1 and wide_hi > hi * 1.1
        assert wide_lo > lo / 1.2 / 1.01 and wide_hi < hi * 1.2 * 1.01
    assert set(lives.held_out) == {1, 2}
    for k in (1, 2):
        (lo, hi), (wide_lo, wide_hi) = runs_only.held_out[k], lives.held_out[k]
        assert wide_hi - wide_lo > hi - lo
    # ratios of 1.0 change nothing
    same = certainty(samples, advice, ks, resamples=300, lives=[1.0])
    assert same.intervals == runs_only.intervals


def test_measure_it_only_where_the_interval_admits_a_win() -> None:
    # quiet runs: k=5 and k=6's intervals lie below k=4's measured speed-up (positions 5, 6 add
    # ~0.03 tokens for 0.1 of a step); noisy runs: more intervals reach above it
    samples = {k: _sample(k, 0.01, seed=k) for k in (1, 2, 4)}
    advice, sure = _advise(samples, list(range(7)))
    assert not sure.worth_measuring(6)
    verdicts = sure.verdicts(advice)
    assert any(v.startswith("k=6 predicted") and "below the measured k=4" in v for v in verdicts)
    # k=3 (truly 2.276× against k=4's 2.261×) is the one unmeasured k its interval lets win
    assert [v.split()[0] for v in verdicts if "measure it" in v] == ["k=3"]
    noisy = {k: _sample(k, 0.4, seed=10 + k) for k in (1, 2, 4)}
    advice, sure = _advise(noisy, list(range(7)))
    assert sure.best_measured is not None
    best_k, best = sure.best_measured
    wins = [k for k in (3, 5, 6) if sure.intervals[k][1] > best]
    assert wins and all(sure.worth_measuring(k) for k in wins)
    assert sum("measure it" in v for v in sure.verdicts(advice)) == len(wins)
    assert sure.to_json()["measure_it"] == wins and sure.to_json()["best_measured_k"] == best_k
    assert not sure.worth_measuring(4)  # measured: never asked for
    # every measured k slower than k=0: the baseline (1.0) is the one to beat
    slow = Certainty({3: (0.6, 0.9), 5: (0.7, 1.2)}, {1: 0.7, 4: 0.8})
    assert slow.best_measured == (0, 1.0) and [k for k in (3, 5) if slow.worth_measuring(k)] == [5]


def test_the_acceptance_shift_between_ks_is_shown() -> None:
    shift = AcceptanceShift(1, 4, 6, 0.91, 0.81, (-0.16, -0.05))
    assert shift.change == pytest.approx(0.81 / 0.91 - 1)
    assert (
        shift.line()
        == "position 1 at k=6 reads 11.0% below k=4 (0.810 vs 0.910; 95% CI −16.0% … −5.0%)".replace("−", "-")
    )
    # a sweep whose acceptance reads 4 % lower per k: every neighbouring pair shows it, with intervals
    samples = {k: _sample(k, 0.02, seed=k, shift=0.04) for k in (1, 2, 4)}
    _, sure = _advise(samples, list(range(5)))
    firsts = [s for s in sure.shifts if s.position == 1]
    assert [(s.k_low, s.k_high) for s in firsts] == [(1, 2), (2, 4)]
    for s in firsts:
        assert s.change < 0 and s.ci is not None and s.ci[0] <= s.change <= s.ci[1]
    assert "position 1 at k=2 reads" in (sure.bias_line() or "")
    # runs that repeat (temperature 0): no run-to-run interval to give, and the line says so
    same = AcceptanceShift(1, 3, 6, 0.614, 0.591, (-0.0375, -0.0375))
    assert same.line().endswith(
        "(0.591 vs 0.614; the same in every run: the runs repeat at temperature 0, "
        "the prompts are the sample)"
    )
    # positions common to both ks only
    assert {(s.position, s.k_high) for s in acceptance_shifts({2: (0.9, 0.8), 4: (0.8, 0.7, 0.6, 0.5)})} == {
        (1, 4),
        (2, 4),
    }


def test_each_k_reads_its_acceptance_from_the_nearest_measured_k_above() -> None:
    assert acceptance_source(3, [1, 2, 4]) == 4
    assert acceptance_source(1, [3, 6]) == 3 and acceptance_source(4, [3, 6]) == 6
    assert acceptance_source(7, [3, 6]) == 6
    # k=3 runs read 0.85 at position 1, k=6 runs 0.80: k=1, 2 come from k=3's, k=4 from k=6's
    at3, at6 = (0.85, 0.7, 0.5), (0.8, 0.6, 0.45, 0.3, 0.2, 0.1)
    measures = [KMeasure(3, 1.8, 1 + sum(at3)), KMeasure(6, 1.9, 1 + sum(at6))]
    plain = advise_sweep(measures, at6, 20.0, range(9), marginals={3: at3, 6: at6}, shift=False)
    p1, p2, p4 = plain.at(1), plain.at(2), plain.at(4)
    assert p1 is not None and p1.tokens_per_step == pytest.approx(1.85)
    assert p2 is not None and p2.tokens_per_step == pytest.approx(2.55)
    assert p4 is not None and p4.tokens_per_step == pytest.approx(1 + 0.8 + 0.6 + 0.45 + 0.3)
    assert plain.acceptance_from[2] == 3 and plain.acceptance_from[8] == 6
    assert (
        "each measured k its own, k=1,2 from k=3, k=4,5 from k=6, k=7,8 from k=6 (continued)" in plain.line()
    )
    # shifted: position 1 falls (0.8/0.85)^(1/3) a k from k=3 to k=6, so k=1 reads k=3's chain
    # × (0.85/0.8)^(2/3), k=4 reads k=6's × (0.85/0.8)^(2/3), k=8 k=6's × (0.8/0.85)^(2/3)
    step = (0.85 / 0.8) ** (1 / 3)
    advice = advise_sweep(measures, at6, 20.0, range(9), marginals={3: at3, 6: at6})
    assert advice.acceptance_scale[1] == pytest.approx(step**2) and advice.acceptance_scale[3] == 1.0
    assert advice.acceptance_scale[4] == pytest.approx(step**2)
    assert advice.acceptance_scale[8] == pytest.approx(step**-2)
    q1 = advice.at(1)
    assert q1 is not None and q1.tokens_per_step == pytest.approx(1 + 0.85 * step**2)
    assert advice.to_json()["acceptance_scale"]["1"] == pytest.approx(step**2, abs=1e-4)
    # one measured k: nothing to scale by
    assert acceptance_scale(2, 6, {6: at6}) == 1.0
    # without the others' marginals: the largest k's, as before
    assert advise_sweep(measures, at6, 20.0, range(3)).at(1).tokens_per_step == pytest.approx(1.8)  # type: ignore[union-attr]


def test_the_line_gives_way_to_the_table_only_outside_the_noise() -> None:
    # issue 38's CPU sweep: ρ 1.20, 1.09, 1.26 at k = 1, 2, 4 — the line misses k=2 by > 5 %
    rho = {1: 1.20, 2: 1.09, 4: 1.26}
    assert fit_ratios(rho, 20.0).kind == "table"
    wide = {1: (1.05, 1.35), 2: (0.98, 1.25), 4: (1.1, 1.4)}
    fit = fit_ratios(rho, 20.0, spread=wide)
    assert fit.kind == "linear" and fit.max_residual > 0.05
    assert "within the noise" in fit.describe() and "95% CI" in fit.describe()
    assert fit.to_json()["measured_step_ratio_ci"]["2"] == [0.98, 1.25]
    narrow = {k: (r - 0.01, r + 0.01) for k, r in rho.items()}
    assert fit_ratios(rho, 20.0, spread=narrow).kind == "table"
    assert fit_ratios(rho, 20.0, spread=narrow, kind="linear").kind == "linear"


PROMPTS = [Prompt(f"p{i}", f"prompt {i}", cat) for i, cat in enumerate(("text", "list", "code"))]


def _bench(k: int, seed: int) -> object:
    """A restart bench of k against k=0 as the runner records it, with per-run counters."""
    rng = random.Random(seed)
    config = BenchConfig(PROMPTS, runs=5, warmup=1, schedule="restart")
    records = []
    for step in build_plan(config):
        if not isinstance(step, RunUnits):
            continue
        for u in step.units:
            base = 20.0 + u.prompt
            b = u.arm == "b"
            rate = base * (_truth_speedup(k) if b else 1.0) * (1 + rng.uniform(-0.05, 0.05))
            per_pos = tuple(50.0 * a for a in BASE[:k]) if b else None
            spec = (
                {"drafts": 50.0, "draft_tokens": 50.0 * k, "accepted": sum(per_pos), "k": k}
                if per_pos
                else {}
            )
            records.append(
                RunRecord(
                    u.arm, PROMPTS[u.prompt].id, PROMPTS[u.prompt].category, u.point, u.run, u.warmup, u.pair,
                    64, 0.1, rate, rate, 1.0, 0, None, False, prompt_index=u.prompt,
                    accepted_per_pos=per_pos, **spec,  # type: ignore[arg-type]
                )
            )  # fmt: skip
    return build_report(config, records, paired=True)


def test_a_sweep_from_its_benches_prints_and_writes_the_intervals() -> None:
    report = sweep_from_reports({k: _bench(k, seed=k) for k in (1, 2, 4)})
    sure = report.certainty
    assert sure is not None and set(sure.measured) == {1, 2, 4}
    assert report.advice is not None and report.advice.fit.spread.keys() == {1, 2, 4}
    doc = report.to_json()
    rows = {r["k"]: r for r in doc["rows"]}
    assert rows[2]["predicted_speedup_ci"] is not None and rows[0]["predicted_speedup_ci"] is not None
    cert = doc["advisor_certainty"]
    assert set(cert["speedup_ci"]) >= {"3", "5", "6"} and cert["resamples"] == 1000
    assert {"position", "k_low", "k_high", "change", "change_ci"} <= set(cert["acceptance_shifts"][0])
    text = format_sweep(report, "t")
    assert "(predicted, 95% CI" in text and "acceptance across ks: position 1 at k=2 reads" in text
    assert "k=3 predicted" in text and "measured ks are preferred" in text
    # the restart benches measured the k=0 server's two lives: the intervals are widened by them
    assert sure.lives == tuple(report.baseline_lives().values()) and cert["life_ratios"]
    assert "this sweep's runs and a new server start's (lives up to" in text
    assert "extrapolated: measure it" not in text  # the intervals decide that now
    assert "held out (each k predicted from a fit over the other ks" in text and "× vs " in text
