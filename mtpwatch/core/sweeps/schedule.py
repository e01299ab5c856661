"""The best k at each concurrency, and the batch-size schedule vLLM reads (pure).

A k sweep at several concurrencies (`bench --start … --sweep-k 0,1,2,4 --concurrency 1,4,16`) has,
for every k > 0, a paired bench report with one point per concurrency: k against its own k=0 runs,
the same prompt sent `c` times at once (the speed is aggregate output tok/s above 1). From those:

- the k at each concurrency is chosen by `core.sweeps.resolve`'s rule; where one k is within the
  noise of the best at every concurrency the advice is that fixed k (`ConcurrencyAdvice.fixed_k`),
  not a schedule the intervals do not resolve;
- the schedule is vLLM's `num_speculative_tokens_per_batch_size` (`SpeculativeConfig`, 0.32/0.33):
  inclusive `(first_batch_size, last_batch_size, k)` ranges, sorted, from batch size 1, without
  overlap; vLLM keeps the previous range's k in a gap or past the last range. Each measured
  concurrency c_i owns the batch sizes up to the geometric midpoint ⌊√(c_i · c_(i+1))⌋ to the next
  (step costs grow roughly with the log of the batch), the last range ends at the largest measured
  concurrency, and neighbours with the same k merge. Batch size = requests running at once, which
  is what `--concurrency` holds;
- `--verify-schedule` measures that schedule head to head against the best fixed k at the
  concurrencies where that k is best (`verify_groups`), one server at a time, in two benches: the
  fixed k as arm A, then the schedule as arm A. `head_to_head` pools their pairs (the second's
  inverted), so whatever favours one arm's place in the restart schedule cancels, and one
  comparison in one unit (schedule / fixed k) replaces two benches against k = 0 side by side,
  whose server lives differ by up to ~10 % on a CPU build. "No slower" when the pooled 95 % CI
  reaches 1.0 (`VerifyRow`).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mtpwatch.core.ab import stats
from mtpwatch.core.ab.records import match_pairs, pair_ratio
from mtpwatch.core.jsonout import JsonFields, key
from mtpwatch.core.provenance import SPEC_CONFIG_FLAGS
from mtpwatch.core.sweeps.resolve import RULE, Choice, Estimate, best_median, common_choice, resolve

Range = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Cell(JsonFields):
    """k against k=0 at one concurrency."""

    JSON_KEYS = "k concurrency speedup ci pairs coverage rate baseline_rate"
    JSON_PROPS = {"ci": key("speedup_ci", nd=4)}

    k: int
    concurrency: int
    speedup: float = field(metadata=key(nd=4))
    low: float
    high: float
    pairs: int
    rate: float | None = field(metadata=key("tok_s", nd=3))
    """Median speed of the k arm (decode tok/s at concurrency 1, aggregate output tok/s above)."""
    baseline_rate: float | None = field(metadata=key("baseline_tok_s", nd=3))
    coverage: float = field(default=0.95, metadata=key("ci_coverage", nd=4))
    """What [low, high] achieves (`core.ab.stats.median_ci`): below 0.95 with too few pairs."""

    @property
    def ci(self) -> tuple[float, float]:
        return self.low, self.high


def concurrency_table(reports: Mapping[int, Any]) -> dict[int, dict[int, Cell]]:
    """concurrency → k → cell, from each k's bench report (a `core.ab.report.BenchReport`) at its
    primary length (the natural one unless forced lengths were swept)."""
    table: dict[int, dict[int, Cell]] = {}
    for k in sorted(reports):
        length = reports[k].primary.point.length
        for pt in reports[k].points:
            sp = pt.overall.speedup
            if pt.point.length != length or sp is None:
                continue
            a, b = pt.overall.arms.get("a"), pt.overall.arms.get("b")
            rate = b.rate.median if b is not None and b.rate is not None else None
            base = a.rate.median if a is not None and a.rate is not None else None
            c = pt.point.concurrency
            table.setdefault(c, {})[k] = Cell(
                k, c, sp.median, sp.ci.low, sp.ci.high, sp.n_pairs, rate, base, sp.ci.coverage
            )
    return dict(sorted(table.items()))


def best_per_concurrency(table: Mapping[int, Mapping[int, Cell]]) -> dict[int, int]:
    """The k with the highest median speed-up at each concurrency; 0 when none beats 1.0."""
    return {
        c: best_median({k: cell.speedup for k, cell in cells.items()})
        for c, cells in sorted(table.items())
        if cells
    }


def batch_schedule(best: Mapping[int, int]) -> tuple[Range, ...]:
    """Inclusive (first_batch_size, last_batch_size, k) ranges covering 1 … the largest concurrency;
    ValueError: no concurrency, or one below 1."""
    levels = sorted(best)
    if not levels or levels[0] < 1:
        raise ValueError("a schedule needs measured concurrencies ≥ 1")
    ranges: list[Range] = []
    start = 1
    for i, c in enumerate(levels):
        end = levels[-1] if i == len(levels) - 1 else max(c, math.isqrt(c * levels[i + 1]))
        k = best[c]
        if ranges and ranges[-1][2] == k:
            ranges[-1] = (ranges[-1][0], end, k)
        else:
            ranges.append((start, end, k))
        start = end + 1
    return tuple(ranges)


def schedule_config(
    schedule: Sequence[Range], base: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """A ready `--speculative-config`: the base config (method, drafter, …) with
    num_speculative_tokens = the schedule's largest k and the schedule; None when every k is 0."""
    top = max((k for _, _, k in schedule), default=0)
    if top < 1:
        return None
    config = fixed_config(base or {}, top)
    config["num_speculative_tokens_per_batch_size"] = [list(r) for r in schedule]
    return config


