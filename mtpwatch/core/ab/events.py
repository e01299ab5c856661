"""The progress events `BenchRunner.events()` yields, for the TUI and the command's progress line."""

from __future__ import annotations

from dataclasses import dataclass

from mtpwatch.core.ab.plan import Point
from mtpwatch.core.ab.records import RunRecord
from mtpwatch.core.ab.report import BenchReport


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
