"""The k sweep at several concurrencies: the best k at each, a ready `--speculative-config` whose
`num_speculative_tokens_per_batch_size` covers the measured range, and `--verify-schedule`, which
starts that config and measures it head to head against the best fixed k at each concurrency.

Called by `commands.sweep`; the arithmetic is `core.sweeps.schedule`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import click

from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.provenance import spec_config_from_argv
from mtpwatch.core.sweeps.engine import dynamic_k_missing
from mtpwatch.core.sweeps.schedule import (
    Cell,
    ConcurrencyAdvice,
    advise_concurrency,
    fixed_config,
    head_to_head,
    replace_spec_config,
    verify,
    verify_groups,
)
from mtpwatch.core.sweeps.sweep import PairRun, SweepReport, run_pair


def concurrency_advice(
    report: SweepReport,
    config: BenchConfig,
    baseline: tuple[str, Sequence[str]],
    top: tuple[str, Sequence[str]],
    *,
    verify_schedule: bool,
    options: Mapping[str, Any],
) -> tuple[ConcurrencyAdvice | None, list[PairRun]]:
    """The per-concurrency advice, and with `verify_schedule` the schedule measured head to head
    against the best fixed k at the concurrencies where it is best (`schedule.verify_groups`), one
    server at a time, in both orders (`schedule.head_to_head` pools them).

    Args:
        baseline: (url, argv) of the k=0 server.
        top: (url, argv) of the largest k's server; the schedule's and the fixed ks' servers replace
            its config.
        options: `run_pair`'s keyword options.
    """
    conc = advise_concurrency(report.reports, spec_config_from_argv(top[1]))
    if conc is None:
        if verify_schedule:
            click.echo("mtpwatch bench: --verify-schedule needs two or more --concurrency values", err=True)
        return None, []
    if not verify_schedule:
        return conc, []
    modes = report.engine_modes()
    version = modes[max(modes)].vllm_version if modes else None
    note = dynamic_k_missing(version)
    if note is not None:
        return dataclasses.replace(conc, verification_note=note), []
    if conc.schedule_config is None:
        return dataclasses.replace(conc, verification_note="no schedule: speculation pays nowhere"), []
    schedule_argv = replace_spec_config(top[1], conc.schedule_config)
    pairs: list[PairRun] = []
    heads: dict[int, Cell] = {}
    interrupted: str | None = None
    for k, levels in verify_groups(conc.best).items():
        fixed = (
            baseline
            if k == 0
            else (top[0], replace_spec_config(top[1], fixed_config(conc.schedule_config, k)))
        )
        where = ", ".join(map(str, levels))
        reports: list[Any] = []
        # both orders: whatever favours one arm's place in the restart schedule cancels in the pool
        for a, b in (((f"k={k}", *fixed), ("schedule", top[0], schedule_argv)),
                     (("schedule", top[0], schedule_argv), (f"k={k}", *fixed))):  # fmt: skip
            click.echo(f"mtpwatch bench: {a[0]} vs {b[0]} at concurrency {where} (one at a time)", err=True)
            pair = asyncio.run(
                run_pair(
                    dataclasses.replace(config, concurrency=levels),
                    (a[1], a[2]),
                    b,
                    baseline_label=a[0],
                    **options,
                )
            )
            pairs.append(pair)
            reports.append(pair.report)
            if pair.interrupted or pair.report is None:
                interrupted = pair.interrupted or "nothing ran"
                break
        if reports[0] is not None:
            cells = head_to_head(k, reports[0], reports[1] if len(reports) > 1 else None)
            heads.update((c, cell) for c, cell in cells.items() if c in levels)
        if interrupted:
            break
    rows = verify(conc.table, conc.best, heads) if heads else []
    return dataclasses.replace(conc, verification=tuple(rows), verification_note=interrupted), pairs
