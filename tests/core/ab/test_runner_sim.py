"""The bench engine end to end against simulator presets (real HTTP on 127.0.0.1, time-scaled).

What the client's clock cannot change: the gates, the pairing, the lossless check on token ids,
the per-position counters and vLLM's acceptance identities, drafted share, output lengths, verify
steps. How close the measured speed-ups come to the presets' physics is a timing figure, so it is
printed by `tests/bench/sim_physics.py`, not asserted here (on a busy machine the client's timer
jitter is a large share of a time-scaled window).
"""

from __future__ import annotations

import pytest

from mtpwatch.core.ab.workloads import resolve
from tests.ab_sim import run_ab


@pytest.mark.timeout(120)
# speed: time scaling, chosen so a baseline step stays >= 2.5 ms (E4B 55 ms, 31B 25 ms real)
@pytest.mark.parametrize(
    ("preset", "k", "speed"), [("gemma4-e4b-gb10", 2, 20.0), ("gemma4-31b-h100", 8, 10.0)]
)
async def test_ab_report_against_presets(preset: str, k: int, speed: float) -> None:
    report = await run_ab(preset, resolve("long", limit=1), lengths=(128,), speed=speed)
    assert report.gate_failures(require_identical=True) == []
    sp = report.primary.overall.speedup
    assert sp is not None and sp.n_pairs == 4 and sp.ci.low <= sp.median <= sp.ci.high
    # the lossless check sees token ids from the simulator, and they match
    assert report.lossless.identical is True
    assert report.lossless.compared_by == "token_ids"
    assert report.lossless.pairs_compared == 4
    doc = report.to_json()
    assert doc["identical_outputs"] is True and doc["first_divergence"] is None
    arm_b = doc["arms"]["b"]
    assert len(arm_b["per_position"]) == k and arm_b["num_speculative_tokens"] == k
    assert 0 < arm_b["acceptance_rate"] < 1
    # vLLM's identity AL = 1 + Σ marginal per-position rates holds on the window sums
    assert arm_b["mean_acceptance_length"] == pytest.approx(1 + sum(arm_b["per_position"]), abs=0.01)
    assert doc["arms"]["a"]["acceptance_rate"] is None
    # a fixed k drafts on every decode step: Δnum_drafts / ΔITL count is 1 (no speculation: none)
    assert (
        arm_b["drafted_share"] == pytest.approx(1.0, abs=0.01) and doc["arms"]["a"]["drafted_share"] is None
    )
    assert all(r["tokens"] == 128 for r in doc["runs"])


@pytest.mark.timeout(120)
async def test_moe_short_and_long_answers_on_gb10() -> None:
    # 26B-A4B on GB10 at 8- and 64-token answers: every MTP run reports its verify steps
    # (Δnum_drafts), fewer than its tokens, and the report gives a break-even curve over both lengths.
    prompts = resolve("short", limit=2)
    report = await run_ab("gemma4-26b-a4b-gb10", prompts, lengths=(8, 64), runs=2, speed=10.0)
    assert report.gate_failures() == []
    assert sorted(length for length, _ in report.break_even_points[1]) == [8, 64]
    for pt in report.points:
        length = pt.point.length
        assert length is not None
        b_runs = [r for r in report.records if r.point == pt.point and r.arm == "b" and not r.warmup]
        assert len(b_runs) == len(prompts)
        assert all(r.drafts and 0 < r.drafts < length for r in b_runs), [r.drafts for r in b_runs]
    be = report.break_even[1]
    assert be.verdict and (be.length is None or 8 <= be.length <= 64)
