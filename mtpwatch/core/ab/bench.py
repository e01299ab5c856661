"""The A/B bench engine: schedules paired runs on two arms and turns them into a `BenchReport`.

Arm A is the baseline (MTP off), arm B the treatment (MTP on); every speed-up is B / A.

Schedules:

- ``alternate`` (default, the measurement): the arms never run at the same time; for each prompt
  the order of the two arms alternates run by run (AB, BA, AB, ...) so slow drift cancels.
- ``race``: both arms get the same request at the same moment. Good for a demo, but both servers
  compete for the same memory bandwidth, so every output says "contended — not a measurement".
- ``restart``: one server at a time, for machines that cannot hold both (two 31B on a 128 GB
  Spark). Sessions run A, B, A (ABBA of sessions); each session starts its server, runs `warmup`
  untimed runs per prompt, then its share of measured runs, then stops the server.

The first `warmup` runs of each prompt are dropped (the seed benchmark: 12 runs, first dropped).
Speed per run is the client-measured decode tok/s = (tokens − 1) / (t_last − t_first) at
concurrency 1, and aggregate output tok/s (tokens of all concurrent requests / wall time) above 1.
Acceptance comes from the server's counters, differenced around each measured run of that arm
and summed, with vLLM's formulas.

The engine is a library: `BenchRunner.events()` is an async iterator of progress events (a run
finished, a pair finished with the running speed-up) for the TUI; `BenchRunner.run()` returns
the report. `arms_for_urls` builds the two HTTP arms.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from mtpwatch.core.ab import stats
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.metrics import formulas as F

Schedule = Literal["alternate", "race", "restart"]
ArmName = Literal["a", "b"]

CONTENDED = "contended — not a measurement"
ARM_ROLES: dict[str, str] = {"a": "baseline (MTP off)", "b": "treatment (MTP on)"}


# --- what an arm is ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArmRequest:
    """One generation request, independent of the HTTP client."""

    prompt: str
    max_tokens: int
    temperature: float = 0.0
    min_tokens: int | None = None
    """Force at least this many tokens (vLLM's `min_tokens`), for the break-even sweep."""
    ignore_eos: bool = False
    """vLLM's `ignore_eos`: keep generating past end-of-sequence so the length is what was asked."""


@dataclass(frozen=True, slots=True)
class ArmResult:
    """What one generation produced, measured on the client."""

    tokens: int
    ttft_s: float | None
    decode_tok_s: float | None
    """(tokens − 1) / (t_last − t_first); None with fewer than two tokens."""
    text: str = ""
    token_ids: tuple[int, ...] | None = None
    """Output token ids when the server returned them (vLLM's `return_token_ids`)."""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SpecCounters:
    """The speculative-decoding counters of one scrape (cumulative, summed over engines)."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_pos: tuple[float, ...]
    k: int
    """num_speculative_tokens: the number of `position` labels the server exports."""
    created: float | None = None
    """`_created` timestamp of the counters; a change means the server restarted."""


@runtime_checkable
class Arm(Protocol):
    """One side of the comparison: something that generates and can be scraped."""

    label: str

    async def generate(self, request: ArmRequest) -> ArmResult:
        """Run one request to completion; failures come back as `ArmResult.error`, not exceptions."""
        ...

    async def counters(self) -> SpecCounters | None:
        """Current speculative-decoding counters; None when the server has none or cannot be read."""
        ...


@runtime_checkable
class ManagedArm(Arm, Protocol):
    """An arm whose server the bench starts and stops (the restart schedule)."""

    async def start(self) -> None:
        """Start the server and wait until it answers."""
        ...

    async def stop(self) -> None:
        """Stop the server and free its memory."""
        ...


# --- configuration and plan --------------------------------------------------------------------


class BenchConfigError(ValueError):
    """A bench configuration that cannot run; `str()` is one line."""


@dataclass(frozen=True, slots=True)
class Point:
    """One condition of the sweep: a concurrency and an output length."""

    concurrency: int = 1
    length: int | None = None
    """Forced output length in tokens; None = each prompt's max_tokens with natural stopping."""

    @property
    def name(self) -> str:
        """Short label like 'c1' or 'c4 L128'."""
        return f"c{self.concurrency}" + (f" L{self.length}" if self.length is not None else "")


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What to run."""

    prompts: Sequence[Prompt]
    runs: int = 12
    """Runs per prompt and arm, warm-up included."""
    warmup: int = 1
    """Runs per prompt dropped as warm-up (and, with `restart`, run untimed after each start)."""
    schedule: Schedule = "alternate"
    lengths: Sequence[int] = ()
    """Break-even sweep: output lengths to force; empty = natural lengths (prompt max_tokens)."""
    concurrency: Sequence[int] = (1,)
    temperature: float = 0.0
    force_lengths: bool = True
    """With `lengths`, send ignore_eos + min_tokens so every run generates exactly the length asked."""

    def validate(self, paired: bool) -> None:
        """Raise `BenchConfigError` for a configuration that cannot give numbers."""
        if not self.prompts:
            raise BenchConfigError("no prompts to run")
        if self.warmup < 0:
            raise BenchConfigError(f"--warmup must be 0 or more, got {self.warmup}")
        if self.runs <= self.warmup:
            raise BenchConfigError(
                f"--runs ({self.runs}) must be larger than --warmup ({self.warmup}): "
                "nothing would be measured"
            )
        if any(length < 1 for length in self.lengths):
            raise BenchConfigError("every --lengths value must be a positive number of tokens")
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            raise BenchConfigError("every --concurrency value must be 1 or more")
        if self.schedule not in ("alternate", "race", "restart"):
            raise BenchConfigError(f"unknown schedule {self.schedule!r}")
        if not paired and self.schedule != "alternate":
            raise BenchConfigError(f"schedule {self.schedule!r} needs two servers")

    @property
    def points(self) -> list[Point]:
        """Every condition, in the order they run."""
        lengths: Sequence[int | None] = list(self.lengths) or [None]
        return [Point(c, length) for c in self.concurrency for length in lengths]

    @property
    def primary(self) -> Point:
        """The condition the headline numbers come from: first concurrency, longest (or natural) length."""
        lengths = list(self.lengths)
        return Point(self.concurrency[0], max(lengths) if lengths else None)


@dataclass(frozen=True, slots=True)
class Unit:
    """One planned measurement: `point.concurrency` copies of one prompt sent to one arm."""

    arm: ArmName
    point: Point
    prompt: int
    """Index into `BenchConfig.prompts`."""
    run: int
    """Sequential run number of this arm, prompt and point, warm-ups included."""
    warmup: bool
    pair: int | None
    """Index of the paired measurement (matched with the other arm's unit of the same pair)."""
    contended: bool = False


@dataclass(frozen=True, slots=True)
class StartArm:
    """Plan step: start a managed arm's server."""

    arm: ArmName


@dataclass(frozen=True, slots=True)
class StopArm:
    """Plan step: stop a managed arm's server."""

    arm: ArmName


@dataclass(frozen=True, slots=True)
class RunUnits:
    """Plan step: run these units at the same time (two for race, else one)."""

    units: tuple[Unit, ...]


Step = StartArm | StopArm | RunUnits


def build_plan(config: BenchConfig, paired: bool = True) -> list[Step]:
    """Lay out every run in order, so progress totals are known and the order can be tested."""
    plan: list[Step] = []
    n_prompts = len(config.prompts)
    if not paired:
        for point in config.points:
            for p in range(n_prompts):
                for r in range(config.runs):
                    w = r < config.warmup
                    plan.append(RunUnits((Unit("a", point, p, r, w, None if w else r - config.warmup),)))
        return plan
    if config.schedule in ("alternate", "race"):
        race = config.schedule == "race"
        for point in config.points:
            for p in range(n_prompts):
                for r, order in enumerate(stats.abba_order(config.runs)):
                    w = r < config.warmup
                    pair = None if w else r - config.warmup
                    units = tuple(Unit(arm, point, p, r, w, pair, contended=race) for arm in order)
                    if race:
                        plan.append(RunUnits(units))
                    else:
                        plan.extend(RunUnits((u,)) for u in units)
        return plan
    # restart: A, B, A sessions; each starts with warm-up runs of every prompt at every point.
    measured = config.runs - config.warmup
    next_run: dict[tuple[ArmName, Point, int], int] = {}
    next_pair: dict[tuple[ArmName, Point, int], int] = {}
    for arm, n in stats.restart_phases(measured):
        plan.append(StartArm(arm))
        for point in config.points:
            for p in range(n_prompts):
                key = (arm, point, p)
                for i in range(config.warmup + n):
                    run = next_run.get(key, 0)
                    next_run[key] = run + 1
                    if i < config.warmup:
                        plan.append(RunUnits((Unit(arm, point, p, run, True, None),)))
                    else:
                        pair = next_pair.get(key, 0)
                        next_pair[key] = pair + 1
                        plan.append(RunUnits((Unit(arm, point, p, run, False, pair),)))
        plan.append(StopArm(arm))
    return plan


# --- records and events --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One finished unit: client numbers and the server-counter deltas around it."""

    arm: ArmName
    prompt: str
    category: str
    point: Point
    run: int
    warmup: bool
    pair: int | None
    tokens: int
    """Completion tokens (summed over concurrent requests)."""
    ttft_s: float | None
    """Time to first token (mean over concurrent requests)."""
    decode_tok_s: float | None
    """Client decode tok/s (mean over concurrent requests)."""
    output_tok_s: float | None
    """All tokens / wall time of the unit: the aggregate rate at concurrency > 1."""
    wall_s: float
    errors: int
    error: str | None
    contended: bool
    prompt_index: int = 0
    """Position of the prompt in the workload (ids in user files need not be unique)."""
    text: str = field(default="", repr=False)
    token_ids: tuple[int, ...] | None = field(default=None, repr=False)
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    accepted_per_pos: tuple[float, ...] | None = None
    k: int | None = None

    @property
    def rate(self) -> float | None:
        """The speed used for pairing: decode tok/s at concurrency 1, aggregate output tok/s above."""
        return self.decode_tok_s if self.point.concurrency == 1 else self.output_tok_s

    @property
    def acceptance_rate(self) -> float | None:
        """Δaccepted / Δdraft_tokens over this run (vLLM's formula)."""
        if self.accepted is None or self.draft_tokens is None:
            return None
        return F.acceptance_rate(self.accepted, self.draft_tokens)

    def row(self) -> dict[str, Any]:
        """Flat per-run row for JSON `runs` and the CSV."""
        return {
            "arm": self.arm,
            "prompt": self.prompt,
            "category": self.category,
            "concurrency": self.point.concurrency,
            "length": self.point.length,
            "run": self.run,
            "warmup": self.warmup,
            "pair": self.pair,
            "tokens": self.tokens,
            "ttft_s": _round(self.ttft_s, 5),
            "decode_tok_s": _round(self.decode_tok_s, 3),
            "output_tok_s": _round(self.output_tok_s, 3),
            "wall_s": _round(self.wall_s, 4),
            "acceptance_rate": _round(self.acceptance_rate, 4),
            "drafts": self.drafts,
            "accepted": self.accepted,
            "contended": self.contended,
            "error": self.error,
        }


CSV_FIELDS: tuple[str, ...] = (
    "arm", "prompt", "category", "concurrency", "length", "run", "warmup", "pair", "tokens", "ttft_s",
    "decode_tok_s", "output_tok_s", "wall_s", "acceptance_rate", "drafts", "accepted", "contended", "error",
)  # fmt: skip


def _round(x: float | None, nd: int) -> float | None:
    return None if x is None or math.isnan(x) else round(x, nd)


@dataclass(frozen=True, slots=True)
class RunFinished:
    """Event: one unit finished."""

    record: RunRecord
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class PairFinished:
    """Event: both arms of one pair finished; `running_speedup` is the median B/A so far at this point."""

    point: Point
    prompt: str
    pair: int
    ratio: float | None
    running_speedup: float | None
    pairs_done: int
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class StatusChanged:
    """Event: something a progress line should say (starting a server, warming up)."""

    message: str


@dataclass(frozen=True, slots=True)
class BenchFinished:
    """Event: the last one; carries the report."""

    report: BenchReport


BenchEvent = RunFinished | PairFinished | StatusChanged | BenchFinished


# --- the runner ---------------------------------------------------------------------------------


class BenchRunner:
    """Runs a `BenchConfig` against arm A (baseline) and optionally arm B (treatment)."""

    def __init__(self, config: BenchConfig, a: Arm, b: Arm | None = None) -> None:
        config.validate(paired=b is not None)
        if config.schedule == "restart":
            for arm in (a, b):
                if not isinstance(arm, ManagedArm):
                    raise BenchConfigError("the restart schedule needs a launch command for each server")
        self.config = config
        self.arms: dict[ArmName, Arm] = {"a": a} if b is None else {"a": a, "b": b}
        self.plan = build_plan(config, paired=b is not None)
        self.total = sum(len(s.units) for s in self.plan if isinstance(s, RunUnits))
        self._last: dict[ArmName, SpecCounters | None] = {}
        self._running: set[ArmName] = set()
        self.records: list[RunRecord] = []
        """Every finished unit so far, in order (what `partial_report` summarises after an interrupt)."""
        self.problems: dict[ArmName, list[str]] = {}
        """Per arm, one line per kind of trouble seen (/metrics unreadable, server restarted)."""

    def _problem(self, arm: ArmName, message: str) -> None:
        seen = self.problems.setdefault(arm, [])
        if message not in seen:
            seen.append(message)

    async def _scrape(self, arm: ArmName) -> SpecCounters | None:
        try:
            return await self.arms[arm].counters()
        except Exception as exc:  # a scrape failure must not lose the run; acceptance is then unknown
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self._problem(arm, f"/metrics could not be read, acceptance is incomplete ({text})")
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
        if before is not None and after is not None and not _same_session(before, after):
            self._problem(
                unit.arm,
                "the server restarted during the bench (its counters reset); "
                "runs across the restart have no acceptance numbers",
            )
        return _record(unit, prompt, results, wall, before, after)

    async def events(self) -> AsyncIterator[BenchEvent]:
        """Run the plan, yielding progress events; the last event is `BenchFinished`."""
        records = self.records
        records.clear()
        by_pair: dict[tuple[ArmName, Point, int, int], RunRecord] = {}
        ratios: dict[Point, list[float]] = {}
        done = 0
        try:
            for step in self.plan:
                if isinstance(step, StartArm):
                    yield StatusChanged(f"starting server {step.arm.upper()} ({ARM_ROLES[step.arm]})")
                    managed = self.arms[step.arm]
                    assert isinstance(managed, ManagedArm)
                    self._last[step.arm] = None  # counters restart from zero
                    self._running.add(step.arm)
                    await managed.start()
                    yield StatusChanged(f"server {step.arm.upper()} is up; warming up")
                    continue
                if isinstance(step, StopArm):
                    yield StatusChanged(f"stopping server {step.arm.upper()}")
                    managed = self.arms[step.arm]
                    assert isinstance(managed, ManagedArm)
                    self._running.discard(step.arm)
                    await managed.stop()
                    continue
                finished = await asyncio.gather(*(self._execute(u) for u in step.units))
                for rec in finished:
                    records.append(rec)
                    done += 1
                    yield RunFinished(rec, done, self.total)
                    if rec.pair is None or len(self.arms) < 2:
                        continue
                    key = (rec.arm, rec.point, rec.prompt_index, rec.pair)
                    by_pair[key] = rec
                    other: ArmName = "b" if rec.arm == "a" else "a"
                    mate = by_pair.get((other, rec.point, key[2], rec.pair))
                    if mate is None:
                        continue
                    ra, rb = (mate, rec) if rec.arm == "b" else (rec, mate)
                    ratio = _ratio(ra, rb)
                    series = ratios.setdefault(rec.point, [])
                    if ratio is not None:
                        series.append(ratio)
                    yield PairFinished(
                        point=rec.point,
                        prompt=rec.prompt,
                        pair=rec.pair,
                        ratio=ratio,
                        running_speedup=statistics.median(series) if series else None,
                        pairs_done=len(series),
                        done=done,
                        total=self.total,
                    )
        finally:
            for name in list(self._running):
                managed = self.arms[name]
                if isinstance(managed, ManagedArm):
                    await managed.stop()
            self._running.clear()
        yield BenchFinished(self.partial_report())

    def partial_report(self, interrupted: str | None = None) -> BenchReport:
        """The report of the runs finished so far (after Ctrl-C or a failure, a partial one).

        `interrupted` says why the bench stopped early; it is shown and written to the JSON.
        """
        return build_report(
            self.config,
            self.records,
            paired=len(self.arms) == 2,
            labels=self._labels(),
            problems={k: tuple(v) for k, v in self.problems.items()},
            interrupted=interrupted,
        )

    def _labels(self) -> dict[str, str]:
        return {name: arm.label for name, arm in self.arms.items()}

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


def _ratio(a: RunRecord, b: RunRecord) -> float | None:
    ra, rb = a.rate, b.rate
    if a.error or b.error or ra is None or rb is None or ra <= 0:
        return None
    return rb / ra


def _record(
    unit: Unit,
    prompt: Prompt,
    results: Sequence[ArmResult],
    wall: float,
    before: SpecCounters | None,
    after: SpecCounters | None,
) -> RunRecord:
    ok = [r for r in results if r.error is None]
    errors = [r.error for r in results if r.error is not None]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    decodes = [r.decode_tok_s for r in ok if r.decode_tok_s is not None]
    tokens = sum(r.tokens for r in ok)
    first = results[0]
    spec: dict[str, Any] = {}
    if before is not None and after is not None and _same_session(before, after):
        spec = {
            "drafts": after.drafts - before.drafts,
            "draft_tokens": after.draft_tokens - before.draft_tokens,
            "accepted": after.accepted - before.accepted,
            "accepted_per_pos": tuple(
                x - y for x, y in zip(after.accepted_per_pos, before.accepted_per_pos, strict=False)
            ),
            "k": after.k,
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
        text=first.text,
        token_ids=first.token_ids,
        **spec,
    )


def _same_session(before: SpecCounters, after: SpecCounters) -> bool:
    if before.created is not None and after.created is not None and before.created != after.created:
        return False
    return after.drafts >= before.drafts and after.accepted >= before.accepted


# --- the report ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Acceptance:
    """Server-counter acceptance summed over a set of measured runs (vLLM's formulas)."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_pos: tuple[float, ...]
    k: int | None

    @property
    def acceptance_rate(self) -> float | None:
        """Δaccepted / Δdraft_tokens."""
        return F.acceptance_rate(self.accepted, self.draft_tokens)

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + Δaccepted / Δdrafts (includes the bonus token)."""
        return F.mean_acceptance_length(self.accepted, self.drafts)

    @property
    def per_position(self) -> tuple[float, ...] | None:
        """Δper_pos[i] / Δdrafts, marginal (P(first i+1 drafts all accepted))."""
        if self.drafts <= 0:
            return None
        return F.per_position_marginal(self.accepted_per_pos, self.drafts)


def _acceptance(records: Sequence[RunRecord]) -> Acceptance | None:
    with_spec = [r for r in records if r.drafts is not None and r.k]
    if not with_spec:
        return None
    width = max(len(r.accepted_per_pos or ()) for r in with_spec)
    per_pos = [0.0] * width
    for r in with_spec:
        for i, x in enumerate(r.accepted_per_pos or ()):
            per_pos[i] += x
    return Acceptance(
        drafts=sum(r.drafts or 0.0 for r in with_spec),
        draft_tokens=sum(r.draft_tokens or 0.0 for r in with_spec),
        accepted=sum(r.accepted or 0.0 for r in with_spec),
        accepted_per_pos=tuple(per_pos),
        k=with_spec[-1].k,
    )


@dataclass(frozen=True, slots=True)
class ArmSummary:
    """One arm's measured runs in one group (a point, or a category within it)."""

    runs: int
    failed: int
    rate: stats.Summary | None
    """Decode tok/s (concurrency 1) or aggregate output tok/s (above), per measured run."""
    ttft_s: stats.Summary | None
    tokens: stats.Summary | None
    acceptance: Acceptance | None
    prompt_cv: dict[str, float] = field(default_factory=dict)
    """CV of the repeated runs of each prompt: the run-to-run noise (pooled CV also mixes prompts)."""

    @property
    def max_prompt_cv(self) -> float | None:
        """The noisiest prompt's CV; None with fewer than two runs per prompt."""
        return max(self.prompt_cv.values()) if self.prompt_cv else None

    @property
    def noisy_prompts(self) -> list[str]:
        """Prompts whose repeated runs vary by more than `stats.CV_FLAG` (10 %)."""
        return [p for p, cv in self.prompt_cv.items() if cv > stats.CV_FLAG]

    def to_json(self) -> dict[str, Any]:
        """JSON object for `arms.a` / `arms.b`."""
        acc = self.acceptance
        rate = _summary_json(self.rate)
        if rate is not None:
            rate["cv_within_prompt_max"] = _round(self.max_prompt_cv, 4)
            rate["noisy"] = bool(self.noisy_prompts)
            rate["noisy_prompts"] = self.noisy_prompts
        return {
            "runs": self.runs,
            "failed": self.failed,
            "decode_tok_s": rate,
            "ttft_s": _summary_json(self.ttft_s, 5),
            "tokens": _summary_json(self.tokens, 1),
            "acceptance_rate": _round(acc.acceptance_rate, 4) if acc else None,
            "mean_acceptance_length": _round(acc.mean_acceptance_length, 4) if acc else None,
            "per_position": [round(x, 4) for x in acc.per_position] if acc and acc.per_position else None,
            "num_speculative_tokens": acc.k if acc else None,
            "drafts": acc.drafts if acc else None,
        }


def _summary_json(s: stats.Summary | None, nd: int = 3) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "median": round(s.median, nd),
        "mean": round(s.mean, nd),
        "cv": round(s.cv, 4),
        "n": s.n,
        "min": round(s.min, nd),
        "max": round(s.max, nd),
    }


def _arm_summary(records: Sequence[RunRecord]) -> ArmSummary:
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.error is None]
    rates = [x for x in (r.rate for r in ok) if x is not None]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    per_prompt: dict[str, list[float]] = {}
    for r in ok:
        if r.rate is not None:
            per_prompt.setdefault(r.prompt, []).append(r.rate)
    return ArmSummary(
        runs=len(measured),
        failed=sum(1 for r in measured if r.error is not None),
        rate=stats.summarize(rates) if rates else None,
        ttft_s=stats.summarize(ttfts) if ttfts else None,
        tokens=stats.summarize([r.tokens for r in ok]) if ok else None,
        acceptance=_acceptance(measured),
        prompt_cv={p: stats.summarize(xs).cv for p, xs in per_prompt.items() if len(xs) > 1},
    )


