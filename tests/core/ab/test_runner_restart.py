"""The bench's counter deltas follow `core.metrics.rates.is_restart`, the one restart rule.

The runner used to call two scrapes "one session" when `_created` was equal (or absent) and drafts and
accepted had not gone down. A restarted server that has since drafted more than the old one had keeps
both growing; the other counters (prompt tokens, finished requests, the model) show the restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from mtpwatch.core.ab.arms import ArmRequest, ArmResult
from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.ab.records import RunRecord
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.metrics.snapshot import MetricsSnapshot

PROMPTS = [Prompt("p1", "one", "cat-x", 8)]


class ScriptedArm:
    """Generates 8 tokens per request; each scrape returns the next snapshot of `scrapes`."""

    def __init__(self, scrapes: Sequence[MetricsSnapshot]) -> None:
        self.label = "scripted"
        self.scrapes = list(scrapes)

    async def generate(self, request: ArmRequest) -> ArmResult:
        await asyncio.sleep(0)
        return ArmResult(8, 0.01, 100.0, text="x", token_ids=tuple(range(8)))

    async def counters(self) -> MetricsSnapshot | None:
        return self.scrapes.pop(0)


def snap(
    drafts: float,
    accepted: float,
    *,
    prompt_tokens: float,
    finished: float,
    model: str = "m",
    created: float | None = None,
) -> MetricsSnapshot:
    return MetricsSnapshot(
        schema="vllm",
        model=model,
        speculative=True,
        num_speculative_tokens=2,
        drafts=drafts,
        draft_tokens=2 * drafts,
        accepted=accepted,
        accepted_per_pos=(accepted * 0.6, accepted * 0.4),
        generation_tokens=drafts + accepted,
        prompt_tokens=prompt_tokens,
        request_success={"length": finished},
        created=created,
    )


async def _one_run(before: MetricsSnapshot, after: MetricsSnapshot) -> tuple[RunRecord, tuple[str, ...]]:
    runner = BenchRunner(BenchConfig(prompts=PROMPTS, runs=1, warmup=0), ScriptedArm([before, after]))
    report = await runner.run()
    (record,) = report.records
    return record, report.problems.get("a", ())


async def test_no_restart_gives_the_plain_deltas() -> None:
    before = snap(10, 6, prompt_tokens=40, finished=2, created=5.0)
    after = snap(30, 21, prompt_tokens=60, finished=3, created=5.0)
    record, problems = await _one_run(before, after)
    assert (record.drafts, record.draft_tokens, record.accepted) == (20, 40, 15)
    assert record.accepted_per_pos == (21 * 0.6 - 6 * 0.6, 21 * 0.4 - 6 * 0.4)
    assert record.k == 2
    assert problems == ()


async def test_restart_the_old_check_missed_is_caught() -> None:
    """No `_created` (llama.cpp); drafts and accepted grew; prompt tokens and finished requests fell."""
    before = snap(10, 6, prompt_tokens=4000, finished=50)
    after = snap(30, 21, prompt_tokens=60, finished=1)
    record, problems = await _one_run(before, after)
    assert record.drafts is None and record.accepted is None
    assert any("restarted" in p for p in problems)


async def test_another_model_behind_the_url_is_a_restart() -> None:
    before = snap(10, 6, prompt_tokens=40, finished=2, model="m", created=5.0)
    after = snap(30, 21, prompt_tokens=60, finished=3, model="other", created=5.0)
    record, problems = await _one_run(before, after)
    assert record.drafts is None
    assert any("restarted" in p for p in problems)


async def test_a_changed_created_is_a_restart_even_when_every_counter_grew() -> None:
    before = snap(10, 6, prompt_tokens=40, finished=2, created=5.0)
    after = snap(30, 21, prompt_tokens=60, finished=3, created=9.0)
    record, problems = await _one_run(before, after)
    assert record.drafts is None
    assert any("restarted" in p for p in problems)
