"""The best k per concurrency and the batch-size schedule vLLM reads (`core.sweeps.schedule`)."""

from __future__ import annotations

import pytest

from mtpwatch.core.provenance import spec_config_from_argv
from mtpwatch.core.sweeps.schedule import (
    Cell,
    batch_schedule,
    best_per_concurrency,
    fixed_config,
    replace_spec_config,
    schedule_config,
    verify,
    verify_groups,
)
from mtpwatch.sim.engine import check_schedule


def cell(k: int, c: int, speedup: float, half: float = 0.05) -> Cell:
    return Cell(k, c, speedup, speedup - half, speedup + half, 8, None, None)


def test_the_best_k_at_each_concurrency() -> None:
    table = {
        1: {1: cell(1, 1, 1.6), 2: cell(2, 1, 2.1), 4: cell(4, 1, 2.3)},
        4: {1: cell(1, 4, 1.5), 2: cell(2, 4, 1.7), 4: cell(4, 4, 1.4)},
        16: {1: cell(1, 16, 0.97), 2: cell(2, 16, 0.9), 4: cell(4, 16, 0.8)},
    }
    best = best_per_concurrency(table)
    assert best == {1: 4, 4: 2, 16: 0}  # nothing beats k=0 at 16
    # ties go to the smaller k (cheaper, same speed)
    assert best_per_concurrency({1: {1: cell(1, 1, 1.5), 2: cell(2, 1, 1.5)}}) == {1: 1}


def test_the_schedule_covers_the_measured_range() -> None:
    # midpoints ⌊√(1·4)⌋ = 2 and ⌊√(4·16)⌋ = 8
    assert batch_schedule({1: 4, 4: 2, 16: 1}) == ((1, 2, 4), (3, 8, 2), (9, 16, 1))
    assert batch_schedule({1: 2, 4: 2, 16: 0}) == ((1, 8, 2), (9, 16, 0))  # same k merges
    assert batch_schedule({1: 3, 2: 1}) == ((1, 1, 3), (2, 2, 1))
    assert batch_schedule({4: 2}) == ((1, 4, 2),)  # from 1 even when 1 was not measured
    assert batch_schedule({2: 3, 3: 2, 8: 1}) == ((1, 2, 3), (3, 4, 2), (5, 8, 1))
    for best in ({1: 4, 4: 2, 16: 1}, {1: 3, 2: 1}, {2: 3, 3: 2, 8: 1}, {1: 1, 64: 4, 256: 0}):
        check_schedule(batch_schedule(best), 4)  # every one passes vLLM's rules
    with pytest.raises(ValueError):
        batch_schedule({})


def test_a_ready_speculative_config() -> None:
    base = {"method": "mtp", "model": "org/drafter", "num_speculative_tokens": 8}
    config = schedule_config(((1, 2, 4), (3, 8, 2), (9, 16, 0)), base)
    assert config == {
        "method": "mtp",
        "model": "org/drafter",
        "num_speculative_tokens": 4,
        "num_speculative_tokens_per_batch_size": [[1, 2, 4], [3, 8, 2], [9, 16, 0]],
    }
    assert schedule_config(((1, 16, 0),), base) is None  # speculation pays nowhere


def test_verify_head_to_head_against_the_best_fixed_k() -> None:
    """The verdict is the head-to-head bench's (schedule / fixed k, its CI against 1.0), not a
    comparison of two benches against k=0, which carries the scatter between server lives."""
    table = {1: {4: cell(4, 1, 2.3)}, 4: {2: cell(2, 4, 1.7)}, 16: {2: cell(2, 16, 0.9)}}
    best = {1: 4, 4: 2, 16: 0}
    heads = {1: cell(4, 1, 0.99), 4: cell(2, 4, 0.9), 16: cell(0, 16, 1.02)}
    rows = {r.concurrency: r for r in verify(table, best, heads)}
    assert rows[1].no_slower and rows[1].ratio == pytest.approx(0.99)  # [0.94, 1.04] reaches 1.0
    assert rows[4].no_slower is False  # [0.85, 0.95]
    assert rows[16].best is None and rows[16].best_speedup == 1.0 and rows[16].no_slower
    assert verify(table, best, {})[0].no_slower is None
    doc = rows[4].to_json()
    assert doc["best_fixed_k"] == 2 and doc["best_fixed_speedup"] == 1.7
    assert doc["schedule_vs_best_fixed"]["speedup"] == 0.9 and doc["no_slower"] is False