def _pairs(records: Sequence[RunRecord]) -> list[tuple[RunRecord, RunRecord]]:
    a = {(r.prompt_index, r.point, r.pair): r for r in records if r.arm == "a" and r.pair is not None}
    out: list[tuple[RunRecord, RunRecord]] = []
    for r in records:
        if r.arm == "b" and r.pair is not None:
            mate = a.get((r.prompt_index, r.point, r.pair))
            if mate is not None:
                out.append((mate, r))
    return out


def _speedup(records: Sequence[RunRecord]) -> stats.SpeedupSummary | None:
    base: list[float] = []
    treat: list[float] = []
    for ra, rb in _pairs(records):
        if _ratio(ra, rb) is not None:
            assert ra.rate is not None and rb.rate is not None
            base.append(ra.rate)
            treat.append(rb.rate)
    return stats.speedup(base, treat) if base else None


def _speedup_json(s: stats.SpeedupSummary | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "median": round(s.median, 4),
        "ci_low": round(s.ci.low, 4),
        "ci_high": round(s.ci.high, 4),
        "ci_coverage": round(s.ci.coverage, 4),
        "ci_method": s.ci.method,
        "mean": round(s.mean, 4),
        "cv": round(s.cv, 4),
        "ratio_of_means": _round(s.ratio_of_means, 4),
        "pairs": s.n_pairs,
    }


