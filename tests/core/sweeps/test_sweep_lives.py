"""The k=0 server's two lives in each restart bench of a sweep (`core.sweeps.sweep.baseline_lives`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mtpwatch.core.ab import stats
from mtpwatch.core.ab.plan import BenchConfig, RunUnits, StartArm, build_plan
from mtpwatch.core.ab.records import RunRecord
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.sweeps import sweep
from mtpwatch.render.sweep_table import format_sweep

PROMPTS = [Prompt("p0", "one", "copy"), Prompt("p1", "two", "copy")]


def _bench(
    runs: int, life_rates: tuple[float, float], k_rate: float, concurrency: tuple[int, ...] = (1,)
) -> object:
    """A restart bench as the runner records it: one record per planned unit, each A unit at the rate
    of the session of A that runs it in the plan (the first or the second start of the k=0 server)."""
    config = BenchConfig(PROMPTS, runs=runs, warmup=1, schedule="restart", concurrency=concurrency)
    records, starts = [], 0
    for step in build_plan(config):
        if isinstance(step, StartArm) and step.arm == "a":
            starts += 1
        if not isinstance(step, RunUnits):
            continue
        for u in step.units:
            rate = life_rates[starts - 1] if u.arm == "a" else k_rate
            rate += 0.5 * u.prompt  # the prompts run at their own speeds
            name = PROMPTS[u.prompt].id
            records.append(
                RunRecord(
                    u.arm, name, "copy", u.point, u.run, u.warmup, u.pair,
                    tokens=64, ttft_s=0.1, decode_tok_s=rate, output_tok_s=rate, wall_s=1.0,
                    errors=0, error=None, contended=False, prompt_index=u.prompt,
                )
            )  # fmt: skip
    return SimpleNamespace(config=config, records=records)


@pytest.mark.parametrize("runs", [2, 3, 5, 6])
def test_restart_session_is_the_plans_session(runs: int) -> None:
    """Which start of A ran each measured pair, by the rule and by the plan itself."""
    config = BenchConfig(PROMPTS, runs=runs, warmup=1, schedule="restart")
    starts = 0
    seen = set()
    for step in build_plan(config):
        if isinstance(step, StartArm) and step.arm == "a":
            starts += 1
        if isinstance(step, RunUnits):
            for u in step.units:
                if u.arm == "a" and u.pair is not None:
                    assert stats.restart_session(u.pair, runs - 1) == starts - 1
                    seen.add(starts)
    assert seen == ({1, 2} if runs - 1 > 1 else {1})


def test_the_baseline_lives_ratio_is_the_second_start_over_the_first() -> None:
    bench = _bench(5, (100.0, 103.0), 150.0)
    assert sweep.baseline_lives(bench) == pytest.approx(103.0 / 100.0, rel=1e-3)
    same = _bench(5, (100.0, 100.0), 150.0, concurrency=(1, 4))
    assert sweep.baseline_lives(same) == pytest.approx(1.0)


def test_no_second_life_no_ratio() -> None:
    """Two runs a prompt (one measured): A starts once; other schedules have no lives."""
    assert sweep.baseline_lives(_bench(2, (100.0, 90.0), 150.0)) is None
    bench = _bench(5, (100.0, 103.0), 150.0)
    alternate = SimpleNamespace(config=BenchConfig(PROMPTS, runs=5), records=bench.records)  # type: ignore[attr-defined]
    assert sweep.baseline_lives(alternate) is None


def test_the_sweep_says_how_far_apart_lives_are_and_writes_it() -> None:
    report = sweep.SweepReport(
        rows=(), best_k=None, advice=None,
        reports={1: _bench(5, (100.0, 97.0), 150.0), 2: _bench(5, (100.0, 101.0), 180.0)},
    )  # fmt: skip
    lives = report.baseline_lives()
    assert lives[1] == pytest.approx(0.97, rel=1e-3) and lives[2] == pytest.approx(1.01, rel=1e-3)
    assert report.life_spread() == pytest.approx(0.03, abs=1e-3)
    doc = report.to_json()
    assert doc["baseline_lives"] == {"1": pytest.approx(0.97, abs=1e-3), "2": pytest.approx(1.01, abs=1e-3)}
    assert doc["baseline_life_spread"] == pytest.approx(0.03, abs=1e-3)
    text = format_sweep(report, "t")
    assert "k=1:0.970 k=2:1.010" in text and "up to 3.0% apart" in text