def _report(rates: list[tuple[float, float]], concurrency: int = 1) -> object:
    """A bench report's shape as `head_to_head` reads it: measured pairs (A's speed, B's)."""
    from types import SimpleNamespace

    from mtpwatch.core.ab.plan import Point
    from mtpwatch.core.ab.records import RunRecord

    point = Point(concurrency=concurrency)
    records = []
    for i, (ra, rb) in enumerate(rates):
        for arm, rate in (("a", ra), ("b", rb)):
            records.append(
                RunRecord(arm, "p", "c", point, i + 1, False, i, 64, 0.1, rate, rate, 1.0, 0, None, False)  # type: ignore[arg-type]
            )
    return SimpleNamespace(primary=SimpleNamespace(point=point), records=records)


def test_head_to_head_pools_both_orders_so_a_favoured_arm_cancels() -> None:
    """Schedule and fixed k equally fast, arm B 10 % faster whatever it runs: the forward bench
    alone says the schedule is 10 % faster, the pooled pair of benches says 1.0."""
    from mtpwatch.core.sweeps.schedule import head_to_head

    forward = _report([(100.0, 110.0 + d) for d in (-1, 0, 1, 2)])  # A fixed, B schedule
    reverse = _report([(100.0, 110.0 + d) for d in (-2, -1, 0, 1)])  # A schedule, B fixed
    alone = head_to_head(4, forward, None)[1]
    assert alone.speedup == pytest.approx(1.105) and alone.low > 1.0 and alone.pairs == 4
    both = head_to_head(4, forward, reverse)[1]
    assert both.pairs == 8 and both.low < 1.0 < both.high
    assert both.speedup == pytest.approx(1.0, abs=0.06)
    assert both.rate == pytest.approx(105.0, abs=5.1) and both.baseline_rate == pytest.approx(105.0, abs=5.1)
    assert both.k == 4 and both.to_json()["pairs"] == 8


def test_one_head_to_head_bench_per_best_k_and_its_fixed_config() -> None:
    assert verify_groups({1: 4, 2: 4, 4: 2, 16: 0}) == {4: (1, 2), 2: (4,), 0: (16,)}
    sched = schedule_config(((1, 2, 4), (3, 4, 2)), {"method": "ngram", "prompt_lookup_max": 4})
    assert sched is not None
    assert fixed_config(sched, 2) == {"method": "ngram", "prompt_lookup_max": 4, "num_speculative_tokens": 2}


def test_replace_spec_config() -> None:
    argv = [
        "vllm",
        "serve",
        "m",
        "--port",
        "8001",
        "--speculative-config",
        '{"method":"mtp","num_speculative_tokens":4}',
    ]
    config = {
        "method": "mtp",
        "num_speculative_tokens": 4,
        "num_speculative_tokens_per_batch_size": [[1, 4, 4]],
    }
    out = replace_spec_config(argv, config)
    assert out[:5] == argv[:5] and spec_config_from_argv(out) == config and len(out) == len(argv)
    assert spec_config_from_argv(replace_spec_config(["vllm", "serve", "m", "-sc={}"], config)) == config
    assert replace_spec_config(["vllm", "serve", "m"], config)[-2] == "--speculative-config"
    # the underscore spelling with `=` (read by spec_config_from_argv) is replaced, not doubled
    under = replace_spec_config(
        ["vllm", "serve", "m", '--speculative_config={"num_speculative_tokens":4}'], config
    )
    assert len(under) == 4 and spec_config_from_argv(under) == config


def test_a_cell_and_a_verdict_from_too_few_pairs_say_so() -> None:
    """Two pairs give [min, max] of the pairs, a 50 % interval: the table marks it and its verdict."""
    from mtpwatch.core.sweeps.schedule import Cell, ConcurrencyAdvice, VerifyRow
    from mtpwatch.render.schedule_table import format_concurrency

    weak = Cell(k=2, concurrency=4, speedup=0.93, low=0.92, high=0.95, pairs=2, rate=None,
                baseline_rate=None, coverage=0.5)  # fmt: skip
    strong = Cell(k=2, concurrency=1, speedup=1.2, low=1.1, high=1.3, pairs=12, rate=None,
                  baseline_rate=None, coverage=0.96)  # fmt: skip
    best = Cell(k=2, concurrency=4, speedup=1.21, low=1.1, high=1.3, pairs=12, rate=None,
                baseline_rate=None, coverage=0.96)  # fmt: skip
    row = VerifyRow(4, 2, best, weak)
    assert row.no_slower is False and row.weak
    assert not VerifyRow(1, 2, strong, strong).weak
    conc = ConcurrencyAdvice(
        table={1: {2: strong}, 4: {2: best}}, best={1: 2, 4: 2}, schedule=((1, 4, 2),),
        config={"method": "ngram", "num_speculative_tokens": 2}, verification=(row,),
        verification_note=None,
    )  # fmt: skip
    text = format_concurrency(conc)
    assert "0.93x [0.92, 0.95]†" in text and "SLOWER (a hint: †)" in text
    assert "head to head" in text
    assert "it covers 50% at 2 pairs" in text
    assert "one k wins at every measured concurrency" in text
    assert weak.to_json()["ci_coverage"] == 0.5


