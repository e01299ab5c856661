"""`mtpwatch bench --start MODEL --sweep-k 0,1,2,4`: find the best k, one server at a time, and predict it.

Called by the `bench` command; prints a table per k (decode tok/s, acceptance, mean length,
speed-up with its 95 % CI, per category), the best k, and the k advisor's predictions from
every measured k beside the measured figures (on tok/s and on paired speed-ups); `--json FILE`
writes all of it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from mtpwatch.commands.bench_progress import Mode, Progress
from mtpwatch.commands.options import (
    check_writable,
    drafter_option,
    free_port,
    gpu_free_option,
    gpu_memory_option,
    int_list,
    method_option,
    vllm_option,
)
from mtpwatch.commands.planning import drafter_gib_option, extra_args, gpu_for_plan, print_plan, vllm_version
from mtpwatch.commands.sweep_idle import idle_document, run_idle
from mtpwatch.commands.sweep_schedule import concurrency_advice
from mtpwatch.core import provenance
from mtpwatch.core.ab import workloads
from mtpwatch.core.ab.plan import BenchConfig, BenchConfigError
from mtpwatch.core.launch.memplan import PlanError
from mtpwatch.core.launch.servers import LaunchPlan, plan_sweep
from mtpwatch.core.launch.vllm_cmd import VllmArgsError
from mtpwatch.core.reports import reportio
from mtpwatch.core.sweeps.forward import ForwardError, ForwardTable, load_forward, steps_at
from mtpwatch.core.sweeps.idle import IDLE, idle_refusal, parse_sweep_ks
from mtpwatch.core.sweeps.sweep import K_MAX, SweepReport, run_sweep, sweep_document
from mtpwatch.render.idle_table import format_idle
from mtpwatch.render.schedule_table import format_concurrency
from mtpwatch.render.sweep_table import format_sweep


def sweep_options(func: Any) -> Any:
    """--start MODEL, --sweep-k, --method, --drafter, --vllm, --gpu-memory, --gpu-free, --drafter-gib,
    --plan, --verify-schedule.

    (--gpu, --concurrency, --label and --metadata are the bench's own options, which the sweep
    shares.)
    """
    from mtpwatch.core.launch.vllm_cmd import METHODS

    options = [
        click.option(
            "--start", "start_model", default=None, metavar="MODEL", help="k sweep: start MODEL's servers."
        ),
        click.option(
            "--sweep-k",
            default="0,1,2,4",
            show_default=True,
            metavar="LIST",
            help="k sweep: the ks (0 = off; 0s = speculation on at k=0, a batch-size schedule of k=0 "
            "with the largest k's config, measured against 0: its cost; vLLM 0.32+).",
        ),
        method_option(METHODS, "k sweep: speculation method."),
        drafter_option("k sweep: the drafter model."),
        vllm_option("k sweep: command running vLLM."),
        gpu_memory_option("k sweep: GPU memory to plan for."),
        gpu_free_option("k sweep: free GPU memory."),
        drafter_gib_option("k sweep: "),
        click.option(
            "--plan", "show_plan", is_flag=True, help="k sweep: print the plan and command lines, exit."
        ),
        click.option(
            "--step-times",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            metavar="FILE.json",
            help="k sweep: the advisor's step times t(k) from `vllm bench forward --output-json` (vLLM "
            "0.33+) instead of the serving runs' (printed beside).",
        ),
        click.option(
            "--verify-schedule",
            is_flag=True,
            help="k sweep at several --concurrency: start the batch-size schedule it found and measure it "
            "against the best fixed k at each.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def sweep_from_bench(
    sweep: dict[str, Any],
    url: str | None,
    ab: tuple[str, str] | None,
    prompts_spec: str,
    limit: int | None,
    runs: int,
    warmup: int,
    max_tokens: int | None,
    temperature: float,
    api_key: str | None,
    model: str | None,
    chat: bool,
    startup_timeout: float,
    json_path: Path | None,
    progress: bool | None,
) -> None:
    """The bench's --start MODEL branch: check the bench options, then `sweep_command`."""
    ctx = click.get_current_context()
    given_url = ctx.get_parameter_source("url") == click.core.ParameterSource.COMMANDLINE
    if (url is not None and given_url) or ab is not None:
        raise click.UsageError("give --start MODEL or server URLs, not both")
    check_writable(json_path, "--json")
    try:
        prompts = workloads.resolve(prompts_spec, limit=limit, max_tokens=max_tokens)
    except workloads.WorkloadError as exc:
        raise click.BadParameter(str(exc), param_hint="--prompts") from None
    concurrency = int_list(sweep.get("concurrency"), "--concurrency") or (1,)
    config = BenchConfig(
        prompts=prompts, runs=runs, warmup=warmup, schedule="restart", temperature=temperature,
        concurrency=concurrency,
    )  # fmt: skip
    try:
        config.validate(paired=True)
    except BenchConfigError as exc:
        raise click.UsageError(str(exc)) from None
    mode: Mode = (
        ("tty" if sys.stderr.isatty() else "lines") if progress is None else "tty" if progress else "off"
    )
    try:
        metadata = provenance.parse_metadata(sweep.get("metadata") or ())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--metadata") from None
    try:
        ks, idle = parse_sweep_ks(sweep["sweep_k"])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sweep-k") from None
    sweep_command(
        model=sweep["start_model"],
        ks=ks,
        idle=idle,
        method=sweep["method"],
        drafter=sweep["drafter"],
        vllm_cmd=sweep["vllm_cmd"],
        extra=extra_args(),
        gpu=sweep["gpu"],
        gpu_memory=sweep["gpu_memory"],
        gpu_free=sweep["gpu_free"],
        drafter_gib=sweep.get("drafter_gib"),
        show_plan=sweep["show_plan"],
        config=config,
        api_key=api_key,
        served_model=model,
        chat=chat,
        startup_timeout=startup_timeout,
        json_path=json_path,
        progress=Progress(sys.stderr, mode),
        provenance_of=Provenance(prompts_spec, sweep.get("label"), metadata),
        verify_schedule=bool(sweep.get("verify_schedule")),
        step_times=_step_times(sweep.get("step_times"), concurrency),
    )


