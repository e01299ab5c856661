"""`mtpwatch bench`: the headless paired A/B benchmark (and a one-server benchmark).

``mtpwatch bench --ab URL_A URL_B``: A is the baseline (MTP off), B the treatment (MTP on); the
speed-up is B / A per pair. Prints a table on stdout, a progress line on stderr (TTY only), and
optionally writes `--json` / `--csv`. Exits 1 when a sanity gate fails (failed requests, a
per-position list whose length is not k, inconsistent counters, or diverging outputs with
`--require-identical`), so scripts and CI can trust a zero exit.
"""

from __future__ import annotations

import asyncio
import csv
import os
import shlex
import signal
import sys
import tempfile
import textwrap
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click

from mtpwatch.charts import plots
from mtpwatch.commands.bench_progress import Mode, Progress, upcoming_runs
from mtpwatch.commands.connection import DEFAULT_URL, tls_options
from mtpwatch.commands.options import check_writable as _check_writable
from mtpwatch.commands.options import int_list as _int_list
from mtpwatch.commands.planning import API_KEY_ENVVARS, PassthroughCommand
from mtpwatch.commands.sweep import sweep_from_bench, sweep_options
from mtpwatch.core import provenance
from mtpwatch.core.ab import reportfile, reportio, runlog, workloads
from mtpwatch.core.ab.events import BenchEvent, RunFinished
from mtpwatch.core.ab.http_arm import HttpArm, LaunchedArm
from mtpwatch.core.ab.plan import BenchConfig, BenchConfigError
from mtpwatch.core.ab.records import CSV_FIELDS
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.ab.table import format_report
from mtpwatch.core.launch.vllm_cmd import is_loopback
from mtpwatch.core.outfile import write_complete

PROMPT_SETS = ", ".join(workloads.BUILTIN_SETS)


def write_csv(report: BenchReport, path: Path) -> None:
    """One row per run (warm-ups included, flagged)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in report.records:
            writer.writerow(r.row())


# --- the command ---------------------------------------------------------------------------------


#: Options that define the bench; a resumed bench takes them from its log.
_RESUME_FIXED = (
    "url", "ab", "prompts_spec", "limit", "runs", "warmup", "max_tokens", "lengths", "schedule", "launch_a",
    "launch_b", "concurrency", "temperature", "chat", "model", "startup_timeout",
)  # fmt: skip


class _Session:
    """The provenance block and the run log of one bench invocation."""

    def __init__(
        self,
        *,
        arms: Sequence[HttpArm],
        config: BenchConfig,
        label: str | None,
        metadata: Mapping[str, str],
        gpu: str | None,
        workload: str,
        log: runlog.RunLog | None,
        jsonl_path: Path | None,
        options: Mapping[str, Any],
        launch: Mapping[str, str | None],
    ) -> None:
        self.arms = list(arms)
        self.names = ["a", "b"][: len(self.arms)]
        self.config = config
        self.label = label
        self.metadata = dict(metadata)
        self.gpu = gpu
        self.workload = workload
        self.log = log
        self.jsonl_path = jsonl_path
        self.options = dict(options)
        self.launch = dict(launch)
        self.infos: dict[str, provenance.ArmInfo] = {}
        self.meta: dict[str, Any] | None = None
        self.writer: runlog.RunLogWriter | None = None

    def _gpu(self) -> provenance.GpuInfo:
        if self.gpu:
            return provenance.gpu_from_name(self.gpu)
        if all(is_loopback(urlsplit(arm.url).hostname or "") for arm in self.arms):
            return provenance.local_gpu()
        return provenance.GpuInfo(None, None, "unknown (remote servers: give --gpu)")

    async def start(self) -> None:
        """Collect the provenance (asking the servers) and open the run log."""
        for name, arm in zip(self.names, self.arms, strict=True):
            self.infos[name] = await provenance.describe_arm(arm)
        infos = {name: info.to_json() for name, info in self.infos.items()}
        served = [f"{n.upper()} {i['url']} serves {provenance.arm_model(i)}" for n, i in infos.items()]
        if any(provenance.arm_model(i) for i in infos.values()):  # launched servers are not up yet
            click.echo("mtpwatch bench: " + "; ".join(served), err=True)
        for line in provenance.arm_warnings(infos):
            click.echo(f"warning: {line}", err=True)
        if self.log is not None:
            meta = dict(self.log.header.get("meta") or {})
            meta["metadata"] = {**(meta.get("metadata") or {}), **self.metadata}
            meta["resumed"] = [
                *(meta.get("resumed") or []),
                {
                    "created_utc": provenance.utc_now(),
                    "argv": provenance.mask_argv(sys.argv),
                    "runs_before": len(self.log.records),
                },
            ]
            self.meta = meta
        else:
            self.meta = provenance.build_meta(
                label=self.label,
                metadata=self.metadata,
                arms=self.infos,
                prompts=provenance.prompt_set(self.workload, self.config.prompts),
                gpu=self._gpu(),
                temperature=self.config.temperature,
            )
        if self.jsonl_path is None:
            return
        self.writer = runlog.RunLogWriter(self.jsonl_path, append=self.log is not None)
        if self.log is None:
            arms = {
                name: {"url": arm.url, "label": arm.label, "launch": self.launch.get(name)}
                for name, arm in zip(self.names, self.arms, strict=True)
            }
            self.writer.header(meta=self.meta, config=self.config, arms=arms, options=self.options)
        else:
            self.writer.note(f"resumed at {provenance.utc_now()} with {len(self.log.records)} runs done")

    def on_event(self, event: BenchEvent) -> None:
        """Append every finished run to the log before the next one starts."""
        if self.writer is not None and isinstance(event, RunFinished):
            self.writer.run(event.record)

    def close(self, note: str | None = None) -> None:
        """Close the log (a note says why it ended early)."""
        if self.writer is not None:
            if note:
                self.writer.note(note)
            self.writer.close()

    def final_meta(self) -> dict[str, Any] | None:
        """The provenance for the report; servers started by the bench are described as they ran."""
        if self.meta is None:
            return None
        meta = dict(self.meta)
        arms = dict(meta.get("arms") or {})
        for name, arm in zip(self.names, self.arms, strict=True):
            if isinstance(arm, LaunchedArm):
                arms[name] = provenance.launched_arm_info(arm).to_json()
        meta["arms"] = arms
        return meta


def _plots(report: BenchReport, meta: Mapping[str, Any] | None, label: str | None) -> str:
    """The figures `mtpwatch plot` would draw from this report's --json file, at 80 columns."""
    document = reportio.report_document(report, meta)
    saved = reportfile.parse(document, path="this bench", name=label or "this bench")
    color = sys.stdout.isatty()
    figs = plots.draw([saved], width=80, color=color, plt=plots.load_plotext())
    return "\n\n".join(textwrap.fill(f.title, 80) + "\n" + f.text for f in figs)


