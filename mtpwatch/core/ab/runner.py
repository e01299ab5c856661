"""The bench runner: drives a plan on arm A and arm B and turns the runs into a `BenchReport`.

Acceptance comes from the server's counters, differenced around each measured run of that arm
(`core.metrics.rates.delta_rates`; `is_restart` decides whether two scrapes share a baseline) and
summed, with vLLM's formulas.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from mtpwatch.core.ab.arms import ARM_ROLES, Arm, ArmName, ArmRequest, ArmResult, ManagedArm
from mtpwatch.core.ab.events import BenchEvent, BenchFinished, PairFinished, RunFinished, StatusChanged
from mtpwatch.core.ab.plan import (
    BenchConfig,
    BenchConfigError,
    Point,
    RunUnits,
    StartArm,
    StopArm,
    Unit,
    build_plan,
)
from mtpwatch.core.ab.records import RequestTiming, RunRecord, pair_ratio
from mtpwatch.core.ab.report import BenchReport, build_report
from mtpwatch.core.ab.runlog import resumed_plan
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.metrics.rates import delta_rates, is_restart
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.core.provenance import first_line


class BenchRunner:
    """Runs a `BenchConfig` against arm A (baseline) and optionally arm B (treatment)."""

    def __init__(
        self, config: BenchConfig, a: Arm, b: Arm | None = None, *, done: Sequence[RunRecord] = ()
    ) -> None:
        """`done`: runs a previous, interrupted bench of the same config finished (`--resume`)."""
        config.validate(paired=b is not None)
        if config.schedule == "restart" and not all(isinstance(arm, ManagedArm) for arm in (a, b)):
            raise BenchConfigError("the restart schedule needs a launch command for each server")
        self.config = config
        self.arms: dict[ArmName, Arm] = {"a": a} if b is None else {"a": a, "b": b}
        self.done = list(done)
        self.plan = resumed_plan(build_plan(config, paired=b is not None), self.done)
        self.total = len(self.done) + sum(len(s.units) for s in self.plan if isinstance(s, RunUnits))
        self._last: dict[ArmName, MetricsSnapshot | None] = {}
        self._running: set[ArmName] = set()
        self.records: list[RunRecord] = []
        """Every finished unit so far, in order (what `partial_report` summarises after an interrupt)."""
        self.problems: dict[ArmName, list[str]] = {}
        """Per arm, one line per kind of trouble seen (/metrics unreadable, server restarted)."""

    def _problem(self, arm: ArmName, message: str) -> None:
        seen = self.problems.setdefault(arm, [])
        if message not in seen:
            seen.append(message)

    async def _scrape(self, arm: ArmName) -> MetricsSnapshot | None:
        try:
            return await self.arms[arm].counters()
        except Exception as exc:  # a scrape failure must not lose the run; acceptance is then unknown
            self._problem(arm, f"/metrics could not be read, acceptance is incomplete ({first_line(exc)})")
            return None

    async def _execute(self, unit: Unit) -> RunRecord:
        prompt = self.config.prompts[unit.prompt]
        length = unit.point.length
        force = length is not None and self.config.force_lengths
        request = ArmRequest(
            prompt=prompt.text,
            max_tokens=length if length is not None else prompt.max_tokens,
            temperature=self.config.temperature,
            min_tokens=length if force else None,
            ignore_eos=force,
        )
        arm = self.arms[unit.arm]
        # Windows are contiguous per arm (the last scrape is the next baseline), so counts that reach
        # /metrics a moment after the stream ends land in the arm's next run rather than being lost.
        before = self._last.get(unit.arm)
        if before is None:
            before = await self._scrape(unit.arm)
        t0 = time.monotonic()
        results = await asyncio.gather(*(arm.generate(request) for _ in range(unit.point.concurrency)))
        wall = time.monotonic() - t0
        after = await self._scrape(unit.arm)
        self._last[unit.arm] = after
        if before is not None and after is not None and is_restart(before, after):
            self._problem(
                unit.arm,
                "the server restarted during the bench (its counters reset); "
                "runs across the restart have no acceptance numbers",
            )
        return _record(unit, prompt, results, wall, before, after)

    async def events(self) -> AsyncIterator[BenchEvent]:
        """Run the plan, yielding progress events (for the TUI); the last is `BenchFinished`."""
        records = self.records
        records[:] = self.done
        by_pair: dict[tuple[ArmName, Point, int, int], RunRecord] = {}
        ratios: dict[Point, list[float]] = {}

        def pair_finished(rec: RunRecord, done: int) -> PairFinished | None:
            """The pair `rec` completes, with its point's running speed-up; None when it completes none."""
            if rec.pair is None or len(self.arms) < 2:
                return None
            by_pair[(rec.arm, rec.point, rec.prompt_index, rec.pair)] = rec
            mate = by_pair.get(("b" if rec.arm == "a" else "a", rec.point, rec.prompt_index, rec.pair))
            if mate is None:
                return None
            ratio = pair_ratio(mate, rec) if rec.arm == "b" else pair_ratio(rec, mate)
            series = ratios.setdefault(rec.point, [])
            if ratio is not None:
                series.append(ratio)
            median = statistics.median(series) if series else None
            return PairFinished(rec.point, rec.prompt, rec.pair, ratio, median, len(series), done, self.total)

        for rec in self.done:
            pair_finished(rec, 0)
        done = len(self.done)
        try:
            for step in self.plan:
                if isinstance(step, StartArm | StopArm):
                    managed = self.arms[step.arm]
                    assert isinstance(managed, ManagedArm)
                    if isinstance(step, StopArm):
                        yield StatusChanged(f"stopping server {step.arm.upper()}")
                        self._running.discard(step.arm)
                        await managed.stop()
                        continue
                    yield StatusChanged(f"starting server {step.arm.upper()} ({ARM_ROLES[step.arm]})")
                    self._last[step.arm] = None  # counters restart from zero
                    self._running.add(step.arm)
                    await managed.start()
                    yield StatusChanged(f"server {step.arm.upper()} is up; warming up")
                    continue
                finished = await asyncio.gather(*(self._execute(u) for u in step.units))
                for rec in finished:
                    records.append(rec)
                    done += 1
                    yield RunFinished(rec, done, self.total)
                    if (event := pair_finished(rec, done)) is not None:
                        yield event
        finally:
            for name in list(self._running):
                managed = self.arms[name]
                if isinstance(managed, ManagedArm):
                    await managed.stop()
            self._running.clear()
        yield BenchFinished(self.partial_report())

    def partial_report(self, interrupted: str | None = None) -> BenchReport:
        """The report of the runs finished so far (after Ctrl-C or a failure, a partial one);
        `interrupted` says why the bench stopped early (shown, and written to the JSON)."""
        return build_report(
            self.config,
            self.records,
            paired=len(self.arms) == 2,
            labels={name: arm.label for name, arm in self.arms.items()},
            problems={k: tuple(v) for k, v in self.problems.items()},
            interrupted=interrupted,
        )

    async def run(self, on_event: Callable[[BenchEvent], None] | None = None) -> BenchReport:
        """Run everything and return the report; `on_event` sees every event as it happens."""
        report: BenchReport | None = None
        async for event in self.events():
            if on_event is not None:
                on_event(event)
            if isinstance(event, BenchFinished):
                report = event.report
        assert report is not None
        return report


