"""The k sweep at several concurrencies: the best k at each, a ready `--speculative-config` whose
`num_speculative_tokens_per_batch_size` covers the measured range, and `--verify-schedule`, which
starts that config and measures it against the best fixed k at each concurrency.

Called by `commands.sweep`; the arithmetic is `core.ab.schedule`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import click

from mtpwatch.core.ab.engine import dynamic_k_missing
from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.ab.schedule import (
    Cell,
    ConcurrencyAdvice,
    advise_concurrency,
    cells_of_report,
    replace_spec_config,
    verify,
)
from mtpwatch.core.ab.sweep import PairRun, SweepReport, run_pair
from mtpwatch.core.provenance import spec_config_from_argv


def _x(speedup: float, low: float, high: float, coverage: float = 0.95) -> str:
    """A speed-up and its interval; † when the interval covers less than 95 % (too few pairs)."""
    return f"{speedup:.2f}x [{low:.2f}, {high:.2f}]" + ("†" if coverage < 0.95 else "")


def _cell(cell: Cell) -> str:
    return _x(cell.speedup, cell.low, cell.high, cell.coverage)


def _weak_note(cells: Sequence[Cell]) -> str | None:
    """The footnote for † cells: what their intervals really cover."""
    weak = [c for c in cells if c.coverage < 0.95]
    if not weak:
        return None
    lowest = min(weak, key=lambda c: c.coverage)
    return (
        f"† too few pairs for a 95% interval: it covers {100 * lowest.coverage:.0f}% at "
        f"{lowest.pairs} pairs (min–max of the pairs); use more --runs"
    )


def format_concurrency(conc: ConcurrencyAdvice) -> str:
    """The concurrency × k table, the best k at each, the schedule and its check."""
    ks = sorted({k for cells in conc.table.values() for k in cells})
    lines = [
        "per concurrency: speed-up over k=0 [95% CI] (the same prompt sent c at once; above c=1 the speed "
        "is aggregate output tok/s)",
        f"{'c':>5}" + "".join(f"{f'k={k}':>22}" for k in ks) + f"{'best k':>9}",
    ]
    for c, cells in conc.table.items():
        row = "".join(f"{_cell(cells[k]) if k in cells else '—':>22}" for k in ks)
        lines.append(f"{c:>5}{row}{conc.best[c]:>9}")
    ranges = ", ".join(f"{lo}–{hi}: k={k}" for lo, hi, k in conc.schedule)
    lines.append(f"schedule (batch size = requests running at once; inclusive ranges): {ranges}")
    if len(conc.schedule) == 1 and conc.schedule[0][2] > 0:
        lines.append(
            f"  one k wins at every measured concurrency: a fixed num_speculative_tokens "
            f"{conc.schedule[0][2]} does the same as this schedule"
        )
    if conc.config is None:
        lines.append("no k beats k=0 at any measured concurrency: run without speculation")
    else:
        config = json.dumps(dict(conc.config), separators=(",", ":"))
        lines.append(f"  --speculative-config {shlex.quote(config)}")
        lines.append(
            f"  (covers batch sizes 1–{conc.schedule[-1][1]}; vLLM keeps the last range's k above; "
            "needs a vLLM with dynamic k, 0.32 or later)"
        )
    if conc.verification:
        lines.append("schedule vs the best fixed k at each concurrency (speed-ups over k=0):")
        lines.append(
            f"{'c':>5}{'best fixed k':>14}{'its speed-up':>14}{'schedule [95% CI]':>26}{'ratio':>8}   verdict"
        )
        verdicts = {True: "no slower (CI reaches it)", False: "SLOWER", None: "not measured"}
        for vr in conc.verification:
            sched = vr.schedule
            cell = _cell(sched) if sched else "—"
            ratio = f"{vr.ratio:.3f}" if vr.ratio is not None else "—"
            lines.append(
                f"{vr.concurrency:>5}{vr.best_k:>14}{vr.best_speedup:>13.2f}x{cell:>26}{ratio:>8}"
                f"   {verdicts[vr.no_slower]}" + (" (a hint: †)" if vr.weak else "")
            )
    if conc.verification_note:
        lines.append(f"schedule not verified: {conc.verification_note}")
    shown = [cell for row in conc.table.values() for cell in row.values()]
    shown += [vr.schedule for vr in conc.verification if vr.schedule is not None]
    note = _weak_note(shown)
    if note:
        lines.append(note)
    return "\n".join(lines)


def concurrency_advice(
    report: SweepReport,
    config: BenchConfig,
    baseline: tuple[str, Sequence[str]],
    top: tuple[str, Sequence[str]],
    *,
    verify_schedule: bool,
    options: Mapping[str, Any],
) -> tuple[ConcurrencyAdvice | None, PairRun | None]:
    """The per-concurrency advice, and with `verify_schedule` the schedule measured against k=0.

    Args:
        baseline: (url, argv) of the k=0 server.
        top: (url, argv) of the largest k's server; the schedule's server replaces its config.
        options: `run_pair`'s keyword options.
    """
    conc = advise_concurrency(report.reports, spec_config_from_argv(top[1]))
    if conc is None:
        if verify_schedule:
            click.echo("mtpwatch bench: --verify-schedule needs two or more --concurrency values", err=True)
        return None, None
    if not verify_schedule:
        return conc, None
    modes = report.engine_modes()
    version = modes[max(modes)].vllm_version if modes else None
    note = dynamic_k_missing(version)
    if note is not None:
        return dataclasses.replace(conc, verification_note=note), None
    if conc.config is None:
        return dataclasses.replace(conc, verification_note="no schedule: speculation pays nowhere"), None
    argv = replace_spec_config(top[1], conc.config)
    click.echo("mtpwatch bench: k=0 vs the schedule (one server at a time)", err=True)
    pair = asyncio.run(run_pair(config, baseline, ("schedule", top[0], argv), **options))
    if pair.report is None:
        return dataclasses.replace(conc, verification_note=pair.interrupted or "nothing ran"), pair
    rows = verify(conc.table, conc.best, cells_of_report(0, pair.report))
    return dataclasses.replace(conc, verification=tuple(rows), verification_note=pair.interrupted), pair
