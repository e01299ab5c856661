"""`mtpwatch bench --start MODEL --sweep-k 0,1,2,4`: find the best k, one server at a time, and predict it.

Called by the `bench` command with its `BenchOptions`; `core.sweeps.kscan` plans and runs the sweep,
`render.sweep_table` prints it; `--json-file FILE` writes all of it, `--json` prints it instead.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from mtpwatch.commands.bench_progress import Progress, progress_mode
from mtpwatch.commands.bench_run import bench_config
from mtpwatch.commands.options import (
    check_writable,
    drafter_option,
    free_port,
    gpu_free_option,
    gpu_memory_option,
    method_option,
    one_line,
    stacked,
    vllm_option,
)
from mtpwatch.commands.planning import drafter_gib_option, gpu_for_plan, print_plan
from mtpwatch.core import provenance
from mtpwatch.core.ab.options import BenchOptions
from mtpwatch.core.ab.plan import BenchConfigError
from mtpwatch.core.jsonout import dumps
from mtpwatch.core.launch.memplan import PlanError
from mtpwatch.core.launch.servers import LaunchPlan
from mtpwatch.core.launch.specrule import read_vllm_version
from mtpwatch.core.launch.vllm_cmd import METHODS, VllmArgsError
from mtpwatch.core.reports import reportio
from mtpwatch.core.sweeps.forward import ForwardError, ForwardTable, load_forward, steps_at
from mtpwatch.core.sweeps.idle import idle_refusal, parse_sweep_ks
from mtpwatch.core.sweeps.kscan import plan_k_sweep, run_k_sweep
from mtpwatch.render.schedule_table import format_concurrency
from mtpwatch.render.sweep_table import format_idle, format_sweep


def sweep_options(func: Any) -> Any:
    """The k sweep's options; it shares the bench's own --gpu, --concurrency, --label and --metadata."""
    return stacked(
        func,
        click.option("--start", "start_model", metavar="MODEL", help="k sweep: start MODEL's servers."),
        click.option(
            "--sweep-k",
            default="0,1,2,4",
            metavar="LIST",
            help="k sweep: the ks (0 = off; 0s = speculation on at k=0, a batch-size schedule of k=0 "
            "with the largest k's config, measured against 0: its cost; vLLM 0.32+).",
        ),
        method_option("k sweep: speculation method.", type=click.Choice(METHODS)),
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
    )


def sweep_from_bench(opts: BenchOptions) -> None:
    """The bench's --start MODEL branch."""
    if (opts.url is not None and opts.typed("url")) or opts.ab is not None:
        raise click.UsageError("give --start MODEL or server URLs, not both")
    check_writable(opts.json_path, "--json-file")
    config = bench_config(opts, opts.prompts_spec, "restart")
    with one_line(BenchConfigError):
        config.validate(paired=True)
    with one_line(ValueError, option="--metadata"):
        metadata = provenance.parse_metadata(opts.metadata)
    with one_line(ValueError, option="--sweep-k"):
        ks, idle = parse_sweep_ks(opts.sweep_k)
    step_times = _step_times(opts.step_times, config.concurrency)
    plan = _plan(opts, ks, idle)
    if opts.show_plan:  # print the plan (as JSON with --json; and write it to --json-file), start nothing
        print_plan(plan, opts.json_out)
        if opts.json_path is not None:
            doc = provenance.with_meta(plan.to_json(), metadata={"source": "k sweep plan"})
            reportio.write_document(opts.json_path, doc)
        return
    try:
        sweep = run_k_sweep(
            opts,
            plan,
            config,
            idle=idle,
            step_times=step_times,
            on_event=Progress(sys.stderr, progress_mode(opts.progress)),
            echo=functools.partial(click.echo, err=True),
        )
    except KeyboardInterrupt:
        click.echo("mtpwatch bench: stopped by Ctrl-C", err=True)
        sys.exit(130)
    if not sweep.measured():  # vLLM could not start, …: one line why, no report (`plot` would refuse it)
        why = sweep.report.interrupted or "no run finished"
        written = f"; {opts.json_path} not written" if opts.json_path is not None else ""
        click.echo(f"mtpwatch bench: nothing measured ({why}){written}", err=True)
        sys.exit(1)
    document = sweep.document(opts, config, metadata) if opts.json_out or opts.json_path else None
    if opts.json_path is not None and document is not None:
        reportio.write_document(opts.json_path, document)
        click.echo(f"wrote {opts.json_path}", err=True)
    if opts.json_out and document is not None:  # --json: the document on stdout instead of the tables
        click.echo(dumps(document, indent=2))
    else:  # the tables: the sweep, the 0s arm, the per-concurrency advice
        click.echo(format_sweep(sweep.report, sweep.title(opts.start_model or "")))
        if sweep.spec_idle is not None:
            click.echo("\n" + format_idle(sweep.spec_idle[0]))
        if sweep.concurrency is not None:
            click.echo("\n" + format_concurrency(sweep.concurrency))
    if sweep.interrupted():
        sys.exit(1)


def _plan(opts: BenchOptions, ks: Sequence[int], idle: bool) -> LaunchPlan:
    """The sweep's servers and memory plan; one line when vLLM's flags or the memory refuse it."""
    with one_line(VllmArgsError, PlanError):
        plan = plan_k_sweep(
            opts,
            ks,
            ports=[free_port()] * len(ks),
            gpu=gpu_for_plan(opts.gpu, opts.gpu_memory, opts.gpu_free),
            version=read_vllm_version(opts.vllm_cmd),
        )
    refusal = idle_refusal(plan.version.text) if idle else None
    if refusal is not None:
        raise click.UsageError(refusal)
    return plan


def _step_times(path: Path | None, concurrency: Sequence[int]) -> ForwardTable | None:
    """`--step-times`, read and checked before any server starts (a batch with a k=0 case)."""
    if path is None:
        return None
    with one_line(ForwardError, option="--step-times"):
        table = load_forward(path)
        steps_at(table, concurrency)
    return table