class Stopped(Exception):
    """The bench was stopped by a signal; `str()` names it ('Ctrl-C', 'SIGTERM', 'SIGHUP')."""


async def _run(
    runner: BenchRunner,
    arms: Sequence[HttpArm],
    progress: Callable[[BenchEvent], None],
    check: bool,
    before: Callable[[], Awaitable[None]] | None = None,
) -> BenchReport:
    # SIGTERM/SIGHUP (a closed SSH session) cancel the run like Ctrl-C does, so the runs measured
    # so far are still reported and written instead of vanishing with the process.
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    stopped_by: list[str] = []

    def stop(name: str) -> None:
        stopped_by.append(name)
        if task is not None:
            task.cancel()

    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop, sig.name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no such signal
            pass
    try:
        if check:
            for arm in arms:
                await arm.check()
        if before is not None:
            await before()
        return await runner.run(progress)
    except asyncio.CancelledError:
        if stopped_by:
            raise Stopped(stopped_by[0]) from None
        raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        for arm in arms:
            await arm.aclose()


def _write_outputs(
    report: BenchReport,
    json_path: Path | None,
    csv_path: Path | None,
    require_identical: bool,
    meta: Mapping[str, Any] | None = None,
) -> list[str]:
    """Write --json/--csv; a file that cannot be written goes to the temp folder instead (nothing lost).

    Returns one line per problem (empty when all went where asked).
    """
    problems: list[str] = []
    document = reportio.dumps(reportio.report_document(report, meta, require_identical)).rstrip("\n")

    def write(path: Path, suffix: str, writer: Callable[[Path], object]) -> None:
        try:
            write_complete(path, writer)  # never a half-written file at `path`
            click.echo(f"wrote {path}", err=True)
        except OSError as exc:
            fd, fallback = tempfile.mkstemp(prefix="mtpwatch-bench-", suffix=suffix)
            os.close(fd)
            writer(Path(fallback))
            problems.append(f"cannot write {path} ({exc.strerror or exc}); wrote {fallback} instead")

    if json_path is not None:
        write(json_path, ".json", lambda p: p.write_text(document + "\n", encoding="utf-8"))
    if csv_path is not None:
        write(csv_path, ".csv", lambda p: write_csv(report, p))
    return problems


