"""`mtpwatch demo`: two simulated servers (MTP off / on), watched side by side. No GPU, no vLLM."""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING

import click

from mtpwatch.commands.options import check_runs, free_port, measure_options, record_option, schedule_option
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, MeasureSettings, Schedule, ServerSpec

if TYPE_CHECKING:
    from mtpwatch.core.ab.workloads import Prompt


def demo_config(
    preset: str | None = None,
    *,
    single: bool = False,
    startup_delay: float | None = None,
    record: str | None = None,
) -> AppConfig:
    """The demo's servers: simulator subprocesses on free loopback ports, started by the app."""
    from mtpwatch.core.launch.vllm_cmd import build_sim_argv
    from mtpwatch.sim.presets import DEFAULT_PRESET, get_preset

    name = get_preset(preset or DEFAULT_PRESET).name
    arms = [("MTP on", False)] if single else [("A · MTP off", True), ("B · MTP on", False)]
    servers = []
    for label, no_spec in arms:
        port = free_port()
        # a GPU server's start-up log (vLLM 0.34, Model Runner V2): what a Spark or H100 user sees
        argv = build_sim_argv(
            name, no_spec=no_spec, port=port, startup_delay=startup_delay, extra=("--vllm-log", "0.34-gpu")
        )
        servers.append(
            ServerSpec(
                label=label,
                url=f"http://127.0.0.1:{port}",
                launch=LaunchSpec(argv=tuple(argv), kind="sim", startup_timeout_s=60.0),
            )
        )
    return AppConfig(
        servers=servers,
        display=DisplaySettings(gpu=None, spec_method="mtp"),  # the simulator models MTP
        mode="single" if single else "ab",
        title=f"mtpwatch demo ({name}, simulated)",
        record=record,
    )


@click.command("demo")
@click.option("--preset", help="Simulator preset (default: Gemma 4 E4B on GB10).")
@click.option("--single", is_flag=True, help="One server (MTP on) instead of an A/B pair.")
@schedule_option("A/B schedule.", type=click.Choice(("alternate", "race")))
@click.option(
    "--restart",
    is_flag=True,
    help="One simulated server at a time, restarted between A, B, A sessions; starts by measuring "
    "the sample prompt.",
)
@click.option(
    "--loop",
    is_flag=True,
    help="Self-running: send the built-in prompts in turn, pausing between them, until quit.",
)
@measure_options
@record_option
def command(
    preset: str | None,
    single: bool,
    schedule: Schedule,
    restart: bool,
    loop: bool,
    runs: int,
    warmup: int,
    save_path: str | None,
    record: str | None,
) -> None:
    """Start two simulated servers (MTP off and on) and watch them; Enter sends the suggested prompt."""
    # lazy: Textual loads only once the arguments are checked
    from mtpwatch.sim.presets import UnknownPresetError

    check_runs(runs, warmup)
    if restart and single:
        raise click.UsageError("--restart needs the A/B pair (drop --single)")
    if restart and loop:
        raise click.UsageError("--loop sends prompts to both servers; drop --restart")

    try:
        config = demo_config(preset, single=single, record=record)
    except UnknownPresetError as exc:
        raise click.UsageError(str(exc)) from None
    # lazy: Textual loads only for the UI
    from mtpwatch.ui.app import run_app
    from mtpwatch.ui.screens.monitor import SAMPLE_PROMPT

    prompts: tuple[Prompt, ...] = ()
    if restart:  # lazy: the measurement's modules (httpx among them) only for --restart
        from mtpwatch.session.measure import measurement_prompt

        prompts = (measurement_prompt(SAMPLE_PROMPT, config.display.max_tokens),)
    measure = MeasureSettings(runs=runs, warmup=warmup, restart=restart, prompts=prompts, save_path=save_path)
    config = dataclasses.replace(
        config, schedule="restart" if restart else schedule, prefill=SAMPLE_PROMPT, measure=measure, loop=loop
    )
    sys.exit(run_app(config))
