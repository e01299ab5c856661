"""`mtpwatch bench`: the headless paired A/B benchmark (and a one-server benchmark).

Prints a table on stdout (`--json`: the report instead), progress on stderr, and optionally writes
`--json-file` / `--csv`. Exits 1 when a sanity gate fails (failed requests, a per-position list
whose length is not k, inconsistent counters, or diverging outputs with `--require-identical`), so
scripts and CI can trust a zero exit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from mtpwatch.commands import bench_run
from mtpwatch.commands.connection import tls_options
from mtpwatch.commands.context import context_from_bench, context_option
from mtpwatch.commands.options import (
    api_key_option,
    chat_option,
    gpu_option,
    json_file,
    json_options,
    label_option,
    limit_option,
    metadata_option,
    model_option,
    prompts_option,
    runs_option,
    schedule_option,
    startup_timeout_option,
    temperature_option,
    warmup_option,
)
from mtpwatch.commands.planning import PassthroughCommand, extra_args
from mtpwatch.commands.sweep import sweep_from_bench, sweep_options
from mtpwatch.core.ab import workloads
from mtpwatch.core.ab.options import BenchOptions


@click.command(
    "bench",
    cls=PassthroughCommand,
    epilog="A = baseline (MTP off), B = treatment (MTP on); speed-ups are B/A. "
    "Examples: mtpwatch bench --ab http://127.0.0.1:8001 http://127.0.0.1:8002 --prompts long "
    "--json-file ab.json",
)
@click.argument("url", required=False)
@click.option(
    "--ab", nargs=2, metavar="URL_A URL_B", help="Paired A/B: A = baseline (MTP off), B = treatment (MTP on)."
)
@prompts_option(
    f"Built-in set ({', '.join(workloads.BUILTIN_SETS)}) or a JSONL file (prompt/category/max_tokens, "
    "or SPEED-Bench turns)."
)
@limit_option("Use only the first N prompts of each category.")
@runs_option("Runs per prompt and arm, warm-up included.")
@warmup_option("Runs per prompt dropped as warm-up.")
@click.option("--max-tokens", type=click.IntRange(1, 1_000_000), help="Override every prompt's max_tokens.")
@click.option(
    "--lengths",
    metavar="8,32,...",
    help="Break-even sweep: force these output lengths (ignore_eos + min_tokens).",
)
@schedule_option(
    "alternate = the measurement; race = both at once, for show (contended); "
    "restart = one server at a time (needs --launch-a/--launch-b).",
    type=click.Choice(("alternate", "race", "restart")),
)
@click.option("--launch-a", metavar="CMD", help="restart schedule: command line that starts server A.")
@click.option("--launch-b", metavar="CMD", help="restart schedule: command line that starts server B.")
@startup_timeout_option("restart schedule: seconds to wait for /health after each start.")
@click.option(
    "--concurrency",
    default="1",
    metavar="1,2,4",
    help="Concurrency sweep: requests in flight per arm (above 1 the speed is aggregate output tok/s).",
)
@temperature_option("Sampling temperature (0 makes the lossless check meaningful).")
@chat_option()
@model_option("Served model name (default: the server's only model).")
@api_key_option()
@click.option(
    "--require-identical", is_flag=True, help="Exit 1 when the two arms' outputs differ at temperature 0."
)
@json_options("the full report")
@click.option(
    "--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), help="Write one row per run as CSV."
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress on stderr: a line rewritten in place on a terminal, else one line every "
    "--progress-interval seconds; --progress forces the in-place line.",
)
@sweep_options
@context_option
@click.option(
    "--progress-interval",
    type=click.FloatRange(min=1.0),
    default=30.0,
    help="Seconds between progress lines when stderr is not a terminal.",
)
@label_option("A name for this bench, kept in the report (plot/compare show it).")
@metadata_option(
    "Extra provenance kept in the report's meta block (repeatable), e.g. --metadata image=v0.32."
)
@gpu_option(
    "GPU the servers run on: for the report (default: this host's, by NVML, for loopback servers) "
    "and, with --start, the memory plan (a table name)."
)
@click.option(
    "--jsonl",
    "jsonl_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write each run as a JSON line the moment it finishes (a killed bench keeps them; see --resume).",
)
@click.option(
    "--resume",
    "resume_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Finish the bench that wrote this --jsonl log: same prompts, settings and servers, only the "
    "runs it lacks; new runs are appended to it.",
)
@click.option(
    "--plot", is_flag=True, help="Also draw the report's figures (as `mtpwatch plot` does) under the table."
)
@tls_options
def command(**params: Any) -> None:
    """Paired A/B benchmark: speed-up with a 95 % CI, acceptance, lossless check, break-even.

    URL defaults to http://127.0.0.1:8000 (or the config file's `url`). With --start MODEL
    --sweep-k 0,1,2,4: a k sweep, one server at a time (flags after -- go to every vLLM server),
    with the k advisor's predictions beside the measured figures.
    """
    ctx = click.get_current_context()
    typed = [
        name for name in params if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    ]
    params["json_path"] = json_file(params["json_path"], params["json_out"], params["plot"])
    opts = BenchOptions.from_params(params, given=typed, extra=extra_args())
    if opts.step_times is not None and opts.start_model is None:
        raise click.UsageError("--step-times feeds the k sweep's advisor: give --start MODEL --sweep-k …")
    if opts.context_lengths is not None:  # acceptance against context length: commands.context
        context_from_bench(opts)
    elif opts.start_model is not None:  # the k sweep: commands.sweep
        sweep_from_bench(opts)
    else:
        bench_run.bench(opts)
