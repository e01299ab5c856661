"""`mtpwatch ab URL_A URL_B`: two servers side by side with one prompt console and F6 measurements."""

from __future__ import annotations

import sys

import click

from mtpwatch.commands.connection import tls_options
from mtpwatch.commands.options import (
    check_runs,
    checked_url,
    display_options,
    display_settings,
    free_port,
    measure_options,
)
from mtpwatch.config import AppConfig, LaunchSpec, MeasureSettings, Schedule, ServerSpec
from mtpwatch.core.ab.workloads import Prompt


@click.command("ab")
@click.argument("url_a", required=False)
@click.argument("url_b", required=False)
@click.option(
    "--start",
    "start_model",
    default=None,
    metavar="MODEL",
    help="Start both twins yourself: MODEL with speculation (B) and without (A).",
)
@click.option("--drafter", default=None, help="With --start: the drafter model (MTP assistant / EAGLE head).")
@click.option(
    "-k",
    "--num-speculative-tokens",
    "k",
    type=click.IntRange(1, 64),
    default=None,
    help="With --start: speculative tokens per step.",
)
@click.option(
    "--vllm", "vllm_cmd", default="vllm", show_default=True, help="With --start: the command running vLLM."
)
@click.option("--keep", is_flag=True, help="With --start: leave the servers running on exit.")
@click.option(
    "--schedule",
    type=click.Choice(["alternate", "race"]),
    default="alternate",
    show_default=True,
    help="alternate: A then B, never concurrent, ABBA across prompts; race: both at once (contended).",
)
@click.option(
    "--restart",
    is_flag=True,
    help="With --start: one server at a time (machines that cannot hold both, e.g. two 31B on a "
    "128 GB Spark). Goes straight into a measurement of --prompts, A, B, A sessions restarting the "
    "servers in between; prompts you type afterwards are measured the same way.",
)
@click.option(
    "--prompts",
    "prompts_spec",
    default="long",
    show_default=True,
    help="With --restart: prompt set measured at startup (built-in name: long, short, code, math, "
    "long_en, long_ja; or a JSONL file).",
)
@click.option(
    "--limit",
    type=click.IntRange(1, 100_000),
    default=None,
    help="With --restart: first N prompts of the set.",
)
@click.option("--model", default=None, help="model_name to watch on both servers.")
@click.option("--api-key", default=None, envvar="VLLM_API_KEY", help="Bearer token (default: $VLLM_API_KEY).")
@display_options
@tls_options
@measure_options
def command(
    url_a: str | None,
    url_b: str | None,
    start_model: str | None,
    drafter: str | None,
    k: int | None,
    vllm_cmd: str,
    keep: bool,
    schedule: Schedule,
    restart: bool,
    prompts_spec: str,
    limit: int | None,
    model: str | None,
    api_key: str | None,
    runs: int,
    warmup: int,
    save_path: str | None,
    **display: object,
) -> None:
    """Compare A (URL_A, e.g. MTP off) and B (URL_B, e.g. MTP on) on the same prompts, live.

    F6 measures the last prompt: --runs runs per arm (ABBA order, the first --warmup dropped),
    speed-up as the median paired ratio with a 95 % CI, CV flagged above 10 %.
    """
    settings = display_settings(**display)  # type: ignore[arg-type]
    check_runs(runs, warmup)
    if restart and start_model is None:
        raise click.UsageError("--restart needs --start MODEL: mtpwatch must start and stop the servers")
    if start_model is not None:
        if url_a or url_b:
            raise click.UsageError("give either URL_A URL_B or --start MODEL, not both")
        from mtpwatch.core.launch.vllm_cmd import VllmArgsError, build_vllm_argv, server_env

        specs = []
        try:
            for label, no_spec in (("A · MTP off", True), ("B · MTP on", False)):
                port = free_port()
                argv = build_vllm_argv(
                    start_model,
                    drafter=drafter,
                    k=k,
                    no_spec=no_spec,
                    port=port,
                    vllm=vllm_cmd,
                )
                specs.append(
                    ServerSpec(
                        label=label,
                        url=f"http://127.0.0.1:{port}",
                        model=model,
                        api_key=api_key,
                        launch=LaunchSpec(argv=tuple(argv), env=server_env(api_key), keep=keep),
                    )
                )
        except VllmArgsError as exc:
            raise click.UsageError(str(exc)) from None
    else:
        if not (url_a and url_b):
            raise click.UsageError("give two URLs (URL_A URL_B) or --start MODEL")
        a, b = checked_url(url_a, "URL_A"), checked_url(url_b, "URL_B")
        specs = [
            ServerSpec(label=f"A · {a}", url=a, model=model, api_key=api_key),
            ServerSpec(label=f"B · {b}", url=b, model=model, api_key=api_key),
        ]
    # lazy: Textual loads only once the arguments are checked
    from mtpwatch.ui.measure import prompt_set

    prompts: list[Prompt] = []
    if restart:
        try:
            prompts = prompt_set(prompts_spec, limit, settings.max_tokens)
        except (ValueError, OSError) as exc:
            raise click.UsageError(f"--prompts: {str(exc).splitlines()[0]}") from None
    measure = MeasureSettings(
        runs=runs, warmup=warmup, restart=restart, prompts=tuple(prompts), save_path=save_path
    )
    title = "mtpwatch A/B (restart: one server at a time)" if restart else "mtpwatch A/B"
    config = AppConfig(servers=specs, display=settings, mode="ab", title=title)
    from mtpwatch.ui.app import run_app  # lazy: Textual loads only for the UI

    sys.exit(run_app(config, schedule="restart" if restart else schedule, measure=measure))