def fixed_config(base: Mapping[str, Any], k: int) -> dict[str, Any]:
    """The `--speculative-config` of a fixed k: `base` (the schedule's, or the sweep's) with
    num_speculative_tokens = k and no batch-size schedule."""
    config = {key: v for key, v in base.items() if key != "num_speculative_tokens_per_batch_size"}
    config["num_speculative_tokens"] = k
    return config


def head_to_head(k: int, forward: Any, reverse: Any | None) -> dict[int, Cell]:
    """The schedule / fixed k at each concurrency, pooled from two `core.ab.report.BenchReport`s at the
    primary length, `forward` (fixed k as arm A) and `reverse` (the schedule as A; None: not run): median
    and its distribution-free CI; `rate` is the schedule's median speed, `baseline_rate` fixed k's."""
    ratios: dict[int, list[float]] = {}
    speeds: dict[tuple[int, str], list[float]] = {}
    for report, flip in ((forward, False), (reverse, True)):
        if report is None:
            continue
        length = report.primary.point.length
        for a, b in match_pairs(report.records):
            ratio = pair_ratio(a, b)
            if a.point.length != length or ratio is None or ratio <= 0:
                continue
            c = a.point.concurrency
            ratios.setdefault(c, []).append(1.0 / ratio if flip else ratio)
            fixed, sched = (b, a) if flip else (a, b)
            for role, rec in (("fixed", fixed), ("schedule", sched)):
                if rec.rate is not None:
                    speeds.setdefault((c, role), []).append(rec.rate)
    medians = {key: statistics.median(v) for key, v in speeds.items()}
    out: dict[int, Cell] = {}
    for c, values in sorted(ratios.items()):
        ci = stats.median_ci(values)
        rate, base = medians.get((c, "schedule")), medians.get((c, "fixed"))
        out[c] = Cell(k, c, statistics.median(values), ci.low, ci.high, len(values), rate, base, ci.coverage)
    return out


def verify_groups(best: Mapping[int, int]) -> dict[int, tuple[int, ...]]:
    """best fixed k → the concurrencies where it is best: one head-to-head check each (two benches,
    both orders)."""
    out: dict[int, tuple[int, ...]] = {}
    for c, k in sorted(best.items()):
        out[k] = (*out.get(k, ()), c)
    return out


@dataclass(frozen=True, slots=True)
class VerifyRow(JsonFields):
    """The schedule against the best fixed k at one concurrency, head to head."""

    JSON_KEYS = "concurrency best_k best_speedup head ratio no_slower"
    JSON_PROPS = {"best_speedup": key("best_fixed_speedup", nd=4), "ratio": key(nd=4)}

    concurrency: int
    best_k: int = field(metadata=key("best_fixed_k"))
    best: Cell | None
    """The best fixed k's cell in the sweep, against k=0 (None when the best is k=0: 1.0)."""
    head: Cell | None = field(metadata=key("schedule_vs_best_fixed"))
    """The schedule against the best fixed k (`head_to_head`, both orders pooled): `speedup` =
    schedule / fixed k and its CI, `k` the fixed k (None: not measured)."""

    @property
    def best_speedup(self) -> float:
        return self.best.speedup if self.best is not None else 1.0

    @property
    def ratio(self) -> float | None:
        """The schedule's median paired speed-up over the best fixed k."""
        return None if self.head is None else self.head.speedup

    @property
    def no_slower(self) -> bool | None:
        """The head-to-head 95 % CI reaches 1.0 (None: not measured)."""
        return None if self.head is None else self.head.high >= 1.0

    @property
    def weak(self) -> bool:
        """The head-to-head interval covers less than 95 % (too few pairs): its verdict is a hint."""
        return self.head is not None and self.head.coverage < 0.95