def _record(
    unit: Unit,
    prompt: Prompt,
    results: Sequence[ArmResult],
    wall: float,
    before: MetricsSnapshot | None,
    after: MetricsSnapshot | None,
) -> RunRecord:
    ok = [r for r in results if r.error is None]
    errors = [r.error for r in results if r.error is not None]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    decodes = [r.decode_tok_s for r in ok if r.decode_tok_s is not None]
    tokens = sum(r.tokens for r in ok)
    spec: dict[str, Any] = {}
    if before is not None and after is not None and after.speculative and not is_restart(before, after):
        delta = delta_rates(before, after, None, "run")
        spec = {
            "drafts": delta.drafts,
            "draft_tokens": delta.draft_tokens,
            "accepted": delta.accepted,
            "accepted_per_pos": delta.accepted_per_pos,
            "k": delta.num_speculative_tokens,
            "decode_steps": delta.itl_count if after.itl is not None else None,
        }
        if len(after.accepted_per_pos) != len(before.accepted_per_pos):
            spec["accepted_per_pos"] = after.accepted_per_pos  # length changed: the gate will flag it
    return RunRecord(
        arm=unit.arm,
        prompt=prompt.id,
        category=prompt.category,
        point=unit.point,
        run=unit.run,
        warmup=unit.warmup,
        pair=unit.pair,
        tokens=tokens,
        ttft_s=statistics.fmean(ttfts) if ttfts else None,
        decode_tok_s=statistics.fmean(decodes) if decodes else None,
        output_tok_s=tokens / wall if wall > 0 and ok else None,
        wall_s=wall,
        errors=len(errors),
        error=errors[0] if errors else None,
        contended=unit.contended,
        prompt_index=unit.prompt,
        text=results[0].text,
        token_ids=results[0].token_ids,
        requests=tuple(RequestTiming(r.tokens, r.ttft_s, r.e2el_s, r.itl_s) for r in ok),
        **spec,
    )
