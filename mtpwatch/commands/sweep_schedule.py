"""The k sweep at several concurrencies: the best k at each, a ready `--speculative-config` whose
`num_speculative_tokens_per_batch_size` covers the measured range, and `--verify-schedule`, which
starts that config and measures it against the best fixed k at each concurrency.

Called by `commands.sweep`; the arithmetic is `core.ab.schedule`'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import click

from mtpwatch.core.ab.engine import dynamic_k_missing
from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.ab.schedule import (
    ConcurrencyAdvice,
    advise_concurrency,
    cells_of_report,
    replace_spec_config,
    verify,
)
from mtpwatch.core.ab.sweep import PairRun, SweepReport, run_pair
from mtpwatch.core.provenance import spec_config_from_argv


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
