"""One `mtpwatch bench --start MODEL --sweep-k …` run, end to end: plan the servers, measure each k
against k=0 one server at a time (`sweep.run_pair`), then the per-concurrency advice and with
`--verify-schedule` the schedule head to head against the best fixed k (`concurrency_advice`),
then the "speculation on, k=0" arm when asked (`run_idle`); and the sweep's JSON document.

Reads its settings from the one `core.ab.options.BenchOptions`; nothing here prints (progress lines
go to `echo`, run events to `on_event`). `commands/sweep.py` checks the flags and prints the tables.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mtpwatch.core import provenance
from mtpwatch.core.ab.events import BenchEvent
from mtpwatch.core.ab.options import BenchOptions
from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.launch.servers import LaunchPlan, plan_sweep
from mtpwatch.core.provenance import spec_config_from_argv
from mtpwatch.core.sweeps.engine import dynamic_k_missing
from mtpwatch.core.sweeps.forward import ForwardTable
from mtpwatch.core.sweeps.idle import IDLE, IdleCost, idle_config, idle_cost
from mtpwatch.core.sweeps.schedule import (
    Cell,
    ConcurrencyAdvice,
    advise_table,
    concurrency_table,
    fixed_config,
    head_to_head,
    replace_spec_config,
    verify,
    verify_groups,
)
from mtpwatch.core.sweeps.sweep import (
    PairRun,
    SweepReport,
    run_pair,
    sweep_document,
    sweep_from_reports,
)

Echo = Callable[[str], None]
Server = tuple[str, Sequence[str]]
"""(url, argv) of one server of the sweep."""


def plan_k_sweep(
    opts: BenchOptions, ks: Sequence[int], *, ports: Sequence[int], gpu: Any, version: Any
) -> LaunchPlan:
    """The servers of the sweep and their memory plan (raises `VllmArgsError`, `PlanError`)."""
    return plan_sweep(
        opts.start_model or "",
        ks,
        ports=ports,
        method=opts.method,
        drafter=opts.drafter,
        vllm=opts.vllm_cmd,
        api_key=opts.api_key,
        extra=opts.extra,
        gpu=gpu,
        version=version,
        drafter_gib=opts.drafter_gib,
    )


@dataclass(frozen=True, slots=True)
class KSweep:
    """What one k sweep measured: the sweep, the per-concurrency advice and the schedule's benches,
    the 0s arm (None when not asked or the sweep was stopped)."""

    plan: LaunchPlan
    ks: tuple[int, ...]
    idle: bool
    report: SweepReport
    concurrency: ConcurrencyAdvice | None
    checked: tuple[PairRun, ...]
    spec_idle: tuple[IdleCost, PairRun] | None

    @property
    def method_name(self) -> str:
        """The sweep's method (its first k's config; "?" without one)."""
        treatments = self.plan.servers[1:]
        config = spec_config_from_argv(treatments[0].argv) if treatments else None
        return str((config or {}).get("method") or "?")

    def title(self, model: str) -> str:
        swept = ",".join([*map(str, self.ks), *([IDLE] if self.idle else [])])
        return f"mtpwatch bench · k sweep {swept} · {model} · {self.method_name} · restart schedule"

    def measured(self) -> bool:
        """Whether any k measured anything (vLLM may not have started at all)."""
        return any(row.pairs or row.decode_tok_s for row in self.report.rows)

    def interrupted(self) -> bool:
        """Whether the sweep, a schedule bench or the 0s arm stopped early."""
        extra = [*self.checked, *(self.spec_idle or ())[1:]]
        return bool(self.report.interrupted) or any(pair.interrupted for pair in extra)

    def document(
        self, opts: BenchOptions, config: BenchConfig, metadata: Mapping[str, str]
    ) -> dict[str, Any]:
        """The sweep's JSON: the sweep, the concurrency advice, the schedule's benches, the 0s arm."""
        meta = provenance.build_meta(
            label=opts.label,
            metadata=metadata,
            prompts=provenance.prompt_set(opts.prompts_spec, config.prompts),
            gpu=provenance.report_gpu(opts.gpu, local=True),
            temperature=config.temperature,
        )
        idle = self.spec_idle  # the 0s arm's figures and its full bench (arms "a" = plain k=0, "b" = 0s)
        head: dict[str, Any] = {
            "model": opts.start_model,
            "method": self.method_name,
            "plan": self.plan.to_json(),
            "concurrency": self.concurrency.to_json() if self.concurrency is not None else None,
            "schedule_benches": [pair.document(meta) for pair in self.checked if pair.report is not None],
            "speculation_on_k0": {**idle[0].to_json(), "bench": idle[1].document(meta)} if idle else None,
        }
        return sweep_document(self.report, meta, head)


def run_k_sweep(
    opts: BenchOptions,
    plan: LaunchPlan,
    config: BenchConfig,
    *,
    idle: bool,
    step_times: ForwardTable | None,
    on_event: Callable[[BenchEvent], None],
    echo: Echo,
) -> KSweep:
    """Measure every k of `plan` against k=0, then the advice and the 0s arm (Ctrl-C propagates)."""
    base, *treatments = plan.servers
    options: dict[str, Any] = {
        "env": dict(base.env),
        "startup_timeout_s": opts.startup_timeout,
        "on_event": on_event,
        **opts.arm_options(),
    }
    baseline: Server = (base.url, base.argv)
    top: Server = (treatments[-1].url, treatments[-1].argv)
    reports: dict[int, Any] = {}
    infos: dict[int, Mapping[str, Mapping[str, Any]]] = {}
    stopped: str | None = None
    for s in treatments:  # the restart schedule, forced: one server at a time
        echo(f"mtpwatch bench: k=0 vs k={s.k} (one server at a time)")
        pair = asyncio.run(run_pair(config, baseline, (f"k={s.k}", s.url, s.argv), **options))
        infos[s.k] = pair.arms
        if pair.report is not None:
            reports[s.k] = pair.report
        if pair.interrupted:
            stopped = pair.interrupted
            break
    report = sweep_from_reports(reports, stopped, infos, step_times)
    conc: ConcurrencyAdvice | None = None
    checked: list[PairRun] = []
    spec_idle = None
    if not report.interrupted:
        conc, checked = concurrency_advice(
            report, config, baseline, top, verify_schedule=opts.verify_schedule, options=options, echo=echo
        )
        if idle:
            spec_idle = run_idle(config, baseline, top, options, echo)
    return KSweep(plan, tuple(s.k for s in plan.servers), idle, report, conc, tuple(checked), spec_idle)


def concurrency_advice(
    report: SweepReport,
    config: BenchConfig,
    baseline: Server,
    top: Server,
    *,
    verify_schedule: bool,
    options: Mapping[str, Any],
    echo: Echo,
) -> tuple[ConcurrencyAdvice | None, list[PairRun]]:
    """The per-concurrency advice, and with `verify_schedule` its head-to-head check as the `schedule`
    module says; the schedule's and the fixed ks' servers are `top`'s (the largest k's) with their
    config; `options` are `run_pair`'s."""
    table = concurrency_table(report.reports)
    conc = advise_table(table, spec_config_from_argv(top[1])) if len(table) >= 2 else None
    if conc is None:  # fewer than two concurrencies measured
        if verify_schedule:
            echo("mtpwatch bench: --verify-schedule needs two or more --concurrency values")
        return None, []
    if not verify_schedule:
        return conc, []
    modes = report.engine_modes()
    note = dynamic_k_missing(modes[max(modes)].vllm_version if modes else None)
    if note is not None:
        return dataclasses.replace(conc, verification_note=note), []
    if conc.schedule_config is None:
        return dataclasses.replace(conc, verification_note="no schedule: speculation pays nowhere"), []
    schedule = ("schedule", top[0], replace_spec_config(top[1], conc.schedule_config))
    pairs: list[PairRun] = []
    heads: dict[int, Cell] = {}
    interrupted: str | None = None
    for k, levels in verify_groups(conc.best).items():
        argv = replace_spec_config(top[1], fixed_config(conc.schedule_config, k)) if k else baseline[1]
        fixed = (f"k={k}", baseline[0] if k == 0 else top[0], argv)
        where = ", ".join(map(str, levels))
        reports: list[Any] = []
        for a, b in ((fixed, schedule), (schedule, fixed)):
            echo(f"mtpwatch bench: {a[0]} vs {b[0]} at concurrency {where} (one at a time)")
            level_config = dataclasses.replace(config, concurrency=levels)
            pair = asyncio.run(run_pair(level_config, (a[1], a[2]), b, baseline_label=a[0], **options))
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


def run_idle(
    config: BenchConfig, baseline: Server, top: Server, options: Mapping[str, Any], echo: Echo
) -> tuple[IdleCost, PairRun]:
    """Plain k=0 (A) against 0s (B), one server at a time; `top` is the largest k's (url, argv): the
    0s server's is the same, its config given the all-zero schedule."""
    base = spec_config_from_argv(top[1]) or {}
    argv = replace_spec_config(top[1], idle_config(base))
    echo(f"mtpwatch bench: k=0 vs k={IDLE} (speculation on, k=0; one server at a time)")
    pair = asyncio.run(run_pair(config, baseline, (f"k={IDLE}", top[0], argv), **options))
    k = base.get("num_speculative_tokens")
    return idle_cost(pair.report, k if isinstance(k, int) else None, pair.interrupted), pair
