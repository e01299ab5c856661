"""The A/B view's measurement (F6): `Measurement` over `core.ab.runner.BenchRunner`, its events as
`MeasureUpdate`s, plain data (the report so far, the finished run, progress in words) that
`ui.screens.ab_lines.ABLines.show_measure_update` draws."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from mtpwatch.config import MeasureSettings, Schedule
from mtpwatch.core.ab.arms import ArmRequest, ArmResult
from mtpwatch.core.ab.events import BenchFinished, PairFinished, RunFinished, StatusChanged
from mtpwatch.core.ab.http_arm import HttpArm
from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.ab.records import RunRecord
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.launch.process import StartupError
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.session.launching import StartupProgress
from mtpwatch.session.sources import Source


@dataclass(frozen=True, slots=True)
class MeasureUpdate:
    """What the screen should show after one bench event, as plain data (`ABLines.show_measure_update`)."""

    report: BenchReport | None = None
    """The speed-up line's report (partial after a pair, final at the end); None = unchanged."""
    done: int = 0
    """Runs done, for the line's run count (0 with `total` 0: no count, the final line)."""
    total: int = 0
    progress: str = ""
    """Progress in words (plain text): run i/N and its prompt, which server is up."""
    arm: int | None = None
    """Panel index `run` belongs to."""
    run: RunRecord | None = None
    """One finished run, for that panel's answer pane."""
    runs_per_prompt: int = 0
    """Measured runs per prompt and arm (the run's 'run i/N' tag)."""
    summary: str = ""
    """Set on the last update: what was measured, in words ('measured (alternate, 1 prompt(s) × 3
    runs/arm, 1 warm-up dropped)'); the line of `report` follows it on screen."""


def http_arm(feed: Source, model: str | None) -> HttpArm:
    """An `HttpArm` to `feed`'s server asking for `model` (None: the first it serves)."""
    state = feed.state()
    spec = state.spec
    return HttpArm(spec.url, label=spec.label, model=model, api_key=spec.api_key, chat=state.display.chat)


class FeedArm:
    """A bench `ManagedArm` over a `ServerFeed` (restart mode): the feed launches the server, so its
    panel shows the startup log and phases; while up the screen polls it; stop frees the GPU."""

    def __init__(
        self,
        feed: Source,
        progress: StartupProgress,
        on_up: Callable[[bool], None],
    ) -> None:
        self.feed = feed
        self.label = feed.state().spec.label
        self._progress = progress
        self._on_up = on_up
        self._http = http_arm(feed, feed.state().spec.model)

    async def start(self) -> None:
        """Launch the server through the feed (its panel says 'starting'); raises `StartupError`
        when it does not come up."""
        if not await self.feed.launch(self._progress):
            raise StartupError(f"{self.label}: {self.feed.state().reason}", None, [])
        self._on_up(True)

    async def stop(self) -> None:
        """Stop the server (idempotent); the panel says 'stopped'."""
        self._on_up(False)
        await self.feed.close(server_only=True)

    async def generate(self, request: ArmRequest) -> ArmResult:
        self._http.name_model(self.feed.state().model)
        return await self._http.generate(request)

    async def counters(self) -> MetricsSnapshot | None:
        self._http.name_model(self.feed.state().model)
        return await self._http.counters()

    async def aclose(self) -> None:
        await self._http.aclose()


class Measurement:
    """Repeated paired runs of prompts on the two feeds through `core.ab.runner.BenchRunner`.

    Alternate (ABBA, never concurrent), race (both at once: contended, not a measurement) or
    restart (`arms` are `FeedArm`s the engine starts and stops). `updates()` turns bench events
    into `MeasureUpdate`s; cancelling it keeps what was measured (`final()`).
    """

    def __init__(
        self,
        feeds: list[Source],
        prompts: list[Prompt],
        settings: MeasureSettings,
        schedule: Schedule,
        *,
        arms: tuple[FeedArm, FeedArm] | None = None,
    ) -> None:
        """Raises `BenchConfigError` (one line) for runs/warm-up that measure nothing."""
        self.schedule: Schedule = "restart" if settings.restart else schedule
        models = [feed.state().model or feed.state().spec.model for feed in feeds]
        self.arms = arms or (http_arm(feeds[0], models[0]), http_arm(feeds[1], models[1]))
        config = BenchConfig(
            prompts=prompts,
            runs=settings.runs,
            warmup=settings.warmup,
            schedule=self.schedule,
            temperature=feeds[0].state().display.temperature,
        )
        self.runner = BenchRunner(config, self.arms[0], self.arms[1])
        self.total = self.runner.total
        self.report: BenchReport | None = None

    async def updates(self) -> AsyncIterator[MeasureUpdate]:
        """Async iterator of `MeasureUpdate`s; the last one carries the summary."""
        async for event in self.runner.events():
            if isinstance(event, StatusChanged):
                yield MeasureUpdate(progress=event.message)
            elif isinstance(event, RunFinished):
                rec = event.record
                yield MeasureUpdate(
                    progress=f"measuring: run {event.done}/{event.total} · {rec.prompt}",
                    arm=0 if rec.arm == "a" else 1,
                    run=rec,
                    runs_per_prompt=self.runner.config.runs,
                )
            elif isinstance(event, PairFinished):
                report = self.runner.partial_report()
                yield MeasureUpdate(report=report, done=event.done, total=event.total)
            elif isinstance(event, BenchFinished):
                self.report = event.report
                yield self._final_update(event.report)
        await self.aclose()

    def final(self, interrupted: str = "cancelled: partial measurement") -> MeasureUpdate:
        """The summary of what was measured so far (after a cancel or a failure)."""
        self.report = self.report or self.runner.partial_report(interrupted=interrupted)
        return self._final_update(self.report)

    def _final_update(self, report: BenchReport) -> MeasureUpdate:
        what = "race" if report.contended else self.schedule
        prompts = len(report.config.prompts)
        summary = (
            f"measured ({what}, {prompts} prompt(s) × {report.config.runs} runs/arm, "
            f"{report.config.warmup} warm-up dropped)"
        )
        return MeasureUpdate(report=report, progress="measurement finished", summary=summary)

    async def aclose(self) -> None:
        """Close the HTTP clients this measurement opened."""
        for arm in self.arms:
            with contextlib.suppress(Exception):
                await arm.aclose()


def measurement_prompt(text: str, max_tokens: int) -> Prompt:
    return Prompt(id=text[:40], text=text, category="console", max_tokens=max_tokens)
