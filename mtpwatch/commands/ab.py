"""`mtpwatch ab URL_A URL_B`: two servers side by side with one prompt console and F6 measurements."""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from typing import Any

import click

from mtpwatch.commands.connection import tls_options
from mtpwatch.commands.options import (
    api_key_option,
    check_runs,
    checked_url,
    display_options,
    display_settings,
    drafter_option,
    free_port,
    k_option,
    limit_option,
    measure_options,
    method_option,
    model_option,
    one_line,
    prompts_option,
    record_option,
    schedule_option,
    vllm_option,
)
from mtpwatch.commands.planning import (
    PassthroughCommand,
    extra_args,
    gpu_for_plan,
    plan_options,
    print_plan,
    split_args,
)
from mtpwatch.config import AppConfig, LaunchSpec, MeasureSettings, Schedule, ServerSpec
from mtpwatch.core.ab.workloads import Prompt, resolve
from mtpwatch.core.launch.memplan import NoGpuMemoryError, PlanError, free_now_refusal
from mtpwatch.core.launch.servers import plan_twins
from mtpwatch.core.launch.specrule import read_vllm_version
from mtpwatch.core.launch.vllm_cmd import METHODS, VllmArgsError


@dataclass(frozen=True, slots=True)
class AbOptions:
    """The options of `mtpwatch ab` but the display ones (`display_settings` takes those)."""

    url_a: str | None
    url_b: str | None
    start_model: str | None
    method: str | None
    drafter: str | None
    k: int | None
    vllm_cmd: str
    a_args: str | None
    b_args: str | None
    show_plan: bool
    plan_json: bool
    gpu_memory: float | None
    gpu_free: float | None
    drafter_gib: float | None
    keep: bool
    schedule: Schedule
    restart: bool
    prompts_spec: str
    limit: int | None
    model: str | None
    api_key: str | None
    runs: int
    warmup: int
    save_path: str | None
    record: str | None

    @classmethod
    def split(cls, params: dict[str, Any]) -> tuple[AbOptions, dict[str, Any]]:
        """These options, and the rest (the display options) by name."""
        names = {f.name for f in fields(cls)}
        mine = {name: value for name, value in params.items() if name in names}
        return cls(**mine), {name: value for name, value in params.items() if name not in names}


@click.command("ab", cls=PassthroughCommand)
@click.argument("url_a", required=False)
@click.argument("url_b", required=False)
@click.option(
    "--start",
    "start_model",
    metavar="MODEL",
    help="Start both twins yourself: MODEL without speculation (A) and with it (B). Flags after -- go "
    "to both vLLM servers.",
)
@method_option(
    "With --start: B's speculation method (default: mtp without a drafter; with one, what its config.json "
    "says, else left for vLLM to detect; ngram needs no drafter).",
    type=click.Choice(METHODS),
)
@drafter_option("With --start: the drafter model (MTP assistant / EAGLE head).")
@k_option("With --start: speculative tokens per step.")
@vllm_option("With --start: the command running vLLM.")
@click.option(
    "-a",
    "--a-args",
    metavar="FLAGS",
    help="With --start: vLLM flags for A only, quoted: -a '--max-num-seqs 4'.",
)
@click.option("-b", "--b-args", metavar="FLAGS", help="With --start: vLLM flags for B only.")
@plan_options
@click.option("--keep", is_flag=True, help="With --start: leave the servers running on exit.")
@schedule_option(
    "alternate: A then B, never concurrent, ABBA across prompts; race: both at once (contended).",
    type=click.Choice(("alternate", "race")),
)
@click.option(
    "--restart",
    is_flag=True,
    help="With --start: one server at a time (machines that cannot hold both, e.g. two 31B on a "
    "128 GB Spark). Goes straight into a measurement of --prompts, A, B, A sessions restarting the "
    "servers in between; prompts you type afterwards are measured the same way.",
)
@prompts_option(
    "With --restart: prompt set measured at startup (built-in name: long, short, code, math, "
    "long-en, long-ja; or a JSONL file)."
)
@limit_option("With --restart: first N prompts of the set.")
@model_option("model_name to watch on both servers.")
@api_key_option(
    "Bearer token (default: $VLLM_API_KEY, else $OPENAI_API_KEY); servers started with --start get "
    "it through their environment, never their command line."
)
@display_options
@tls_options
@measure_options
@record_option
def command(**params: Any) -> None:
    """Compare A (URL_A, e.g. MTP off) and B (URL_B, e.g. MTP on) on the same prompts, live.

    F6 measures the last prompt: --runs runs per arm (ABBA order, the first --warmup dropped),
    speed-up as the median paired ratio with a 95 % CI, CV flagged above 10 %.
    """
    opts, display = AbOptions.split(params)
    settings = display_settings(**display)
    check_runs(opts.runs, opts.warmup)
    extra = extra_args()
    restart = opts.restart
    if restart and opts.start_model is None:
        raise click.UsageError("--restart needs --start MODEL: mtpwatch must start and stop the servers")
    if opts.start_model is None and (opts.show_plan or extra or opts.a_args or opts.b_args or opts.method):
        raise click.UsageError("--plan, --method, -a/-b and flags after -- need --start MODEL")
    if opts.start_model is not None:
        if opts.url_a or opts.url_b:
            raise click.UsageError("give either URL_A URL_B or --start MODEL, not both")
        twins = _twins(
            opts, opts.start_model, extra, gpu_for_plan(settings.gpu, opts.gpu_memory, opts.gpu_free)
        )
        if twins is None:
            return
        specs, restart = twins
    else:
        if not (opts.url_a and opts.url_b):
            raise click.UsageError("give two URLs (URL_A URL_B) or --start MODEL")
        a, b = checked_url(opts.url_a, "URL_A"), checked_url(opts.url_b, "URL_B")
        specs = [
            ServerSpec(label=f"A · {a}", url=a, model=opts.model, api_key=opts.api_key),
            ServerSpec(label=f"B · {b}", url=b, model=opts.model, api_key=opts.api_key),
        ]
    prompts = _restart_prompts(opts.prompts_spec, opts.limit, settings.max_tokens) if restart else []
    measure = MeasureSettings(
        runs=opts.runs, warmup=opts.warmup, restart=restart, prompts=tuple(prompts), save_path=opts.save_path
    )
    title = "mtpwatch A/B (restart: one server at a time)" if restart else "mtpwatch A/B"
    config = AppConfig(
        servers=specs,
        display=settings,
        mode="ab",
        title=title,
        record=opts.record,
        schedule="restart" if restart else opts.schedule,
        measure=measure,
    )
    from mtpwatch.ui.app import run_app  # lazy: Textual loads only for the UI

    sys.exit(run_app(config))