@dataclass(frozen=True, slots=True)
class GroupReport:
    """Both arms and the paired speed-up for a set of records (a point, or one category of it)."""

    arms: dict[str, ArmSummary]
    speedup: stats.SpeedupSummary | None

    def to_json(self) -> dict[str, Any]:
        """JSON: `speedup` and `arms`."""
        return {
            "speedup": _speedup_json(self.speedup),
            "arms": {k: v.to_json() for k, v in self.arms.items()},
        }


def _group(records: Sequence[RunRecord], paired: bool) -> GroupReport:
    arms = {
        name: _arm_summary([r for r in records if r.arm == name])
        for name in (("a", "b") if paired else ("a",))
    }
    return GroupReport(arms=arms, speedup=_speedup(records) if paired else None)


@dataclass(frozen=True, slots=True)
class PointReport:
    """Results at one point of the sweep, overall and per category."""

    point: Point
    overall: GroupReport
    categories: dict[str, GroupReport]

    def to_json(self) -> dict[str, Any]:
        """JSON object of one entry of `points`."""
        return {
            "concurrency": self.point.concurrency,
            "length": self.point.length,
            "speed_metric": _metric_name(self.point),
            **self.overall.to_json(),
            "categories": {k: v.to_json() for k, v in self.categories.items()},
        }


