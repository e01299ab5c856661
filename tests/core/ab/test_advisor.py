"""The k advisor's arithmetic: tokens per step from marginal acceptance, step time linear in k'."""

from __future__ import annotations

import pytest

from mtpwatch.core.ab.advisor import advise, step_time_from_rate


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
    assert "best k=1" in advice.line()
    assert advice.to_json()["best_k"] == 1


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        advise([], 0.03, 0.02)
    with pytest.raises(ValueError, match="positive"):
        advise([0.5], 0.0, 0.02)
    with pytest.raises(ValueError, match="between 0 and the running k=2"):
        advise([0.5, 0.3], 0.03, 0.02, ks=[4])
    assert step_time_from_rate(40.0, 2.0) == pytest.approx(0.05)
    with pytest.raises(ValueError):
        step_time_from_rate(0.0)
