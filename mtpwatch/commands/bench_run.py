"""Running one `mtpwatch bench` for the command: the run log to resume, the config, the arms, the
run with its interrupts (what is echoed, which exit status) and the outputs at the end."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import sys
from pathlib import Path
from typing import Any

import click

from mtpwatch.commands.bench_progress import Progress, progress_mode, upcoming_runs
from mtpwatch.commands.connection import DEFAULT_URL
from mtpwatch.commands.options import check_writable, int_list, one_line
from mtpwatch.core import provenance
from mtpwatch.core.ab import run as benchrun
from mtpwatch.core.ab import runlog, workloads
from mtpwatch.core.ab.events import BenchEvent
from mtpwatch.core.ab.http_arm import HttpArm
from mtpwatch.core.ab.options import RESUME_FIXED, BenchOptions, workload_name
from mtpwatch.core.ab.plan import BenchConfig, BenchConfigError
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.jsonout import dumps
from mtpwatch.core.reports import reportio
from mtpwatch.render.bench_table import format_report
from mtpwatch.render.charts import plots


def bench(opts: BenchOptions) -> None:
    """One bench (or the rest of a --resume'd one): check, run, print and write, exit with its status."""
    with one_line(ValueError, option="--metadata"):
        extra_meta = provenance.parse_metadata(opts.metadata)
    log = resume_log(opts)
    t = target(opts, log)  # the flags, or what --resume's log says
    jsonl_path = opts.resume_path if log is not None else opts.jsonl_path
    check_writable(opts.json_path, "--json-file")
    check_writable(opts.csv_path, "--csv")
    if log is None:
        check_writable(jsonl_path, "--jsonl")
    config = (
        bench_config(opts, t.prompts_spec, t.schedule, int_list(opts.lengths, "--lengths"))
        if log is None
        else log.config
    )
    arms, runner = arms_and_runner(config, log, t, {**opts.arm_options(), "model": t.model, "chat": t.chat})
    workload = workload_name(t.prompts_spec)
    reporter = Progress(  # in place on a terminal (or --progress), else lines; none with --no-progress
        sys.stderr,
        progress_mode(opts.progress),
        interval_s=opts.progress_interval,
        upcoming=upcoming_runs(runner.plan, [p.id for p in config.prompts]),
        already_done=len(runner.done),
    )
    session = benchrun.BenchRun(
        arms=arms,
        config=config,
        label=t.label,
        metadata=extra_meta,
        gpu=opts.gpu,
        workload=workload,
        log=log,
        jsonl_path=jsonl_path,
        options={
            "chat": t.chat,
            "model": t.model,
            "startup_timeout": t.startup_timeout,
            "prompts": t.prompts_spec,
        },
        launch={"a": t.launch_a, "b": t.launch_b},
        echo=functools.partial(click.echo, err=True),
    )
    report, status = run(runner, arms, session, reporter, check=t.schedule != "restart")
    session.close()
    print_outputs(report, status, session, workload, opts, t.label)


def target(opts: BenchOptions, log: runlog.RunLog | None) -> BenchOptions:
    """The servers and settings: the flags, or with --resume its log's; one URL, or --ab's two."""
    t = opts if log is None else benchrun.resumed(log, opts, default_url=DEFAULT_URL)
    url = t.url
    if t.ab is not None and not opts.typed("url"):
        url = None  # a configured default URL does not fight an explicit --ab
    if url is None and t.ab is None:
        url = DEFAULT_URL
    if url is not None and t.ab is not None:
        raise click.UsageError("give one URL, or --ab URL_A URL_B")
    return dataclasses.replace(t, url=url)


def arms_and_runner(
    config: BenchConfig, log: runlog.RunLog | None, t: BenchOptions, common: dict[str, Any]
) -> tuple[list[HttpArm], BenchRunner]:
    """The arms (launched with --launch-a/-b) and the runner, a resumed log's runs already done."""
    # a bad URL (ValueError): one line, like every other command
    with one_line(ValueError, kind=click.ClickException), one_line(BenchConfigError):
        arms = benchrun.bench_arms(
            url=t.url,
            ab=t.ab,
            schedule=t.schedule,
            launch_a=t.launch_a,
            launch_b=t.launch_b,
            startup_timeout=t.startup_timeout,
            common=common,
        )
        runner = BenchRunner(
            config, arms[0], arms[1] if len(arms) > 1 else None, done=log.finished if log else ()
        )
    return arms, runner


def resume_log(opts: BenchOptions) -> runlog.RunLog | None:
    """The run log of `--resume` (None without it); the flags it fixes must not be given again."""
    if opts.resume_path is None:
        return None
    given = ["--" + name.replace("_spec", "").replace("_", "-") for name in RESUME_FIXED if opts.typed(name)]
    if given:
        raise click.UsageError(
            f"--resume takes the servers and settings from its log; drop {', '.join(given)}"
        )
    if opts.jsonl_path is not None:
        raise click.UsageError("--resume appends to its own log; drop --jsonl")
    with one_line(runlog.RunLogError, kind=click.ClickException):
        return runlog.load(opts.resume_path)


def bench_config(
    opts: BenchOptions, prompts_spec: str, schedule: str, lengths: tuple[int, ...] = ()
) -> BenchConfig:
    """The bench's settings from the flags (a --resume'd bench takes its log's; the k sweep's
    schedule is restart)."""
    with one_line(workloads.WorkloadError, option="--prompts"):
        prompts = workloads.resolve(prompts_spec, limit=opts.limit, max_tokens=opts.max_tokens)
    return BenchConfig(
        prompts=prompts,
        runs=opts.runs,
        warmup=opts.warmup,
        schedule=schedule,  # type: ignore[arg-type]
        lengths=lengths,
        concurrency=int_list(opts.concurrency, "--concurrency") or (1,),
        temperature=opts.temperature,
    )


def run(
    runner: BenchRunner, arms: list[HttpArm], session: benchrun.BenchRun, reporter: Progress, check: bool
) -> tuple[BenchReport, int]:
    """The report and the exit status: a stopped or failed bench reports the runs that finished."""

    def on_event(event: BenchEvent) -> None:
        session.on_event(event)
        reporter(event)

    status = 0
    try:
        report = asyncio.run(benchrun.run_bench(runner, arms, on_event, check=check, before=session.start))
    except (KeyboardInterrupt, benchrun.Stopped) as exc:
        name = "Ctrl-C" if isinstance(exc, KeyboardInterrupt) else str(exc)
        reporter.interrupted()
        status = 130 if isinstance(exc, KeyboardInterrupt) else 143
        why = f"stopped by {name} after {len(runner.records)} of {runner.total} runs"
        session.close(why)
        if not runner.records:
            click.echo(
                f"mtpwatch bench: stopped by {name} before any run finished; nothing to report"
                f"{resume_hint(session.jsonl_path)}",
                err=True,
            )
            sys.exit(status)
        report = runner.partial_report(why)
    except Exception as exc:  # ServerError, StartupError: one line each
        reporter.interrupted()
        message = provenance.first_line(exc)
        session.close(f"stopped: {message}")
        if not runner.records:
            raise click.ClickException(message) from None
        report = runner.partial_report(message)  # e.g. a restart-schedule server that did not come back
        status = 1
    return report, status


def resume_hint(jsonl_path: Path | None) -> str:
    """How a stopped bench is finished later: its log's --resume, or --jsonl next time."""
    if jsonl_path is not None:
        return f"; finish with: mtpwatch bench --resume {jsonl_path}"
    return "; with --jsonl FILE a stopped bench keeps its runs and `mtpwatch bench --resume FILE` finishes it"


def print_outputs(
    report: BenchReport,
    status: int,
    session: benchrun.BenchRun,
    workload: str,
    opts: BenchOptions,
    label: str | None,
) -> None:
    """The files, the table on stdout, then the exit status (1 for a failed gate or write)."""
    log = session.jsonl_path
    if log is not None and report.interrupted:
        click.echo(f"mtpwatch bench: every finished run is in {log}{resume_hint(log)}", err=True)
    elif log is not None:
        click.echo(f"wrote {log}", err=True)
    require_identical, meta = opts.require_identical, session.final_meta()
    problems = reportio.write_outputs(
        report, opts.json_path, opts.csv_path, require_identical, meta, echo=session.echo
    )
    try:
        if opts.json_out:  # --json: the report's document on stdout instead of the table
            click.echo(dumps(reportio.report_document(report, meta), indent=2))
        else:
            click.echo(format_report(report, workload, require_identical, (meta or {}).get("arms")))
        if opts.plot:
            document = reportio.report_document(report, meta)
            click.echo("\n" + plots.report_figures(document, label, color=sys.stdout.isatty()))
    except OSError:  # stdout gone (closed SSH session): the files above still hold the report
        status = status or 1
    for line in problems:
        click.echo(f"Error: {line}", err=True)
    if report.interrupted:
        click.echo(f"mtpwatch bench: {report.interrupted}; the report covers those runs", err=True)
        if log is None:
            click.echo(f"mtpwatch bench: {resume_hint(None).lstrip('; ')}", err=True)
    failed = sum(1 for r in report.records if r.errors or r.error is not None)
    if failed and log is not None:
        click.echo(
            f"mtpwatch bench: {failed} run(s) failed; run them again: mtpwatch bench --resume {log}", err=True
        )
    if status:
        sys.exit(status)
    if problems or report.gate_failures(require_identical):
        sys.exit(1)
