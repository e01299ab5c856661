"""Paired statistics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from mtpwatch.core.ab import stats
from tests.reference import bootstrap_median_ci


def test_summarize_hand_computed() -> None:
    s = stats.summarize([1.0, 2.0, 3.0, 4.0])
    assert s.n == 4
    assert s.median == 2.5
    assert s.mean == 2.5
    # sample variance: (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3
    assert s.stdev == pytest.approx(math.sqrt(5 / 3))
    assert s.cv == pytest.approx(math.sqrt(5 / 3) / 2.5)
    assert (s.min, s.max) == (1.0, 4.0)


def test_summarize_single_value_and_empty() -> None:
    s = stats.summarize([7.0])
    assert (s.median, s.mean, s.stdev, s.cv) == (7.0, 7.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        stats.summarize([])


def test_cv_is_stdev_over_mean() -> None:
    # mean 110, stdev = sqrt((100+100+400)/2) = sqrt(300) = 17.32 -> cv 0.157
    noisy = stats.summarize([100.0, 100.0, 130.0])
    assert noisy.cv == pytest.approx(math.sqrt(300) / 110)
    calm = stats.summarize([100.0, 101.0, 99.0])
    assert calm.cv == pytest.approx(0.01)


def test_median_ci_n10() -> None:
    # Binom(10, 1/2): P(X<=1) = 11/1024 = 0.0107, P(X<=2) = 56/1024 = 0.0547 > 0.025
    # -> j = 2: [x(2), x(9)], coverage 1 - 2*11/1024.
    ci = stats.median_ci([float(x) for x in [5, 3, 9, 1, 7, 2, 10, 8, 4, 6]])
    assert (ci.low, ci.high) == (2.0, 9.0)
    assert ci.coverage == pytest.approx(1 - 22 / 1024)


def test_median_ci_n11_seed_benchmark_size() -> None:
    # 12 runs minus 1 warm-up = 11 pairs. P(X<=1) = 12/2048, P(X<=2) = 67/2048 = 0.0327 > 0.025.
    ci = stats.median_ci([float(x) for x in range(1, 12)])
    assert (ci.low, ci.high) == (2.0, 10.0)
    assert ci.coverage == pytest.approx(1 - 24 / 2048)


def test_median_ci_n20() -> None:
    # sum C(20, 0..5) = 21700; 2*21700/2^20 = 0.0414 <= 0.05, and with 6: 2*60460/2^20 = 0.115 > 0.05
    ci = stats.median_ci([float(x) for x in range(1, 21)])
    assert (ci.low, ci.high) == (6.0, 15.0)
    assert ci.coverage == pytest.approx(1 - 2 * 21700 / 2**20)


def test_median_ci_too_few_values_reports_lower_coverage() -> None:
    ci = stats.median_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (ci.low, ci.high) == (1.0, 5.0)
    assert ci.coverage == pytest.approx(1 - 2 / 32)  # 0.9375 < 0.95, and it says so


def test_bootstrap_ci_seeded_and_sane() -> None:
    data = [1.9, 2.0, 2.05, 2.1, 2.2, 1.95, 2.02, 2.08, 2.15, 1.98, 2.01]
    one = bootstrap_median_ci(data, seed=3, resamples=500)
    two = bootstrap_median_ci(data, seed=3, resamples=500)
    assert (one.low, one.high) == (two.low, two.high)
    assert one.low <= stats.summarize(data).median <= one.high
    assert min(data) <= one.low and one.high <= max(data)
    const = bootstrap_median_ci([2.0] * 8, resamples=100)
    assert (const.low, const.high) == (2.0, 2.0)


def test_speedup_paired_median_and_ratio_of_means() -> None:
    s = stats.speedup([10.0, 10.0, 10.0], [20.0, 25.0, 30.0])
    assert s.n_pairs == 3
    assert s.median == 2.5
    assert s.ratio_of_means == pytest.approx(2.5)
    assert s.mean == pytest.approx(2.5)
    # n=3 -> no order-statistic interval at 95 %; min..max with coverage 0.75
    assert (s.ci.low, s.ci.high) == (2.0, 3.0)
    assert s.ci.coverage == pytest.approx(0.75)


def test_paired_ratios_refuses_unpaired_data() -> None:
    with pytest.raises(ValueError, match="unpaired"):
        stats.paired_ratios([1.0, 2.0], [1.0])
    assert stats.paired_ratios([0.0, 2.0], [1.0, 3.0]) == [1.5]


def test_abba_order() -> None:
    assert stats.abba_order(4) == [("a", "b"), ("b", "a"), ("a", "b"), ("b", "a")]
    assert stats.abba_order(3, first="b") == [("b", "a"), ("a", "b"), ("b", "a")]
    order = [arm for pair in stats.abba_order(12) for arm in pair]
    assert "".join(order[:8]) == "abbaabba"


def test_restart_phases() -> None:
    assert stats.restart_phases(11) == [("a", 6), ("b", 11), ("a", 5)]
    assert stats.restart_phases(4) == [("a", 2), ("b", 4), ("a", 2)]
    assert stats.restart_phases(1) == [("a", 1), ("b", 1)]


def test_break_even_interpolates_in_log_length() -> None:
    be = stats.break_even([(8, 0.8), (32, 1.2)])
    assert be.kind == "above"
    assert be.length == pytest.approx(16.0)  # halfway in log2: 2^(3 + 0.5*2) = 16
    assert "~16 output tokens" in be.verdict
    be = stats.break_even([(512, 1.5), (8, 0.5), (128, 1.1), (32, 0.9)])
    assert be.length == pytest.approx(64.0)


def test_break_even_takes_the_last_crossing() -> None:
    # noisy: pays at 16, not at 32, then pays from 64 on -> the claim is "above ~45"
    be = stats.break_even([(16, 1.05), (32, 0.95), (64, 1.05), (128, 1.3)])
    assert be.kind == "above"
    assert be.length == pytest.approx(math.exp(math.log(32) + 0.5 * math.log(2)))


def test_break_even_always_never_mixed() -> None:
    assert stats.break_even([(8, 1.1), (256, 2.0)]).kind == "always"
    assert "every length tried" in stats.break_even([(8, 1.1), (256, 2.0)]).verdict
    never = stats.break_even([(8, 0.7), (256, 0.99)])
    assert never.kind == "never" and never.length is None
    assert "never" in never.verdict
    mixed = stats.break_even([(8, 0.9), (64, 1.2), (256, 0.95)])
    assert mixed.kind == "mixed" and "64" in mixed.verdict
    with pytest.raises(ValueError):
        stats.break_even([])
