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
from mtpwatch.commands.options import check_writable, free_port, int_list
from mtpwatch.commands.planning import extra_args, gpu_for_plan, print_plan
from mtpwatch.commands.sweep_schedule import concurrency_advice, format_concurrency
from mtpwatch.core import provenance
from mtpwatch.core.ab import reportio, workloads
from mtpwatch.core.ab.plan import BenchConfig, BenchConfigError
from mtpwatch.core.ab.sweep import SweepReport, run_sweep, sweep_document
from mtpwatch.core.launch.memplan import PlanError
from mtpwatch.core.launch.servers import plan_sweep
from mtpwatch.core.launch.vllm_cmd import VllmArgsError


def sweep_options(func: Any) -> Any:
    """--start MODEL, --sweep-k, --method, --drafter, --vllm, --gpu-memory, --gpu-free, --plan,
    --verify-schedule.

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
            help="k sweep: the ks (0 = off).",
        ),
        click.option(
            "--method", type=click.Choice(METHODS), default=None, help="k sweep: speculation method."
        ),
        click.option("--drafter", default=None, metavar="MODEL", help="k sweep: the drafter model."),
        click.option(
            "--vllm", "vllm_cmd", default="vllm", show_default=True, help="k sweep: command running vLLM."
        ),
        click.option(
            "--gpu-memory", type=float, default=None, metavar="GIB", help="k sweep: GPU memory to plan for."
        ),
        click.option("--gpu-free", type=float, default=None, metavar="GIB", help="k sweep: free GPU memory."),
        click.option(
            "--plan", "show_plan", is_flag=True, help="k sweep: print the plan and command lines, exit."
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
    sweep_command(
        model=sweep["start_model"],
        ks=int_list(sweep["sweep_k"], "--sweep-k"),
        method=sweep["method"],
        drafter=sweep["drafter"],
        vllm_cmd=sweep["vllm_cmd"],
        extra=extra_args(),
        gpu=sweep["gpu"],
        gpu_memory=sweep["gpu_memory"],
        gpu_free=sweep["gpu_free"],
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
    )


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def format_sweep(report: SweepReport, title: str) -> str:
    """The sweep table: measured per k, predicted beside it."""
    lines = [title, "speed-up = k / k=0 per pair of runs (same prompt, same run number); decode tok/s = "
             "(tokens−1)/(t_last−t_first), acceptance from the server's counters"]  # fmt: skip
    if report.interrupted:
        lines.append(f"PARTIAL: {report.interrupted}")
    lines.append("")
    head = (
        f"{'k':>3}{'decode tok/s':>14}{'speed-up [95% CI]':>26}{'pairs':>7}{'acceptance':>12}"
        f"{'mean len':>10}{'predicted':>11}{'error':>8}{'pred. ×':>9}{'error':>8}   per position (marginal)"
    )
    lines.append(head)
    for row in report.rows:
        pred = report.advice.at(row.k) if report.advice else None
        err, sp_err = report.error(row.k), report.speedup_error(row.k)
        ci = f"{_f(row.speedup)}x [{_f(row.ci[0])}, {_f(row.ci[1])}]" if row.ci else _f(row.speedup)
        pos = " ".join(f"{x:.2f}" for x in row.per_position) if row.per_position else ""
        lines.append(
            f"{row.k:>3}{_f(row.decode_tok_s):>14}{ci:>26}{row.pairs:>7}"
            f"{_f(row.acceptance_rate and 100 * row.acceptance_rate, '{:.1f}%'):>12}"
            f"{_f(row.mean_acceptance_length):>10}{_f(pred.decode_tok_s if pred else None):>11}"
            f"{_f(err and 100 * err, '{:+.1f}%'):>8}{_f(pred.speedup if pred else None):>9}"
            f"{_f(sp_err and 100 * sp_err, '{:+.1f}%'):>8}   {pos}"
        )
    measured = {r.k for r in report.rows}
    for pred in report.advice.predictions if report.advice else ():
        if pred.k not in measured:
            tag = "extrapolated" if pred.extrapolated else "predicted"
            lines.append(
                f"{pred.k:>3}{'—':>14}{'—':>26}{'':>7}{'':>12}{_f(pred.tokens_per_step):>10}"
                f"{_f(pred.decode_tok_s):>11}{'':>8}{_f(pred.speedup):>9}{'':>8}   ({tag})"
            )
    cats = sorted({c for row in report.rows for c in row.categories})
    if cats:
        lines.append("")
        lines.append("per category: speed-up (decode tok/s)")
        for cat in cats:
            cells = []
            for row in report.rows[1:]:
                c = row.categories.get(cat, {})
                cells.append(f"k={row.k} {_f(c.get('speedup'))}x ({_f(c.get('decode_tok_s'), '{:.1f}')})")
            lines.append(f"  {cat:18}" + "   ".join(cells))
    lines.append("")
    lines.append(f"best k (highest median speed-up): {report.best_k if report.best_k is not None else '—'}")
    if report.advice is not None:
        lines.append(report.advice.line())
        lines.append(f"  {report.advice.fit.describe()}")
        held = {k: report.held_out_error(k) for k in sorted(report.advice.held_out)}
        if held:
            parts = " ".join(f"k={k}:{100 * e:+.1f}%" for k, e in held.items() if e is not None)
            lines.append(
                f"  held out (each k predicted from a fit over the other ks): speed-up error {parts}"
            )
        lines.append(
            "  predicted tok/s = the k=0 row × predicted speed-up; errors: (predicted − measured) / "
            "measured, tok/s then paired speed-up (× columns: drift between restarts cancels)"
        )
    modes = report.engine_modes()
    if modes:
        top = max(modes)
        mode = modes[top]
        lines.append(f"engine (the k={top} server): {mode.headline()}")
        lines.extend(f"  {flag.line()}" for flag in mode.flags)
        if report.advice is not None and not mode.truncation_holds:
            lines.append("  the advisor's rule (a run at k predicts every smaller k) does not hold here")
    return "\n".join(lines)


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
    config: BenchConfig,
    api_key: str | None,
    served_model: str | None,
    chat: bool,
    startup_timeout: float,
    json_path: Path | None,
    progress: Any,
    provenance_of: Provenance | None = None,
    verify_schedule: bool = False,
) -> None:
    """Plan, then run the sweep and print it (or print the plan and exit)."""
    ks = sorted(set(ks))
    if not ks or any(k < 0 or k > 64 for k in ks):
        raise click.BadParameter("give ks between 0 and 64, e.g. 0,1,2,4,8", param_hint="--sweep-k")
    if 0 not in ks:
        ks = [0, *ks]
    if len(ks) < 2:
        raise click.BadParameter("give at least one k > 0 to compare with k=0", param_hint="--sweep-k")
    try:
        plan = plan_sweep(
            model, ks, ports=[free_port()] * len(ks), method=method, drafter=drafter, vllm=vllm_cmd,
            api_key=api_key, extra=extra, gpu=gpu_for_plan(gpu, gpu_memory, gpu_free),
        )  # fmt: skip
    except (VllmArgsError, PlanError) as exc:
        raise click.UsageError(str(exc)) from None
    if show_plan:
        print_plan(plan, False)
        if json_path is not None:
            from mtpwatch.core.provenance import with_meta

            doc = with_meta(plan.to_json(), metadata={"source": "k sweep plan"})
            reportio.write_document(json_path, doc)
        return
    base = plan.servers[0]
    treatments = [(s.k, s.url, s.argv) for s in plan.servers[1:]]

    def on_k(k: int) -> None:
        click.echo(f"mtpwatch bench: k=0 vs k={k} (one server at a time)", err=True)

    options: dict[str, Any] = {
        "env": dict(base.env), "api_key": api_key, "model": served_model, "chat": chat,
        "startup_timeout_s": startup_timeout, "on_event": progress,
    }  # fmt: skip
    try:
        report = asyncio.run(run_sweep(config, (base.url, base.argv), treatments, on_k=on_k, **options))
        conc, checked = (None, None) if report.interrupted else concurrency_advice(
            report, config, (base.url, base.argv), (treatments[-1][1], treatments[-1][2]),
            verify_schedule=verify_schedule, options=options,
        )  # fmt: skip
    except KeyboardInterrupt:
        click.echo("mtpwatch bench: stopped by Ctrl-C", err=True)
        sys.exit(130)
    from mtpwatch.core.provenance import spec_config_from_argv

    method_name = (treatments and (spec_config_from_argv(treatments[0][2]) or {}).get("method")) or "?"
    title = f"mtpwatch bench · k sweep {','.join(map(str, ks))} · {model} · {method_name} · restart schedule"
    if json_path is not None:
        meta = (provenance_of or Provenance("", None, {})).meta(config, gpu)
        head: dict[str, Any] = {"model": model, "method": method_name, "plan": plan.to_json()}
        head["concurrency"] = conc.to_json() if conc is not None else None
        if checked is not None and checked.report is not None:
            head["schedule_bench"] = reportio.report_document(checked.report, {**meta, "arms": checked.arms})
        reportio.write_document(json_path, sweep_document(report, meta, head))
        click.echo(f"wrote {json_path}", err=True)
    click.echo(format_sweep(report, title))
    if conc is not None:
        click.echo("\n" + format_concurrency(conc))
    if report.interrupted or (checked is not None and checked.interrupted):
        sys.exit(1)