@click.command(
    "bench",
    cls=PassthroughCommand,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="A = baseline (MTP off), B = treatment (MTP on); speed-ups are B/A. "
    "Examples: mtpwatch bench --ab http://127.0.0.1:8001 http://127.0.0.1:8002 --prompts long --json ab.json",
)
@click.argument("url", required=False)
@click.option(
    "--ab",
    "ab",
    nargs=2,
    metavar="URL_A URL_B",
    default=None,
    help="Paired A/B: A = baseline (MTP off), B = treatment (MTP on).",
)
@click.option(
    "--prompts",
    "prompts_spec",
    default="long",
    show_default=True,
    metavar="SET|FILE",
    help=f"Built-in set ({PROMPT_SETS}) or a JSONL file (prompt/category/max_tokens, or SPEED-Bench turns).",
)
@click.option("--limit", type=int, default=None, help="Use only the first N prompts of each category.")
@click.option(
    "--runs", type=int, default=12, show_default=True, help="Runs per prompt and arm, warm-up included."
)
@click.option("--warmup", type=int, default=1, show_default=True, help="Runs per prompt dropped as warm-up.")
@click.option("--max-tokens", type=int, default=None, help="Override every prompt's max_tokens.")
@click.option(
    "--lengths",
    default=None,
    metavar="8,32,...",
    help="Break-even sweep: force these output lengths (ignore_eos + min_tokens).",
)
@click.option(
    "--schedule",
    type=click.Choice(["alternate", "race", "restart"]),
    default="alternate",
    show_default=True,
    help="alternate = the measurement; race = both at once, for show (contended); "
    "restart = one server at a time (needs --launch-a/--launch-b).",
)
@click.option(
    "--launch-a", default=None, metavar="CMD", help="restart schedule: command line that starts server A."
)
@click.option(
    "--launch-b", default=None, metavar="CMD", help="restart schedule: command line that starts server B."
)
@click.option(
    "--startup-timeout",
    type=float,
    default=900.0,
    show_default=True,
    help="restart schedule: seconds to wait for /health after each start.",
)
@click.option(
    "--concurrency",
    default="1",
    show_default=True,
    metavar="1,2,4",
    help="Concurrency sweep: requests in flight per arm (above 1 the speed is aggregate output tok/s).",
)
@click.option(
    "--temperature",
    type=click.FloatRange(min=0.0),
    default=0.0,
    show_default=True,
    help="Sampling temperature (0 makes the lossless check meaningful).",
)
@click.option("--chat", is_flag=True, help="Use /v1/chat/completions instead of /v1/completions.")
@click.option("--model", default=None, help="Served model name (default: the server's only model).")
@click.option(
    "--api-key",
    default=None,
    envvar=API_KEY_ENVVARS,
    help="Bearer token (default: $VLLM_API_KEY, else $OPENAI_API_KEY).",
)
@click.option(
    "--require-identical", is_flag=True, help="Exit 1 when the two arms' outputs differ at temperature 0."
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the full report as JSON.",
)
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write one row per run as CSV.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress on stderr: a line rewritten in place on a terminal, else one line every "
    "--progress-interval seconds; --progress forces the in-place line.",
)
@sweep_options
@click.option(
    "--progress-interval",
    type=click.FloatRange(min=1.0),
    default=30.0,
    show_default=True,
    help="Seconds between progress lines when stderr is not a terminal.",
)
@click.option(
    "--label", default=None, help="A name for this bench, kept in the report (plot/compare show it)."
)
@click.option(
    "--metadata",
    "metadata",
    multiple=True,
    metavar="KEY=VALUE",
    help="Extra provenance kept in the report's meta block (repeatable), e.g. --metadata image=v0.32.",
)
@click.option(
    "--gpu",
    default=None,
    help="GPU the servers run on: for the report (default: this host's, by NVML, for loopback servers) "
    "and, with --start, the memory plan (a table name).",
)
@click.option(
    "--jsonl",
    "jsonl_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write each run as a JSON line the moment it finishes (a killed bench keeps them; see --resume).",
)
@click.option(
    "--resume",
    "resume_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Finish the bench that wrote this --jsonl log: same prompts, settings and servers, only the "
    "runs it lacks; new runs are appended to it.",
)
@click.option(
    "--plot", is_flag=True, help="Also draw the report's figures (as `mtpwatch plot` does) under the table."
)
@tls_options
def command(
    url: str | None,
    ab: tuple[str, str] | None,
    prompts_spec: str,
    limit: int | None,
    runs: int,
    warmup: int,
    max_tokens: int | None,
    lengths: str | None,
    schedule: str,
    launch_a: str | None,
    launch_b: str | None,
    startup_timeout: float,
    concurrency: str,
    temperature: float,
    chat: bool,
    model: str | None,
    api_key: str | None,
    require_identical: bool,
    json_path: Path | None,
    csv_path: Path | None,
    progress: bool | None,
    progress_interval: float,
    label: str | None,
    metadata: tuple[str, ...],
    gpu: str | None,
    jsonl_path: Path | None,
    resume_path: Path | None,
    plot: bool,
    **sweep: Any,
) -> None:
    """Paired A/B benchmark: speed-up with a 95 % CI, acceptance, lossless check, break-even.

    URL defaults to http://127.0.0.1:8000 (or the config file's `url`). With --start MODEL
    --sweep-k 0,1,2,4: a k sweep, one server at a time (flags after -- go to every vLLM server),
    with the k advisor's predictions beside the measured figures.
    """
    if sweep["start_model"] is not None:
        sweep.update(gpu=gpu, label=label, metadata=metadata, concurrency=concurrency)  # the sweep's too
        sweep_from_bench(sweep, url, ab, prompts_spec, limit, runs, warmup, max_tokens, temperature,
                         api_key, model, chat, startup_timeout, json_path, progress)  # fmt: skip
        return
    ctx = click.get_current_context()
    try:
        extra_meta = provenance.parse_metadata(metadata)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--metadata") from None
    log: runlog.RunLog | None = None
    if resume_path is not None:
        given = [
            "--" + name.replace("_spec", "").replace("_", "-")
            for name in _RESUME_FIXED
            if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        ]
        if given:
            raise click.UsageError(
                f"--resume takes the servers and settings from its log; drop {', '.join(given)}"
            )
        if jsonl_path is not None:
            raise click.UsageError("--resume appends to its own log; drop --jsonl")
        try:
            log = runlog.load(resume_path)
            config_from_log = log.config
        except runlog.RunLogError as exc:
            raise click.ClickException(str(exc)) from None
        opts = log.header.get("options") or {}
        arms_h = log.arms
        url = ab = None
        if "b" in arms_h:
            ab = (str(arms_h["a"]["url"]), str(arms_h["b"]["url"]))
        else:
            url = str(arms_h.get("a", {}).get("url", DEFAULT_URL))
        launch_a = arms_h.get("a", {}).get("launch")
        launch_b = arms_h.get("b", {}).get("launch")
        schedule = config_from_log.schedule
        chat = bool(opts.get("chat", False))
        model = opts.get("model")
        startup_timeout = float(opts.get("startup_timeout", startup_timeout))
        prompts_spec = str(opts.get("prompts", prompts_spec))
        label = label or (log.header.get("meta") or {}).get("label")
        jsonl_path = resume_path
    if ab is not None and ctx.get_parameter_source("url") != click.core.ParameterSource.COMMANDLINE:
        url = None  # a configured default URL does not fight an explicit --ab
    if url is None and ab is None:
        url = DEFAULT_URL
    if url is not None and ab is not None:
        raise click.UsageError("give one URL, or --ab URL_A URL_B")
    if max_tokens is not None and max_tokens < 1:
        raise click.BadParameter("must be at least 1", param_hint="--max-tokens")
    if startup_timeout <= 0:
        raise click.BadParameter("must be more than 0 seconds", param_hint="--startup-timeout")
    _check_writable(json_path, "--json")
    _check_writable(csv_path, "--csv")
    if log is None:
        _check_writable(jsonl_path, "--jsonl")
        try:
            prompts = workloads.resolve(prompts_spec, limit=limit, max_tokens=max_tokens)
        except workloads.WorkloadError as exc:
            raise click.BadParameter(str(exc), param_hint="--prompts") from None
        config = BenchConfig(
            prompts=prompts,
            runs=runs,
            warmup=warmup,
            schedule=schedule,  # type: ignore[arg-type]
            lengths=_int_list(lengths, "--lengths"),
            concurrency=_int_list(concurrency, "--concurrency") or (1,),
            temperature=temperature,
        )
    else:
        config = config_from_log
    common: dict[str, Any] = {"model": model, "api_key": api_key, "chat": chat}
    arms: list[HttpArm] = []
    try:
        if schedule == "restart":
            if ab is None or not launch_a or not launch_b:
                raise click.UsageError(
                    "--schedule restart needs --ab URL_A URL_B and both --launch-a and --launch-b"
                )
            arms = [
                LaunchedArm(
                    ab[0],
                    shlex.split(launch_a),
                    startup_timeout_s=startup_timeout,
                    label=f"{ab[0]} ({launch_a})",
                    **common,
                ),
                LaunchedArm(
                    ab[1],
                    shlex.split(launch_b),
                    startup_timeout_s=startup_timeout,
                    label=f"{ab[1]} ({launch_b})",
                    **common,
                ),
            ]
        elif launch_a or launch_b:
            raise click.UsageError("--launch-a/--launch-b are for --schedule restart")
        elif ab is not None:
            arms = [HttpArm(ab[0], **common), HttpArm(ab[1], **common)]
        else:
            assert url is not None
            arms = [HttpArm(url, **common)]
        runner = BenchRunner(
            config, arms[0], arms[1] if len(arms) > 1 else None, done=log.records if log else ()
        )
    except BenchConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except ValueError as exc:  # a bad URL: one line, like every other command
        raise click.ClickException(str(exc)) from None

    workload_name = prompts_spec if prompts_spec in workloads.BUILTIN_SETS else Path(prompts_spec).name
    mode: Mode = (
        ("tty" if sys.stderr.isatty() else "lines") if progress is None else "tty" if progress else "off"
    )
    reporter = Progress(
        sys.stderr,
        mode,
        interval_s=progress_interval,
        upcoming=upcoming_runs(runner.plan, [p.id for p in config.prompts]),
        already_done=len(runner.done),
    )
    session = _Session(
        arms=arms,
        config=config,
        label=label,
        metadata=extra_meta,
        gpu=gpu,
        workload=workload_name,
        log=log,
        jsonl_path=jsonl_path,
        options={"chat": chat, "model": model, "startup_timeout": startup_timeout, "prompts": prompts_spec},
        launch={"a": launch_a, "b": launch_b},
    )

    def on_event(event: BenchEvent) -> None:
        session.on_event(event)
        reporter(event)

    status = 0
    try:
        report = asyncio.run(_run(runner, arms, on_event, check=schedule != "restart", before=session.start))
    except (KeyboardInterrupt, Stopped) as exc:
        name = "Ctrl-C" if isinstance(exc, KeyboardInterrupt) else str(exc)
        reporter.interrupted()
        status = 130 if isinstance(exc, KeyboardInterrupt) else 143
        done = len(runner.records)
        session.close(f"stopped by {name} after {done} of {runner.total} runs")
        if not done:
            click.echo(
                f"mtpwatch bench: stopped by {name} before any run finished; nothing to report",
                err=True,
            )
            sys.exit(status)
        report = runner.partial_report(f"stopped by {name} after {done} of {runner.total} runs")
    except Exception as exc:  # ServerError, StartupError: one line each
        reporter.interrupted()
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        session.close(f"stopped: {message}")
        if runner.records:  # e.g. a restart-schedule server that failed to come back: keep what ran
            report = runner.partial_report(message)
            status = 1
        else:
            raise click.ClickException(message) from None
    session.close()
    if session.jsonl_path is not None and not report.interrupted:
        click.echo(f"wrote {session.jsonl_path}", err=True)
    elif session.jsonl_path is not None:
        click.echo(
            f"mtpwatch bench: every finished run is in {session.jsonl_path}; "
            f"finish with: mtpwatch bench --resume {session.jsonl_path}",
            err=True,
        )

    problems = _write_outputs(report, json_path, csv_path, require_identical, session.final_meta())
    try:
        arm_infos = (session.final_meta() or {}).get("arms")
        click.echo(format_report(report, workload_name, require_identical, arm_infos))
        if plot:
            click.echo("\n" + _plots(report, session.final_meta(), label))
    except OSError:  # stdout gone (closed SSH session): the files above still hold the report
        status = status or 1
    for line in problems:
        click.echo(f"Error: {line}", err=True)
    if report.interrupted:
        click.echo(f"mtpwatch bench: {report.interrupted}; the report covers those runs", err=True)
    if status:
        sys.exit(status)
    if problems or report.gate_failures(require_identical):
        sys.exit(1)