def test_a_schedule_only_where_the_intervals_resolve_it() -> None:
    """The issue's simulator sweep: c=1 k=1 1.28× [1.09, 1.48] vs k=2 1.27× [1.09, 1.43] named
    "best k 1", and c=4 → k=2, a schedule from noise. Now: a fixed k=1 does as well within the
    noise at both, and its config is the advice; the medians' schedule is kept only to verify."""
    from mtpwatch.core.sweeps.schedule import advise_table
    from mtpwatch.render.schedule_table import format_concurrency

    def c(k: int, conc: int, sp: float, lo: float, hi: float) -> Cell:
        return Cell(k, conc, sp, lo, hi, 8, None, None)

    base = {"method": "ngram", "prompt_lookup_max": 4}
    table = {
        1: {1: c(1, 1, 1.28, 1.09, 1.48), 2: c(2, 1, 1.27, 1.09, 1.43)},
        4: {1: c(1, 4, 1.30, 1.10, 1.45), 2: c(2, 4, 1.35, 1.20, 1.50)},
    }
    conc = advise_table(table, base)
    assert conc.best == {1: 1, 4: 2}  # the medians
    assert not conc.choices[1].resolved and conc.choices[1].within == (1, 2)
    assert conc.fixed_k == 1 and conc.config == {**base, "num_speculative_tokens": 1}
    assert conc.schedule == ((1, 2, 1), (3, 4, 2))  # the medians' schedule: verify it, never paste it
    assert (
        conc.schedule_config is not None and "num_speculative_tokens_per_batch_size" in conc.schedule_config
    )
    text = format_concurrency(conc)
    assert "a fixed k=1 does as well within the noise at every measured concurrency" in text
    assert (
        '--speculative-config \'{"method":"ngram","prompt_lookup_max":4,"num_speculative_tokens":1}\'' in text
    )
    assert "not resolved by its intervals" in text and 'per_batch_size":' not in text
    assert "1 (≈1,2)" in text and "rule: best k = highest median paired speed-up" in text
    doc = conc.to_json()
    assert doc["fixed_k"] == 1 and doc["schedule_resolved"] is False
    assert doc["choices"]["4"] == {
        "best": 2,
        "resolved": False,
        "within_noise": [1, 2],
        "k": 1,
        "weak_interval": False,
    }

    # resolved at both, different ks: a ready schedule of the resolved ks
    table = {
        1: {1: c(1, 1, 1.5, 1.45, 1.55), 3: c(3, 1, 2.2, 2.1, 2.3)},
        16: {1: c(1, 16, 1.3, 1.25, 1.35), 3: c(3, 16, 0.9, 0.85, 0.95)},
    }
    conc = advise_table(table, base)
    assert conc.fixed_k is None and all(ch.resolved for ch in conc.choices.values())
    assert conc.schedule == ((1, 4, 3), (5, 16, 1)) and conc.config == conc.schedule_config
    assert "num_speculative_tokens_per_batch_size" in format_concurrency(conc)

    # nothing beats k=0 within the noise anywhere: no config at all
    table = {1: {1: c(1, 1, 1.02, 0.95, 1.1)}, 4: {1: c(1, 4, 0.98, 0.9, 1.05)}}
    conc = advise_table(table, base)
    assert conc.fixed_k == 0 and conc.config is None
    assert "k=0 does as well within the noise" in format_concurrency(conc)


def test_one_k_best_everywhere_on_thin_intervals() -> None:
    """The simulator's sweep at 3 pairs: k=2 best at c=1 and c=4, each interval covering 75 %. The
    advice is the fixed k, flagged as resting on thin intervals, and no 'medians' schedule' line
    (it is the same k)."""
    from mtpwatch.core.sweeps.schedule import advise_table
    from mtpwatch.render.schedule_table import format_concurrency

    def c(k: int, conc: int, sp: float, lo: float, hi: float) -> Cell:
        return Cell(k, conc, sp, lo, hi, 3, None, None, coverage=0.75)

    table = {
        1: {1: c(1, 1, 1.51, 1.44, 1.70), 2: c(2, 1, 2.20, 1.77, 2.23)},
        4: {1: c(1, 4, 1.30, 1.28, 1.81), 2: c(2, 4, 1.78, 1.73, 2.05)},
    }
    conc = advise_table(table, {"method": "mtp"})
    assert conc.fixed_k == 2 and not any(ch.resolved for ch in conc.choices.values())
    text = format_concurrency(conc)
    assert (
        "a fixed k=2 does as well within the noise at every measured concurrency (the smallest such k); "
        in text
    )
    assert "intervals under 95 % (†)" in text and "the medians' schedule" not in text
    assert "2?" in text