def _step_times(path: Path | None, concurrency: Sequence[int]) -> ForwardTable | None:
    """`--step-times`, read and checked before any server starts (a batch with a k=0 case)."""
    if path is None:
        return None
    try:
        table = load_forward(path)
        steps_at(table, concurrency)
    except ForwardError as exc:
        raise click.BadParameter(str(exc), param_hint="--step-times") from None
    return table


@dataclass(frozen=True, slots=True)
class Provenance:
    """What the sweep's `meta` block takes from the command line (the servers add the rest)."""

    workload: str
    label: str | None
    metadata: Mapping[str, str]

    def meta(self, config: BenchConfig, gpu: str | None) -> dict[str, Any]:
        return provenance.build_meta(
            label=self.label,
            metadata=self.metadata,
            prompts=provenance.prompt_set(self.workload, config.prompts),
            gpu=provenance.gpu_from_name(gpu) if gpu else provenance.local_gpu(),
            temperature=config.temperature,
        )


def _checked_ks(ks: Sequence[int]) -> list[int]:
    """--sweep-k, sorted, with k=0 (the baseline) added; one line when it compares nothing."""
    out = sorted(set(ks))
    if not out or any(k < 0 or k > K_MAX for k in out):
        # vLLM wants num_speculative_tokens > 0 and sets no upper bound (`core.sweeps.sweep.K_MAX`)
        raise click.BadParameter(
            f"give ks between 0 (no speculation) and {K_MAX}, e.g. 0,1,2,4,8", param_hint="--sweep-k"
        )
    if 0 not in out:
        out = [0, *out]
    if len(out) < 2:
        raise click.BadParameter("give at least one k > 0 to compare with k=0", param_hint="--sweep-k")
    return out


def _plan_only(plan: LaunchPlan, json_path: Path | None) -> None:
    """`--plan`: print the sweep's plan (and write it to `json_path`), start nothing."""
    print_plan(plan, False)
    if json_path is not None:
        from mtpwatch.core.provenance import with_meta

        doc = with_meta(plan.to_json(), metadata={"source": "k sweep plan"})
        reportio.write_document(json_path, doc)


def _exit_if_nothing_measured(report: SweepReport, json_path: Path | None) -> None:
    """No k measured (vLLM could not start, …): one line why, no report (`plot` would refuse it)."""
    if not any(row.pairs or row.decode_tok_s for row in report.rows):
        why = report.interrupted or "no run finished"
        written = f"; {json_path} not written" if json_path is not None else ""
        click.echo(f"mtpwatch bench: nothing measured ({why}){written}", err=True)
        sys.exit(1)


