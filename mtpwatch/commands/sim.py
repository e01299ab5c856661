"""`mtpwatch sim`: run the vLLM simulator in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from mtpwatch.commands.options import one_line
from mtpwatch.core.launch.vllm_cmd import is_loopback
from mtpwatch.sim import METRICS_FILTER_MODES
from mtpwatch.sim.presets import DEFAULT_PRESET, PRESETS

if TYPE_CHECKING:  # the server pulls aiohttp: imported only when a simulator runs
    from mtpwatch.sim.options import SimOptions
    from mtpwatch.sim.server import SimServer


def _print_version(ctx: click.Context) -> None:
    """`vllm --version` prints the bare version (argparse's `version` action, `vllm/entrypoints/cli/
    main.py` 0.34 :94-96): the simulator answers with the one it imitates (its /version)."""
    from mtpwatch.sim.replies import VLLM_VERSION

    click.echo(VLLM_VERSION)
    ctx.exit(0)


@click.command(name="sim", context_settings={"ignore_unknown_options": True})
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--preset", default=DEFAULT_PRESET, type=click.Choice(list(PRESETS)), help="Model + GPU to simulate."
)
@click.option(
    "--version",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=lambda ctx, _param, value: _print_version(ctx) if value else None,
    help="Print the vLLM version the simulator imitates and exit, as `vllm --version` does.",
)
@click.option("--host", default="127.0.0.1", help="Address to bind.")
@click.option(
    "--port", default=8000, type=click.IntRange(0, 65535), help="Port; 0 picks a free one (printed)."
)
@click.option(
    "--no-spec", is_flag=True, help="Baseline twin: no drafter, no spec counters, same timing otherwise."
)
@click.option(
    "-k",
    "--num-speculative-tokens",
    "k",
    type=click.IntRange(1, 32),
    help="num_speculative_tokens (default: the preset's).",
)
@click.option(
    "--acceptance",
    type=click.FloatRange(0.0, 2.0),
    default=1.0,
    help="Scale the preset's acceptance profile.",
)
@click.option("--served-model-name", help="Model name in the API and metrics (default: HF id).")
@click.option("--seed", default=0, help="Seed of the acceptance RNG.")
@click.option(
    "--speed",
    default=1.0,
    type=click.FloatRange(min=0.01),
    help="Run the physics this many times faster than real time.",
)
@click.option(
    "--startup-delay",
    default=0.0,
    type=click.FloatRange(min=0.0),
    help="Simulated model-load time (seconds) before serving.",
)
@click.option(
    "--log-interval",
    default=10.0,
    type=click.FloatRange(min=0.1),
    help="Seconds between the Engine/SpecDecoding stats lines.",
)
@click.option("--api-key", envvar="VLLM_API_KEY", help="Require this Bearer key on /v1/*.")
@click.option("--max-num-seqs", type=click.IntRange(1), help="Batch limit (default: preset's).")
@click.option("--mfu-metrics", is_flag=True, help="Increment vllm:estimated_read_bytes_per_gpu_total.")
@click.option(
    "--per-request-spec-decode-metrics",
    "per_request",
    type=click.Choice(["none", "summary"]),
    default="none",
    help="As vLLM >= 0.27: per-request acceptance on the final usage chunk.",
)
@click.option(
    "--fault-cut-stream",
    type=click.IntRange(0),
    metavar="N",
    help="Drop each stream's connection after N tokens.",
)
@click.option("--fault-metrics-500", is_flag=True, help="Answer /metrics with HTTP 500.")
@click.option(
    "--fault-metrics-filter",
    type=click.Choice(METRICS_FILTER_MODES),
    default="honour",
    help="How /metrics/?name[]=… answers: as vLLM 0.32 (honour), the whole page (ignore), an empty 200 "
    "(empty: several API servers), 404, or a redirect to /metrics.",
)
@click.option(
    "--fault-metrics-delay",
    type=click.FloatRange(min=0.0),
    default=0.0,
    show_default=False,
    metavar="S",
    help="Delay every /metrics answer by S seconds.",
)
@click.option(
    "--fault-exit-after",
    type=click.FloatRange(min=0.0),
    metavar="S",
    help="Exit the process (status 1) S seconds after start-up ('server died').",
)
@click.option(
    "--fault-restart-after",
    type=click.FloatRange(min=0.0),
    metavar="S",
    help="Simulate a restart S seconds after start-up (counters reset, new _created).",
)
@click.option(
    "--gpu-ledger",
    type=click.Path(file_okay=False),
    envvar="MTPWATCH_SIM_GPU_DIR",
    help="With `serve MODEL`: folder of the simulated GPUs' memory ledgers (default: a temp folder).",
)
@click.option(
    "--load",
    type=click.IntRange(0, 1024),
    default=0,
    help="Background traffic: keep N requests in flight inside the server (a busy server, no client).",
)
@click.option(
    "--count",
    type=click.IntRange(1, 1024),
    default=1,
    help="Serve this many independent servers from one process (ports PORT, PORT+1, …; 0: free ports).",
)
@click.option(
    "--vllm-log",
    type=click.Choice(["0.32-cpu", "0.34-gpu"]),
    help="Start-up log to print: vLLM 0.32's CPU build (Model Runner V1) or 0.34 on a GPU (Model "
    "Runner V2). Default 0.32-cpu (0.34-gpu with --frontend rust).",
)
@click.option(
    "--frontend",
    type=click.Choice(["python", "rust"]),
    default="python",
    help="API server: vLLM's Python one, or the Rust frontend of vLLM 0.33/0.34 "
    "(VLLM_USE_RUST_FRONTEND=1: OpenMetrics /metrics, no /metrics/ filter, its own stats line).",
)
@click.option("--list-presets", is_flag=True, help="Print the presets and exit.")
def command(**params: Any) -> None:
    """Run the vLLM simulator: a real HTTP server that speaks vLLM 0.32's API, /metrics and logs.

    Faults can also be switched at run time: POST /sim/fault with JSON such as
    {"cut_stream_after": 20, "cut_mid_chunk": true}, {"metrics_500": true}, {"metrics_delay_s": 2},
    {"metrics_truncate": true}, {"metrics_no_spec": true}, {"metrics_filter": "ignore"}, {"hang": true},
    {"restart": true}, {"exit": true}, {"clear": true}. GET /sim/info describes the simulated deployment.

    It also reads `vllm serve`'s command line, so that `--vllm "mtpwatch sim --speed 10"` stands in
    for vLLM: `mtpwatch sim serve MODEL --port 8001 --speculative-config '{...}'
    --gpu-memory-utilization 0.4`. The preset follows MODEL's name (E4B, 26B-A4B, 31B) unless
    --preset is given; no --speculative-config means no speculation; simulated servers on one
    simulated GPU share its memory and refuse to start, as vLLM does, when it is not free.
    Other vLLM flags are logged and ignored.
    """
    if params.pop("list_presets"):
        for p in PRESETS.values():
            click.echo(f"{p.name:24} {p.description}")
        return
    # Lazy: the server pulls aiohttp; `mtpwatch sim --help` and --list-presets do not need it.
    from mtpwatch.sim.options import make_options

    if not is_loopback(params["host"]):
        click.echo(
            f"warning: binding {params['host']} exposes the simulator beyond this machine; "
            "use 127.0.0.1 unless you mean it",
            err=True,
        )
    vllm_args, count = params.pop("vllm_args"), params.pop("count")
    params["spec"] = not params.pop("no_spec")
    params["metrics_status"] = 500 if params.pop("fault_metrics_500") else None
    params["per_request_spec_metrics"] = params.pop("per_request") == "summary"
    params["vllm_log"] = params["vllm_log"] or ("0.34-gpu" if params["frontend"] == "rust" else "0.32-cpu")
    options = make_options(
        **{_FIELDS.get(name, name): value for name, value in params.items()}, exit_mode="process"
    )
    options = _from_serve_args(vllm_args, options)
    _run(_servers(options, count), options.host, options.spec)


_FIELDS = {
    "acceptance": "acceptance_scale",
    "startup_delay": "startup_delay_s",
    "log_interval": "log_interval_s",
    "fault_exit_after": "exit_after_s",
    "fault_restart_after": "restart_after_s",
    "fault_cut_stream": "cut_stream_after",
    "fault_metrics_delay": "metrics_delay_s",
    "fault_metrics_filter": "metrics_filter",
    "gpu_ledger": "gpu_ledger_dir",
}
"""The `SimOptions` (or `Faults`) field of each flag whose parameter is named otherwise."""


def _from_serve_args(vllm_args: tuple[str, ...], options: SimOptions) -> SimOptions:
    """`options` as `sim serve MODEL …`, vLLM's command line, sets them; as given when there is none."""
    from mtpwatch.sim.vllm_args import ServeArgsError, parse_serve_args, preset_for_model, served_method

    with one_line(ServeArgsError):
        serve = parse_serve_args(vllm_args)
    if serve is None:
        if vllm_args:
            raise click.UsageError(f"unexpected arguments: {' '.join(vllm_args)}")
        return options
    preset, k = options.preset, options.k
    if (
        click.get_current_context().get_parameter_source("preset")
        is not click.core.ParameterSource.COMMANDLINE
    ):
        preset = preset_for_model(serve.model)
    spec_cfg = serve.speculative_config
    if spec_cfg is not None:
        try:
            k = int(spec_cfg.get("num_speculative_tokens", k or 1))
        except (TypeError, ValueError):
            raise click.UsageError(
                "--speculative-config: num_speculative_tokens must be an integer"
            ) from None
    schedule = None
    if spec_cfg is not None and "num_speculative_tokens_per_batch_size" in spec_cfg:
        from mtpwatch.core.sweeps.engine import parse_schedule
        from mtpwatch.sim.engine import check_schedule

        schedule = parse_schedule(spec_cfg["num_speculative_tokens_per_batch_size"])
        with one_line(ValueError, prefix="--speculative-config: "):
            if schedule is None:
                raise ValueError("num_speculative_tokens_per_batch_size must be [[first, last, k], ...]")
            check_schedule(schedule, k or 1)
    if serve.ignored:
        click.echo(f"mtpwatch sim: vLLM flags not simulated (ignored): {' '.join(serve.ignored)}")
    return replace(
        options,
        preset=preset,
        spec=spec_cfg is not None,
        k=k,
        k_schedule=schedule,
        model=serve.model,
        method=served_method(spec_cfg),
        drafter=spec_cfg.get("model") if spec_cfg else None,
        gpu_memory=True,
        gpu_memory_utilization=serve.gpu_memory_utilization or 0.9,
        kv_cache_memory_bytes=serve.kv_cache_memory_bytes,
        max_model_len=serve.max_model_len,
        enforce_eager=serve.enforce_eager,
    )


def _servers(options: SimOptions, count: int) -> list[SimServer]:
    """The --count servers: each its own seed (independent acceptance draws) and its own port."""
    from mtpwatch.sim.server import SimServer, default_log_stream

    port, seed = options.port, options.seed
    if count > 1 and port != 0 and port + count - 1 > 65535:
        raise click.UsageError(f"--count {count} from --port {port} runs past port 65535")
    with one_line(ValueError):
        return [
            SimServer(
                replace(options, port=port + i if port else 0, seed=seed + i, faults=replace(options.faults)),
                log=default_log_stream() if count == 1 else None,
            )
            for i in range(count)
        ]


def _run(servers: list[SimServer], host: str, spec: bool) -> None:
    """Bind every server (one line each), start them, serve until SIGINT/SIGTERM, stop them all."""
    from mtpwatch.sim.startup import SimStartupError

    async def main() -> None:
        try:
            for server in servers:
                try:
                    url = await server.bind()
                except OSError as exc:
                    bound = f"{host}:{server.options.port}"
                    raise click.ClickException(f"cannot bind {bound}: {exc.strerror or exc}") from None
                mode = f"{server.preset.method} k={server.physics.k}" if spec else "no speculation"
                click.echo(
                    f"mtpwatch sim: {server.preset.name} ({mode}) serving {server.model_name} on {url}"
                )
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            for server in servers:
                await server.start()
            await stop.wait()
        except SimStartupError:
            sys.exit(1)
        finally:
            await asyncio.gather(*(server.stop() for server in servers))

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
