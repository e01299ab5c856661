"""The k advisor's arithmetic: tokens per step from marginal acceptance, step time linear in k'."""

from __future__ import annotations

import pytest

from mtpwatch.core.sweeps.acceptance import extend_marginal, geometric_conditional
from mtpwatch.core.sweeps.advisor import (
    KMeasure,
    advise,
    advise_sweep,
    fit_step_model,
)


def test_tokens_per_step_and_rates_follow_the_model() -> None:
    marginal = [0.8, 0.6, 0.4, 0.2]
    advice = advise(marginal, step_s=0.030, baseline_step_s=0.020)
    assert [p.k for p in advice.predictions] == [0, 1, 2, 3, 4]
    assert advice.per_position_cost_s == pytest.approx(0.0025)
    p2 = advice.at(2)
    assert p2 is not None
    assert p2.tokens_per_step == pytest.approx(2.4)
    assert p2.step_s == pytest.approx(0.025)
    assert p2.decode_tok_s == pytest.approx(2.4 / 0.025)
    assert p2.speedup == pytest.approx(2.4 / 0.025 * 0.020)
    # at the running k the prediction reproduces the measured rate; at k=0 the baseline
    p4, p0 = advice.at(4), advice.at(0)
    assert p4 is not None and p4.decode_tok_s == pytest.approx(3.0 / 0.030)
    assert p0 is not None and p0.decode_tok_s == pytest.approx(50.0)
    assert advice.best_k == 3  # 2.8 tokens / 27.5 ms beats 3.0 / 30 ms


def test_the_best_k_is_smaller_when_late_positions_do_not_pay_for_their_cost() -> None:
    advice = advise([0.7, 0.4, 0.1, 0.02], step_s=0.060, baseline_step_s=0.020)
    rates = {p.k: p.decode_tok_s for p in advice.predictions}
    assert advice.best_k == max(rates, key=lambda k: rates[k]) == 1


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        advise([], 0.03, 0.02)
    with pytest.raises(ValueError, match="positive"):
        advise([0.5], 0.0, 0.02)
    with pytest.raises(ValueError, match="between 0 and the running k=2"):
        advise([0.5, 0.3], 0.03, 0.02, ks=[4])


# --- a sweep: the step model from every measured k ----------------------------------------------


def test_a_linear_sweep_recovers_the_fixed_and_the_per_position_cost() -> None:
    # t0 = 10 ms, s = 2 ms, c = 3 ms: t(1) = 15, t(2) = 18, t(4) = 24 ms; τ = 1.8, 2.4, 3.2
    # paired speed-ups τ·t0/t: 1.2, 1.3333…, 1.3333…
    measures = [KMeasure(1, 1.2, 1.8), KMeasure(2, 2.4 / 1.8, 2.4), KMeasure(4, 3.2 / 2.4, 3.2)]
    fit = fit_step_model(measures, baseline_tok_s=100.0)
    assert fit.kind == "linear" and fit.max_residual == pytest.approx(0.0, abs=1e-12)
    assert fit.fixed_s == pytest.approx(0.002) and fit.per_position_s == pytest.approx(0.003)
    assert fit.ratio(3) == pytest.approx(2.1)  # (10 + 2 + 9) / 10
    assert fit.ratio(6) == pytest.approx(3.0)  # above k=4 the line goes on: (10 + 2 + 18) / 10
    marginal = [0.8, 0.6, 0.5, 0.3]  # τ(1) 1.8, τ(2) 2.4, τ(3) 2.9, τ(4) 3.2
    advice = advise_sweep(measures, marginal, 100.0, [0, 1, 2, 3, 4])
    p3 = advice.at(3)
    assert p3 is not None and p3.speedup == pytest.approx(2.9 / 2.1)
    assert p3.decode_tok_s == pytest.approx(100.0 * 2.9 / 2.1) and not p3.extrapolated
    assert advice.best_k == 3  # 1.381 beats 1.333 at k=2 and k=4
    assert "s 2.00 ms, c 3.00 ms" in fit.describe()


