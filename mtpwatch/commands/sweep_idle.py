"""The k sweep's `0s` arm (`bench --sweep-k 0s,0,1,2,4`): the largest k's server with a schedule of
k=0 at every batch size, measured against the plain k=0 server (`core.sweeps.idle` says why and how).

Called by `commands.sweep` after the ks' benches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import click

from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.provenance import spec_config_from_argv
from mtpwatch.core.reports import reportio
from mtpwatch.core.sweeps.idle import IDLE, IdleCost, idle_config, idle_cost
from mtpwatch.core.sweeps.schedule import replace_spec_config
from mtpwatch.core.sweeps.sweep import PairRun, run_pair


def idle_argv(top_argv: Sequence[str]) -> tuple[list[str], int | None]:
    """The 0s server's command line (the largest k's, its config given the all-zero schedule) and
    its num_speculative_tokens."""
    base = spec_config_from_argv(top_argv) or {}
    k = base.get("num_speculative_tokens")
    return replace_spec_config(top_argv, idle_config(base)), k if isinstance(k, int) else None


def run_idle(
    config: BenchConfig,
    baseline: tuple[str, Sequence[str]],
    top: tuple[str, Sequence[str]],
    options: Mapping[str, Any],
) -> tuple[IdleCost, PairRun]:
    """Plain k=0 (A) against 0s (B), one server at a time; `top` is the largest k's (url, argv)."""
    argv, k = idle_argv(top[1])
    click.echo(f"mtpwatch bench: k=0 vs k={IDLE} (speculation on, k=0; one server at a time)", err=True)
    pair = asyncio.run(run_pair(config, baseline, (f"k={IDLE}", top[0], argv), **options))
    return idle_cost(pair.report, k, pair.interrupted), pair


def idle_document(idle: tuple[IdleCost, PairRun] | None, meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """The sweep JSON's `speculation_on_k0` block: the cost's figures and the arm's full bench report
    (arms "a" = plain k=0, "b" = 0s); None without the arm."""
    if idle is None:
        return None
    cost, pair = idle
    bench = (
        None if pair.report is None else reportio.report_document(pair.report, {**meta, "arms": pair.arms})
    )
    return {**cost.to_json(), "bench": bench}