def _metric_name(point: Point) -> str:
    if point.concurrency == 1:
        return "client decode tok/s = (tokens-1)/(t_last-t_first), per request"
    return f"client aggregate output tok/s = tokens of {point.concurrency} concurrent requests / wall time"


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where the two arms' outputs first differ."""

    prompt: str
    category: str
    point: Point
    pair: int
    compared: Literal["token_ids", "text"]
    token_index: int | None
    """Index of the first differing token (None when only text could be compared)."""
    char_index: int
    """Index of the first differing character of the decoded text."""
    a_tokens: tuple[int, ...] | None
    b_tokens: tuple[int, ...] | None
    a_context: str
    b_context: str

    def to_json(self) -> dict[str, Any]:
        """JSON object of `first_divergence`."""
        return {
            "prompt": self.prompt,
            "category": self.category,
            "concurrency": self.point.concurrency,
            "length": self.point.length,
            "pair": self.pair,
            "compared": self.compared,
            "token_index": self.token_index,
            "char_index": self.char_index,
            "a_tokens": list(self.a_tokens) if self.a_tokens is not None else None,
            "b_tokens": list(self.b_tokens) if self.b_tokens is not None else None,
            "a_context": self.a_context,
            "b_context": self.b_context,
        }


@dataclass(frozen=True, slots=True)
class LosslessReport:
    """Temperature-0 output equality between the arms, pair by pair."""

    checked: bool
    """False when the check does not apply (one server, temperature > 0, no successful pairs)."""
    pairs_compared: int
    pairs_differing: int
    compared_by: str
    """'token_ids', 'text' or 'token_ids+text' (mixed)."""
    first: Divergence | None
    note: str = ""

    @property
    def identical(self) -> bool | None:
        """True/False when checked, None otherwise."""
        return (self.pairs_differing == 0) if self.checked else None


