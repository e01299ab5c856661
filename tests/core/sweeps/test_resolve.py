"""When the intervals name a best k (`core.sweeps.resolve`)."""

from __future__ import annotations

import pytest

from mtpwatch.core.sweeps.resolve import Choice, Estimate, common_choice, resolve


def test_the_best_k_only_where_its_interval_excludes_the_next_best() -> None:
    # the c=1: k=1 1.28× [1.09, 1.48] vs k=2 1.27× [1.09, 1.43]
    ch = resolve({1: Estimate(1.28, 1.09, 1.48), 2: Estimate(1.27, 1.09, 1.43)})
    assert ch.best == 1 and not ch.resolved and ch.within == (1, 2) and ch.k == 1
    # the smallest k within the noise, not the best median
    ch = resolve({1: Estimate(1.25, 1.1, 1.4), 2: Estimate(1.3, 1.2, 1.5), 4: Estimate(1.1, 1.0, 1.2)})
    assert ch.best == 2 and ch.within == (1, 2) and ch.k == 1
    # resolved: the best's lower end above every other median
    ch = resolve({1: Estimate(1.6, 1.5, 1.7), 2: Estimate(2.1, 2.0, 2.2), 4: Estimate(1.9, 1.7, 2.1)})
    assert ch.resolved and ch.k == 2
    # k=0 (1.0) inside the best's interval: speculation is not shown to pay
    ch = resolve({1: Estimate(1.05, 0.98, 1.12)})
    assert ch.best == 1 and ch.within == (0, 1) and ch.k == 0
    # none beats 1.0: k=0, resolved only when every interval lies below 1.0
    assert resolve({1: Estimate(0.9, 0.85, 0.95)}) == Choice(0, (0,))
    ch = resolve({1: Estimate(0.97, 0.9, 1.02), 2: Estimate(0.8, 0.7, 0.9)})
    assert ch.best == 0 and ch.within == (0, 1) and not ch.resolved
    with pytest.raises(ValueError):
        resolve({})


def test_one_k_within_the_noise_everywhere() -> None:
    assert common_choice({1: Choice(1, (1, 2)), 4: Choice(2, (1, 2))}) == 1
    assert common_choice({1: Choice(3, (3,)), 4: Choice(1, (1,))}) is None
    assert common_choice({1: Choice(2, (0, 1, 2)), 4: Choice(0, (0,))}) == 0
    assert common_choice({}) is None


def test_an_interval_under_95_percent_resolves_nothing() -> None:
    """Three pairs give [min, max], a 75 % interval: it may exclude the next-best k and still not
    resolve it at 95 %."""
    ch = resolve({1: Estimate(1.51, 1.44, 1.70, 0.75), 2: Estimate(2.20, 1.77, 2.23, 0.75)})
    assert ch.best == 2 and ch.within == (2,) and ch.weak and not ch.resolved and ch.k == 2
    assert ch.to_json()["weak_interval"] is True
    assert resolve({1: Estimate(0.9, 0.85, 0.95, 0.5)}).weak