def verify(
    table: Mapping[int, Mapping[int, Cell]], best: Mapping[int, int], heads: Mapping[int, Cell]
) -> list[VerifyRow]:
    """At each measured concurrency: the best fixed k's sweep cell and the head-to-head cell."""
    return [
        VerifyRow(c, best[c], table.get(c, {}).get(best[c]) if best[c] else None, heads.get(c))
        for c in sorted(best)
    ]


@dataclass(frozen=True, slots=True)
class ConcurrencyAdvice:
    """A sweep's per-concurrency result: every cell, the best k at each, what the data resolves, the
    advice (a fixed k or a schedule) and the schedule's check."""

    table: Mapping[int, Mapping[int, Cell]]
    best: Mapping[int, int]
    """The highest median at each concurrency (resolved or not: `choices` says)."""
    schedule: tuple[Range, ...]
    """The schedule of the choices when no one k does as well everywhere; else the medians' schedule,
    which the data does not resolve (`--verify-schedule` measures it head to head)."""
    config: Mapping[str, Any] | None
    """The ready `--speculative-config` of the advice: the fixed k's when `fixed_k` ≥ 1, else the
    schedule's (None: no k beats k=0 within the noise anywhere)."""
    verification: tuple[VerifyRow, ...] = ()
    verification_note: str | None = None
    """Why the schedule was not verified (a vLLM without dynamic k, a failed start), else None."""
    choices: Mapping[int, Choice] = field(default_factory=dict)  # `core.sweeps.resolve`'s, per concurrency
    fixed_k: int | None = None
    """The smallest k within the noise of the best at every concurrency (None: the data needs a
    schedule; 0: speculation does not pay within the noise)."""
    schedule_config: Mapping[str, Any] | None = None
    """The `--speculative-config` of `schedule` (what `--verify-schedule` starts)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrency": sorted(self.table),
            "cells": [
                cell.to_json() for c in sorted(self.table) for _, cell in sorted(self.table[c].items())
            ],
            "best_k": {str(c): k for c, k in sorted(self.best.items())},
            "rule": RULE,
            "choices": {str(c): ch.to_json() for c, ch in sorted(self.choices.items())},
            "fixed_k": self.fixed_k,
            "num_speculative_tokens_per_batch_size": [list(r) for r in self.schedule],
            "schedule_resolved": self.fixed_k is None,
            "speculative_config": dict(self.config) if self.config is not None else None,
            "schedule_config": dict(self.schedule_config) if self.schedule_config is not None else None,
            "verification": [row.to_json() for row in self.verification],
            "verification_note": self.verification_note,
        }


def advise_table(
    table: Mapping[int, Mapping[int, Cell]], base_config: Mapping[str, Any] | None
) -> ConcurrencyAdvice:
    best = best_per_concurrency(table)
    choices = {
        c: resolve(
            {k: Estimate(cell.speedup, cell.low, cell.high, cell.coverage) for k, cell in cells.items()}
        )
        for c, cells in sorted(table.items())
        if cells
    }
    fixed = common_choice(choices)
    # with a fixed k the medians' schedule is not resolved: for --verify-schedule, never to paste
    schedule = batch_schedule(best if fixed is not None else {c: ch.k for c, ch in choices.items()})
    config = sched_config = schedule_config(schedule, base_config)
    if fixed is not None:
        config = fixed_config(base_config or {}, fixed) if fixed > 0 else None
    return ConcurrencyAdvice(
        table, best, schedule, config, choices=choices, fixed_k=fixed, schedule_config=sched_config
    )


def replace_spec_config(argv: Sequence[str], config: Mapping[str, Any]) -> list[str]:
    """The command line with its `--speculative-config` value replaced (added when absent); every
    spelling `provenance.spec_config_from_argv` reads (`SPEC_CONFIG_FLAGS`) is replaced in place."""
    out = list(argv)
    text = json.dumps(dict(config), separators=(",", ":"))
    for i, arg in enumerate(out):
        flag, eq, _ = arg.partition("=")
        if flag in SPEC_CONFIG_FLAGS and (eq or i + 1 < len(out)):
            out[i if eq else i + 1] = f"{flag}={text}" if eq else text
            return out
    return [*out, "--speculative-config", text]
