"""What to run and in which order: the bench configuration and the plan built from it.

Schedules:

- ``alternate`` (default, the measurement): the arms never run at the same time; for each prompt
  the order of the two arms alternates run by run (AB, BA, AB, ...) so slow drift cancels.
- ``race``: both arms get the same request at the same moment. Good for a demo, but both servers
  compete for the same memory bandwidth, so every output says "contended — not a measurement".
- ``restart``: one server at a time, for machines that cannot hold both (two 31B on a 128 GB
  Spark). Sessions run A, B, A (ABBA of sessions); each session starts its server, runs `warmup`
  untimed runs per prompt, then its share of measured runs, then stops the server.

The first `warmup` runs of each prompt are dropped (the seed benchmark: 12 runs, first dropped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mtpwatch.core.ab import stats
from mtpwatch.core.ab.arms import ArmName
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.jsonout import JsonFields

Schedule = Literal["alternate", "race", "restart"]

CONTENDED = "contended — not a measurement"


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


class OnPoint:
    """`concurrency` and `length` of a record's `point`, the names its JSON gives them (a run's
    record, a divergence)."""

    __slots__ = ()
    point: Point

    @property
    def concurrency(self) -> int:
        return self.point.concurrency

    @property
    def length(self) -> int | None:
        return self.point.length


@dataclass(frozen=True, slots=True)
class BenchConfig(JsonFields):
    """What to run; `to_json()` holds everything needed to build it again (the run log's header)."""

    JSON_KEYS = "runs warmup schedule lengths concurrency temperature force_lengths prompts"

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
        return Point(self.concurrency[0], max(self.lengths, default=None))


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
    arm: ArmName


@dataclass(frozen=True, slots=True)
class StopArm:
    arm: ArmName


@dataclass(frozen=True, slots=True)
class RunUnits:
    """Run these units at the same time (two for race, else one)."""

    units: tuple[Unit, ...]


Step = StartArm | StopArm | RunUnits
"""A step of the plan: start or stop a managed arm's server, or run units."""


def build_plan(config: BenchConfig, paired: bool = True) -> list[Step]:
    """Lay out every run in order, so progress totals are known and the order can be tested."""
    plan: list[Step] = []
    n_prompts = len(config.prompts)
    if not paired or config.schedule in ("alternate", "race"):
        race = paired and config.schedule == "race"
        orders: Sequence[tuple[ArmName, ...]] = (
            stats.abba_order(config.runs) if paired else [("a",)] * config.runs
        )
        for point in config.points:
            for p in range(n_prompts):
                for r, order in enumerate(orders):
                    w = r < config.warmup
                    pair = None if w else r - config.warmup
                    units = tuple(Unit(arm, point, p, r, w, pair, contended=race) for arm in order)
                    if race:
                        plan.append(RunUnits(units))
                    else:
                        plan.extend(RunUnits((u,)) for u in units)
        return plan
    measured = config.runs - config.warmup
    runs_before: dict[ArmName, int] = {}
    pairs_before: dict[ArmName, int] = {}
    for arm, n in stats.restart_phases(measured):
        plan.append(StartArm(arm))
        r0, p0 = runs_before.get(arm, 0), pairs_before.get(arm, 0)
        for point in config.points:
            for p in range(n_prompts):
                for i in range(config.warmup + n):
                    w = i < config.warmup
                    pair = None if w else p0 + i - config.warmup
                    plan.append(RunUnits((Unit(arm, point, p, r0 + i, w, pair),)))
        runs_before[arm], pairs_before[arm] = r0 + config.warmup + n, p0 + n
        plan.append(StopArm(arm))
    return plan