def _twins(
    opts: AbOptions, model: str, extra: tuple[str, ...], gpu: Any
) -> tuple[list[ServerSpec], bool] | None:
    """The twins mtpwatch starts (A without speculation, B with it) and whether they must take turns
    (the memory plan's restart schedule); None after printing the plan (--plan)."""
    # a refusal (no GPU memory) is not a usage mistake
    with one_line(VllmArgsError, PlanError), one_line(NoGpuMemoryError, kind=click.ClickException):
        plan = plan_twins(
            model,
            ports=(free_port(), free_port()),
            method=opts.method,
            drafter=opts.drafter,
            k=opts.k,
            vllm=opts.vllm_cmd,
            api_key=opts.api_key,
            extra=extra,
            a_args=split_args(opts.a_args, "--a-args"),
            b_args=split_args(opts.b_args, "--b-args"),
            gpu=gpu,
            restart=True if opts.restart else None,
            version=read_vllm_version(opts.vllm_cmd),
            drafter_gib=opts.drafter_gib,
        )
    if opts.show_plan:
        print_plan(plan, opts.plan_json)
        return None
    from mtpwatch.core.launch.gpumem import local_gpu_memory  # lazy: asyncio and NVML only for --start

    # Refuse, in one line, twins whose shares the GPU cannot hold now, where vLLM would not (0.34).
    refusal = free_now_refusal(plan.memory, local_gpu_memory())
    if refusal is not None:
        raise click.ClickException(refusal)
    restart = opts.restart
    if plan.schedule == "restart" and not restart:
        click.echo(f"mtpwatch ab: restart schedule — {plan.memory.why}", err=True)
        restart = True
    specs = [
        ServerSpec(
            label=s.label,
            url=s.url,
            model=opts.model,
            api_key=opts.api_key,
            launch=LaunchSpec(argv=s.argv, env=dict(s.env), keep=opts.keep),
        )
        for s in plan.servers
    ]
    return specs, restart


def _restart_prompts(prompts_spec: str, limit: int | None, max_tokens: int) -> list[Prompt]:
    """The set `--restart` measures at startup. Each prompt keeps its set's length (short: 8 tokens,
    long: 256) unless --max-tokens is given: the console's default of 256 is for typed prompts."""
    source = click.get_current_context().get_parameter_source("max_tokens")
    chosen = source not in (None, click.core.ParameterSource.DEFAULT)
    try:
        return list(resolve(prompts_spec, limit=limit, max_tokens=max_tokens if chosen else None))
    except (ValueError, OSError) as exc:
        raise click.UsageError(f"--prompts: {str(exc).splitlines()[0]}") from None