CONTEXT_TOKENS = 8
CONTEXT_CHARS = 40


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """Index of the first element where `a` and `b` differ (a length mismatch counts); None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_outputs(a: RunRecord, b: RunRecord) -> Divergence | None:
    """Compare two runs' outputs by token ids when both have them, else by text."""
    char = first_difference(a.text, b.text)
    if a.token_ids is not None and b.token_ids is not None:
        tok = first_difference(a.token_ids, b.token_ids)
        if tok is None:
            return None
        compared: Literal["token_ids", "text"] = "token_ids"
    else:
        if char is None:
            return None
        tok = None
        compared = "text"
    c = char if char is not None else min(len(a.text), len(b.text))
    lo = max(0, c - CONTEXT_CHARS)
    hi = c + CONTEXT_CHARS
    return Divergence(
        prompt=a.prompt,
        category=a.category,
        point=a.point,
        pair=a.pair if a.pair is not None else -1,
        compared=compared,
        token_index=tok,
        char_index=c,
        a_tokens=a.token_ids[max(0, tok - CONTEXT_TOKENS) : tok + CONTEXT_TOKENS]
        if tok is not None and a.token_ids
        else None,
        b_tokens=b.token_ids[max(0, tok - CONTEXT_TOKENS) : tok + CONTEXT_TOKENS]
        if tok is not None and b.token_ids
        else None,
        a_context=a.text[lo:hi],
        b_context=b.text[lo:hi],
    )