def test_one_k_cannot_separate_the_fixed_cost() -> None:
    fit = fit_step_model([KMeasure(2, 2.4 / 1.8, 2.4)], baseline_tok_s=100.0)
    # ρ(2) = 1.8: all of it charged to the slope, (1.8 − 1) / 2
    assert fit.kind == "two-point" and fit.fixed == 0.0 and fit.per_position == pytest.approx(0.4)
    assert "not separable" in fit.describe()


def test_the_issue_figures_are_not_linear_and_fall_back_to_the_measured_table() -> None:
    # issue 20's real vLLM CPU sweep (ngram, Gemma 3 270M): k = 0…4 at 19.5, 28.6, 45.7, 47.6, 53.6
    # tok/s, mean lengths 1.89, 2.70, 3.28, 4.40; speed-ups here without drift (rate / 19.5)
    rates = {1: 28.6, 2: 45.7, 3: 47.6, 4: 53.6}
    taus = {1: 1.89, 2: 2.70, 3: 3.28, 4: 4.40}
    measures = [KMeasure(k, rates[k] / 19.5, taus[k]) for k in rates]
    fit = fit_step_model(measures, baseline_tok_s=19.5)
    # step times τ/rate: 66.08, 59.08, 68.91, 82.09 ms against t0 = 51.28 ms; by hand:
    # ρ = 1.28864, 1.15208, 1.34370, 1.60075; mean k 2.5, mean ρ 1.34629, Sxx 5,
    # Sxy = −1.5·(−0.05765) − 0.5·(−0.19421) + 0.5·(−0.00259) + 1.5·0.25446 = 0.56397
    # γ = 0.112795, 1 + σ = 1.34629 − 2.5·0.112795 = 1.06430
    assert fit.per_position == pytest.approx(0.112795, abs=2e-5)
    assert fit.fixed == pytest.approx(0.06430, abs=5e-5)
    assert fit.per_position_s == pytest.approx(0.112795 / 19.5, rel=2e-4)  # 5.78 ms a position
    # the line at k=2 is 1.28989 against 1.15208 measured: +12 %, so the table is used
    assert fit.residuals[2] == pytest.approx(1.28989 / 1.15208 - 1, abs=2e-4)
    assert fit.kind == "table" and "not linear" in fit.describe()
    assert fit.ratio(2) == pytest.approx(1.15208, abs=1e-4)
    # the k=0 the advisor uses is the row's 19.5, whatever pair the top k ran against
    advice = advise_sweep(measures, [0.89, 0.81, 0.58, 1.12], 19.5, [0, 1, 2, 3, 4, 5])
    p0 = advice.at(0)
    assert p0 is not None and p0.decode_tok_s == pytest.approx(19.5)
    p4, p5 = advice.at(4), advice.at(5)
    assert p4 is not None and p4.decode_tok_s == pytest.approx(19.5 * 4.40 / 1.60075, rel=1e-4)
    assert p5 is not None and p5.extrapolated and not p4.extrapolated


def test_geometric_conditional_continues_the_chain() -> None:
    # conditional 0.8, 0.72, 0.648 (β = 0.9): marginal 0.8, 0.576, 0.373248
    alpha, beta = geometric_conditional([0.8, 0.576, 0.373248])
    assert alpha == pytest.approx(0.8) and beta == pytest.approx(0.9)
    chain = extend_marginal([0.8, 0.576, 0.373248], 5)
    assert chain[3] == pytest.approx(0.373248 * 0.5832)
    assert chain[4] == pytest.approx(0.373248 * 0.5832 * 0.52488)
    assert extend_marginal([0.8, 0.576], 1) == (0.8,)
    assert geometric_conditional([0.6]) == (pytest.approx(0.6), 1.0)
    with pytest.raises(ValueError, match="accepted nothing"):
        geometric_conditional([0.5, 0.0])