def _write_json(
    json_path: Path,
    report: Any,
    meta: dict[str, Any],
    head: dict[str, Any],
    conc: Any,
    checked: Sequence[Any],
    spec_idle: Any,
) -> None:
    """The sweep's `--json` file: `head`, the concurrency advice, the schedule's benches, the 0s arm."""
    head["concurrency"] = conc.to_json() if conc is not None else None
    head["schedule_benches"] = [
        reportio.report_document(pair.report, {**meta, "arms": pair.arms})
        for pair in checked
        if pair.report is not None
    ]
    head["speculation_on_k0"] = idle_document(spec_idle, meta)
    reportio.write_document(json_path, sweep_document(report, meta, head))
    click.echo(f"wrote {json_path}", err=True)


def _title(
    model: str, ks: Sequence[int], idle: bool, treatments: Sequence[tuple[int, str, Sequence[str]]]
) -> tuple[str, str]:
    """The sweep's method name (its first k's config, "?" without one) and its table's title."""
    config = provenance.spec_config_from_argv(treatments[0][2]) if treatments else None
    method_name = (config or {}).get("method") or "?"
    swept = ",".join([*map(str, ks), *([IDLE] if idle else [])])
    return method_name, f"mtpwatch bench · k sweep {swept} · {model} · {method_name} · restart schedule"


def sweep_command(
    *,
    model: str,
    ks: Sequence[int],
    method: str | None,
    drafter: str | None,
    vllm_cmd: str,
    extra: Sequence[str],
    gpu: str | None,
    gpu_memory: float | None,
    gpu_free: float | None,
    show_plan: bool,
    drafter_gib: float | None = None,
    config: BenchConfig,
    api_key: str | None,
    served_model: str | None,
    chat: bool,
    startup_timeout: float,
    json_path: Path | None,
    progress: Any,
    provenance_of: Provenance | None = None,
    verify_schedule: bool = False,
    step_times: ForwardTable | None = None,
    idle: bool = False,
) -> None:
    """Plan, then run the sweep and print it (or print the plan and exit); with `idle` the 0s arm
    (`commands.sweep_idle`) after the ks."""
    ks = _checked_ks(ks)
    try:
        plan = plan_sweep(
            model, ks, ports=[free_port()] * len(ks), method=method, drafter=drafter, vllm=vllm_cmd,
            api_key=api_key, extra=extra, gpu=gpu_for_plan(gpu, gpu_memory, gpu_free),
            version=vllm_version(vllm_cmd), drafter_gib=drafter_gib,
        )  # fmt: skip
    except (VllmArgsError, PlanError) as exc:
        raise click.UsageError(str(exc)) from None
    refusal = idle_refusal(plan.version.text) if idle else None
    if refusal is not None:
        raise click.UsageError(refusal)
    if show_plan:
        _plan_only(plan, json_path)
        return
    base = plan.servers[0]
    treatments = [(s.k, s.url, s.argv) for s in plan.servers[1:]]

    def on_k(k: int) -> None:
        click.echo(f"mtpwatch bench: k=0 vs k={k} (one server at a time)", err=True)

    options: dict[str, Any] = {
        "env": dict(base.env), "api_key": api_key, "model": served_model, "chat": chat,
        "startup_timeout_s": startup_timeout, "on_event": progress,
    }  # fmt: skip
    sweep = run_sweep(config, (base.url, base.argv), treatments, on_k=on_k, step_times=step_times, **options)
    try:
        report = asyncio.run(sweep)
        conc, checked = (None, []) if report.interrupted else concurrency_advice(
            report, config, (base.url, base.argv), (treatments[-1][1], treatments[-1][2]),
            verify_schedule=verify_schedule, options=options,
        )  # fmt: skip
        spec_idle = None if not idle or report.interrupted else run_idle(
            config, (base.url, base.argv), treatments[-1][1:], options
        )  # fmt: skip
    except KeyboardInterrupt:
        click.echo("mtpwatch bench: stopped by Ctrl-C", err=True)
        sys.exit(130)
    _exit_if_nothing_measured(report, json_path)
    method_name, title = _title(model, ks, idle, treatments)
    if json_path is not None:
        meta = (provenance_of or Provenance("", None, {})).meta(config, gpu)
        head: dict[str, Any] = {"model": model, "method": method_name, "plan": plan.to_json()}
        _write_json(json_path, report, meta, head, conc, checked, spec_idle)
    click.echo(format_sweep(report, title))
    if spec_idle is not None:
        click.echo("\n" + format_idle(spec_idle[0]))
    if conc is not None:
        click.echo("\n" + format_concurrency(conc))
    if report.interrupted or any(pair.interrupted for pair in [*checked, *(spec_idle or ())[1:]]):
        sys.exit(1)
