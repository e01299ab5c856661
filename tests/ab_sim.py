"""The bench engine against two simulators of one preset (MTP off as A, on as B), real HTTP on
127.0.0.1, time-scaled: shared by `tests/core/ab/test_runner_sim.py` and `tests/bench/sim_physics.py`."""

from __future__ import annotations

from mtpwatch.core.ab.http_arm import HttpArm
from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.sim.harness import running_sim


async def run_ab(
    preset: str, prompts: list[Prompt], lengths: tuple[int, ...], runs: int = 3, speed: float = 10.0
) -> BenchReport:
    async with (
        running_sim(preset=preset, spec=False, speed=speed) as url_a,
        running_sim(preset=preset, spec=True, speed=speed) as url_b,
    ):
        a, b = HttpArm(url_a, label="baseline"), HttpArm(url_b, label="mtp")
        try:
            return await BenchRunner(BenchConfig(prompts, runs=runs, warmup=1, lengths=lengths), a, b).run()
        finally:
            await a.aclose()
            await b.aclose()