def test_extrapolated_predictions_and_bad_sweeps() -> None:
    measures = [KMeasure(1, 1.2, 1.8), KMeasure(2, 2.4 / 1.8, 2.4)]
    advice = advise_sweep(measures, [0.8, 0.6], 100.0, [0, 1, 2, 3])
    p3 = advice.at(3)
    # conditional 0.8, 0.75 → α 0.8, β 0.9375; a3 = 0.6·0.8·0.9375² = 0.421875;
    # ρ(1) = 1.8/1.2 = 1.5, ρ(2) = 1.8: the line 1.2 + 0.3·k, so ρ(3) = 2.1
    assert p3 is not None and p3.extrapolated
    assert p3.tokens_per_step == pytest.approx(2.4 + 0.421875)
    assert p3.speedup == pytest.approx(2.821875 / 2.1)
    assert advice.to_json()["predictions"][3]["extrapolated"] is True
    with pytest.raises(ValueError, match="ks ≥ 1"):
        fit_step_model([], 100.0)
    with pytest.raises(ValueError, match="positive"):
        fit_step_model([KMeasure(1, 0.0, 1.5)], 100.0)
    with pytest.raises(ValueError, match="once"):
        fit_step_model([KMeasure(1, 1.2, 1.8), KMeasure(1, 1.1, 1.8)], 100.0)


def test_held_out_predicts_each_k_from_the_others() -> None:
    # the real CPU sweep of tests/real_vllm/test_sweep_real.py on a loaded machine: k=1 1.25x
    # (τ 2.0), k=2 1.15x (τ 3.0), ngram accepting everything. With both ks the line is exact;
    # held out, k=1 comes from k=2 alone: γ = (3.0/1.15 − 1)/2 = 0.80435, ρ(1) = 1.80435,
    # speed-up 2.0/1.80435 = 1.10843 (−11.3 % against 1.25)
    measures = [KMeasure(1, 1.25, 2.0), KMeasure(2, 1.15, 3.0)]
    advice = advise_sweep(measures, [1.0, 1.0], 11.03, [0, 1, 2])
    p1 = advice.at(1)
    assert p1 is not None and p1.speedup == pytest.approx(1.25)  # in-sample: exact
    assert advice.held_out == {1: pytest.approx(2.0 / (1 + (3.0 / 1.15 - 1) / 2))}
    assert advice.held_out[1] == pytest.approx(1.10843, abs=1e-5)
    assert advice.to_json()["held_out_speedup"] == {"1": 1.1084}
    # one measured k: nothing to hold out
    assert advise_sweep(measures[1:], [1.0, 1.0], 11.03, [0, 1, 2]).held_out == {}


def test_the_table_goes_on_from_its_two_nearest_ks_not_from_k0() -> None:
    """A step-time table (not linear: ρ = 1.7, 2.0, 2.6, 4.0 at k = 1…4, a fixed cost and a rising
    slope) holding k=1 out predicts it from k=2 and k=3 (2.0 − 0.6 = 1.4), not from k=0's 1.0,
    which has no fixed cost; between measured ks it interpolates; above them it goes on from the
    top two; never below a plain step."""
    rho = {1: 1.7, 2: 2.0, 3: 2.6, 4: 4.0}

    def at(ks: tuple[int, ...], r: dict[int, float] = rho) -> list[KMeasure]:
        return [KMeasure(k, (k + 1) / r[k], k + 1) for k in ks]  # full acceptance: τ = k + 1

    fit = fit_step_model(at((2, 3, 4)), baseline_tok_s=10.0)
    assert fit.kind == "table"  # the line 1.0·k − 0.133 misses k=3 by +10 %
    assert fit.ratio(1) == pytest.approx(1.4)
    assert fit.ratio(5) == pytest.approx(5.4) and fit.ratio(6) == pytest.approx(6.8)
    sparse = fit_step_model(at((1, 2, 4)), 10.0)
    assert sparse.kind == "table" and sparse.ratio(3) == pytest.approx(3.0)
    steep = fit_step_model(at((2, 3, 4), {2: 1.2, 3: 2.0, 4: 4.0}), 10.0)
    assert steep.kind == "table" and steep.ratio(1) == 1.0
    advice = advise_sweep(at((1, 2, 3, 4)), [1.0] * 4, 10.0, [0, 1, 2, 3, 4])
    assert advice.held_out[1] == pytest.approx(2.0 / 1.4)