def lossless_check(records: Sequence[RunRecord], temperature: float, paired: bool) -> LosslessReport:
    """Compare every successful measured pair's outputs (meaningful at temperature 0 only)."""
    if not paired:
        return LosslessReport(False, 0, 0, "", None, "one server: nothing to compare")
    if temperature != 0:
        return LosslessReport(
            False, 0, 0, "", None, f"temperature {temperature}: outputs are not expected to match"
        )
    pairs = [(a, b) for a, b in _pairs(records) if a.error is None and b.error is None]
    if not pairs:
        return LosslessReport(False, 0, 0, "", None, "no successful pairs to compare")
    by: set[str] = set()
    first: Divergence | None = None
    differing = 0
    for a, b in pairs:
        by.add("token_ids" if a.token_ids is not None and b.token_ids is not None else "text")
        d = compare_outputs(a, b)
        if d is not None:
            differing += 1
            first = first or d
    return LosslessReport(True, len(pairs), differing, "+".join(sorted(by)), first)


@dataclass(frozen=True, slots=True)
class BenchReport:
    """Everything a bench run found; `to_json()` is the `--json` file."""

    config: BenchConfig
    paired: bool
    labels: Mapping[str, str]
    points: list[PointReport]
    primary: PointReport
    lossless: LosslessReport
    break_even: dict[int, stats.BreakEven]
    """Per concurrency, when the sweep had lengths."""
    break_even_points: dict[int, list[tuple[int, float]]]
    records: list[RunRecord]
    problems: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per arm, trouble that makes numbers incomplete (/metrics unreadable, server restarted)."""
    interrupted: str | None = None
    """Why the bench stopped before its plan was done (Ctrl-C, SIGTERM); None when it ran to the end."""

    @property
    def contended(self) -> bool:
        """True for the race schedule: numbers are for show, not a measurement."""
        return self.config.schedule == "race"

    @property
    def failed(self) -> int:
        """Requests that failed (warm-ups included)."""
        return sum(r.errors for r in self.records)

    def gate_failures(self, require_identical: bool = False) -> list[str]:
        """Sanity gates; each failure is one line. Empty means the numbers can be trusted."""
        out: list[str] = []
        if self.failed:
            first = next(r.error for r in self.records if r.error)
            out.append(f"{self.failed} request(s) failed (first: {first})")
        planned = sum(len(s.units) for s in build_plan(self.config, self.paired) if isinstance(s, RunUnits))
        if len(self.records) != planned:
            out.append(f"completed {len(self.records)} of {planned} planned runs")
        for name, arm in self.primary.overall.arms.items():
            acc = arm.acceptance
            if acc is None or acc.k is None:
                continue
            if len(acc.accepted_per_pos) != acc.k:
                out.append(
                    f"arm {name.upper()}: per-position list has {len(acc.accepted_per_pos)} entries, "
                    f"but the server exports k={acc.k} positions"
                )
            elif acc.drafts > 0 and abs(sum(acc.accepted_per_pos) - acc.accepted) > max(
                acc.k, 0.01 * acc.accepted
            ):
                out.append(
                    f"arm {name.upper()}: Σ per-position accepted ({sum(acc.accepted_per_pos):.0f}) "
                    f"!= accepted ({acc.accepted:.0f}); the counters are inconsistent"
                )
        if require_identical and self.lossless.identical is False:
            d = self.lossless.first
            where = f" (first at {d.prompt}, token {d.token_index}, char {d.char_index})" if d else ""
            out.append(
                f"outputs differ in {self.lossless.pairs_differing} of "
                f"{self.lossless.pairs_compared} pairs{where}"
            )
        if require_identical and self.lossless.identical is None:
            out.append(f"--require-identical: outputs could not be compared ({self.lossless.note})")
        return out

    def to_json(self, require_identical: bool = False) -> dict[str, Any]:
        """The `--json` document."""
        p = self.primary
        cfg = self.config
        return {
            "tool": "mtpwatch bench",
            "schedule": cfg.schedule,
            "measurement": CONTENDED
            if self.contended
            else "alternating ABBA, never concurrent"
            if cfg.schedule == "alternate"
            else "restart ABBA sessions, one server at a time",
            "treatment": "B/A: arm B = treatment (MTP on) over arm A = baseline (MTP off)"
            if self.paired
            else None,
            "servers": dict(self.labels),
            "runs_per_prompt": cfg.runs,
            "warmup_runs": cfg.warmup,
            "temperature": cfg.temperature,
            "prompts": len(cfg.prompts),
            "speed_metric": _metric_name(p.point),
            "acceptance_source": "server /metrics counters, deltas around each measured run, summed",
            "concurrency": p.point.concurrency,
            "length": p.point.length,
            "speedup": _speedup_json(p.overall.speedup),
            "identical_outputs": self.lossless.identical,
            "lossless": {
                "checked": self.lossless.checked,
                "pairs_compared": self.lossless.pairs_compared,
                "pairs_differing": self.lossless.pairs_differing,
                "compared_by": self.lossless.compared_by,
                "note": self.lossless.note,
            },
            "first_divergence": self.lossless.first.to_json() if self.lossless.first else None,
            "arms": {k: v.to_json() for k, v in p.overall.arms.items()},
            "categories": {k: v.to_json() for k, v in p.categories.items()},
            "break_even": {
                str(c): {
                    "kind": be.kind,
                    "length": _round(be.length, 1),
                    "verdict": be.verdict,
                    "points": [
                        {"length": length, "speedup": round(s, 4)} for length, s in self.break_even_points[c]
                    ],
                }
                for c, be in self.break_even.items()
            },
            "points": [pt.to_json() for pt in self.points],
            "failed_requests": self.failed,
            "interrupted": self.interrupted,
            "problems": {k: list(v) for k, v in self.problems.items()},
            "gates": self.gate_failures(require_identical),
            "runs": [r.row() for r in self.records],
        }


def build_report(
    config: BenchConfig,
    records: Sequence[RunRecord],
    *,
    paired: bool,
    labels: Mapping[str, str] | None = None,
    problems: Mapping[str, tuple[str, ...]] | None = None,
    interrupted: str | None = None,
) -> BenchReport:
    """Turn run records into a report (also usable on records loaded from elsewhere)."""
    points: list[PointReport] = []
    for point in config.points:
        recs = [r for r in records if r.point == point]
        cats: dict[str, GroupReport] = {}
        for cat in dict.fromkeys(r.category for r in recs):
            cats[cat] = _group([r for r in recs if r.category == cat], paired)
        points.append(PointReport(point, _group(recs, paired), cats))
    primary = next((pt for pt in points if pt.point == config.primary), points[0])
    be: dict[int, stats.BreakEven] = {}
    be_points: dict[int, list[tuple[int, float]]] = {}
    if paired and config.lengths:
        for c in config.concurrency:
            pts = [
                (pt.point.length, pt.overall.speedup.median)
                for pt in points
                if pt.point.concurrency == c
                and pt.point.length is not None
                and pt.overall.speedup is not None
            ]
            if pts:
                be_points[c] = pts
                be[c] = stats.break_even(pts)
    return BenchReport(
        config=config,
        paired=paired,
        labels=dict(labels or {}),
        points=points,
        primary=primary,
        lossless=lossless_check(records, config.temperature, paired),
        break_even=be,
        break_even_points=be_points,
        records=list(records),
        problems=dict(problems or {}),
        interrupted=interrupted,
    )


# --- arms over HTTP ------------------------------------------------------------------------------


class HttpArm:
    """An arm that talks to a running vLLM (or the simulator) through `VllmClient`."""

    def __init__(
        self,
        url: str,
        *,
        label: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        chat: bool = False,
        transport: Any = None,
        stream_timeout: float = 600.0,
    ) -> None:
        """Args:
        url: base URL (anything `normalize_url` accepts; raises `ValueError` with one line).
        label: name shown in reports; defaults to the URL.
        model: served model name for requests and for picking the model's counters.
        api_key: Bearer token (falls back to VLLM_API_KEY).
        chat: use /v1/chat/completions instead of /v1/completions.
        transport: an httpx transport for tests.
        stream_timeout: seconds a stream may stay silent before it fails.
        """
        from mtpwatch.core.http.client import VllmClient

        self.client = VllmClient(url, api_key=api_key, transport=transport, stream_timeout=stream_timeout)
        self.url = self.client.base_url
        self.label = label or self.url
        self.model = model
        self.chat = chat

    async def generate(self, request: ArmRequest) -> ArmResult:
        """Stream one request (asking for token ids) and return the client-side numbers."""
        from mtpwatch.core.http.generation import GenerationRequest

        extra: dict[str, Any] = {}
        if request.min_tokens is not None:
            extra["min_tokens"] = request.min_tokens
        result = await self.client.generate(
            GenerationRequest(
                prompt=request.prompt,
                model=self.model,
                chat=self.chat,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                return_token_ids=True,
                ignore_eos=request.ignore_eos,
                extra=extra,
            )
        )
        return ArmResult(
            tokens=result.completion_tokens,
            ttft_s=result.ttft_s,
            decode_tok_s=result.decode_tok_s,
            # reasoning parsers move text out of `content`; compare everything the model wrote
            text=result.reasoning + result.text,
            token_ids=result.token_ids,
            error=result.error,
        )

    async def counters(self) -> SpecCounters | None:
        """The model's speculative-decoding counters; None when speculation is off."""
        snap = await self.client.scrape(self.model)
        if not snap.speculative:
            return None
        return SpecCounters(
            drafts=snap.drafts,
            draft_tokens=snap.draft_tokens,
            accepted=snap.accepted,
            accepted_per_pos=tuple(snap.accepted_per_pos),
            k=snap.num_speculative_tokens,
            created=snap.created,
        )

    async def check(self) -> None:
        """Fail early with one line (a `ServerError`) when the server cannot be reached or refuses the key."""
        await self.client.models()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.aclose()


class LaunchedArm(HttpArm):
    """An `HttpArm` whose server the bench starts and stops itself (the restart schedule)."""

    def __init__(
        self,
        url: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 900.0,
        **kwargs: Any,
    ) -> None:
        """Args:
        url: where the launched server will listen.
        argv: the full server command line (e.g. `vllm serve MODEL --port 8001 ...`).
        env: extra environment variables.
        startup_timeout_s: give up when /health has not answered after this long.
        **kwargs: passed to `HttpArm`.
        """
        super().__init__(url, **kwargs)
        self.argv = tuple(argv)
        self.env = dict(env or {})
        self.startup_timeout_s = startup_timeout_s
        self._process: Any = None

    async def start(self) -> None:
        """Start the server process and wait for /health; raises `StartupError` (one line + log tail)."""
        from mtpwatch.core.launch.process import ServerProcess

        self._process = await ServerProcess.start(self.argv, self.env)
        headers = {"Authorization": f"Bearer {self.client.api_key}"} if self.client.api_key else None
        try:
            await self._process.wait_healthy(self.url, timeout=self.startup_timeout_s, headers=headers)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop the server's whole process group (idempotent)."""
        process, self._process = self._process, None
        if process is not None:
            await process.stop()
