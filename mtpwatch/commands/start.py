"""`mtpwatch start`: launch a vLLM server (MTP on or off), watch it, stop it on exit.

`--engine llama.cpp` launches llama.cpp's `llama-server` on a GGUF instead, with `--metrics` and the
same short speculation flags (`core.launch.llamacpp_cmd`), through the same process ownership.
The app starts the server itself (`LaunchSpec`); ``--headless`` runs it without the terminal UI
(`commands.start_headless`).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import click

from mtpwatch.commands.options import (
    api_key_option,
    drafter_option,
    k_option,
    method_option,
    one_line,
    record_option,
    startup_timeout_option,
    vllm_option,
)
from mtpwatch.commands.start_headless import run_headless
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, ServerSpec
from mtpwatch.core.launch.launcher import resolve_self
from mtpwatch.core.launch.llamacpp_cmd import (
    LLAMACPP_SPEC_TYPES,
    build_llamacpp_argv,
    llamacpp_env,
    llamacpp_key_env,
)
from mtpwatch.core.launch.ports import connect_url, port_in_use_message
from mtpwatch.core.launch.process import install_signal_handlers
from mtpwatch.core.launch.vllm_cmd import METHODS, VllmArgsError, bind_warning, build_vllm_argv, server_env


@dataclass(frozen=True, slots=True)
class StartOptions:
    """The options of one `mtpwatch start`, by the click parameters' names."""

    model: str
    extra: tuple[str, ...]
    drafter: str | None
    k: int | None
    method: str | None
    speculative_config: str | None
    no_spec: bool
    host: str
    port: int
    api_key: str | None
    served_model_name: str | None
    vllm_cmd: str
    engine: Literal["vllm", "llama.cpp"]
    llama_server: str
    keep: bool
    headless: bool
    startup_timeout: float
    status_interval: float
    log_file: Path | None
    record: str | None


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("model")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
@drafter_option("Drafter model (MTP assistant, EAGLE-3, draft model).")
@k_option("Number of speculative tokens per step.")
@method_option(
    "Speculation method (default mtp when -k/--drafter; llama.cpp: draft-simple with --drafter, "
    "and its own --spec-type names).",
    type=click.Choice([*METHODS, *LLAMACPP_SPEC_TYPES]),
)
@click.option("--speculative-config", metavar="JSON", help="vLLM's --speculative-config, as JSON.")
@click.option("--no-spec", is_flag=True, help="Serve without speculative decoding (the baseline).")
@click.option("--host", default="127.0.0.1", help="Address vLLM listens on.")
@click.option("--port", default=8000, type=click.IntRange(1, 65535))
@api_key_option(
    "Require this key; mtpwatch uses it too. Given to vLLM through its environment (VLLM_API_KEY), "
    "never its command line. Default: $VLLM_API_KEY, else $OPENAI_API_KEY.",
    metavar="KEY",
)
@click.option("--served-model-name", metavar="NAME", help="Name clients use for the model.")
@vllm_option("How to run vLLM, e.g. '/opt/venv/bin/vllm' or 'python -m vllm.entrypoints.openai.api_server'.")
@click.option(
    "--engine",
    type=click.Choice(["vllm", "llama.cpp"]),
    default="vllm",
    help="vLLM, or llama.cpp's llama-server (MODEL is then a GGUF file; -k is --spec-draft-n-max).",
)
@click.option(
    "--llama-server",
    default="llama-server",
    metavar="COMMAND",
    help="With --engine llama.cpp: how to run llama-server, e.g. '/opt/llama.cpp/build/bin/llama-server'.",
)
@click.option("--keep", is_flag=True, help="Leave the server running when mtpwatch exits.")
@click.option("--headless", is_flag=True, help="No UI: print phases, then a status line every few seconds.")
@startup_timeout_option("Give up if /health does not answer within S seconds.")
@click.option(
    "--status-interval",
    default=5.0,
    type=click.FloatRange(min=0.1),
    metavar="S",
    help="Headless: seconds between status lines.",
)
@click.option(
    "--log-file", type=click.Path(dir_okay=False, path_type=Path), help="Also write the server log here."
)
@record_option
def command(**params: Any) -> None:
    """Start a vLLM server for MODEL (MTP on or off), watch it, stop it on exit.

    Arguments after `--` go to `vllm serve` unchanged, e.g.
    `mtpwatch start google/gemma-4-E4B-it -k 4 --drafter ... -- --max-model-len 8192`.
    With `--engine llama.cpp`, MODEL is a GGUF and they go to llama-server, e.g.
    `mtpwatch start --engine llama.cpp model.gguf --drafter draft.gguf -k 4 -- -c 4096`.
    """
    opts = StartOptions(**params)
    argv, env = _argv_env(opts)
    if opts.record is not None and opts.headless:
        raise click.UsageError("--record records the UI session; drop --headless")
    missing = _missing_program(argv, opts.engine)
    if missing:  # before the UI, as `ab` refuses: not a TUI that says `cannot run 'vllm'` twice
        raise click.ClickException(missing)
    warning = bind_warning(opts.host, opts.api_key)
    if warning:
        click.echo(warning, err=True)
    taken = port_in_use_message(opts.host, opts.port)
    if taken:
        raise click.ClickException(taken)
    url = connect_url(opts.host, opts.port)
    if opts.headless:
        code = asyncio.run(
            run_headless(
                argv,
                url=url,
                api_key=opts.api_key,
                keep=opts.keep,
                startup_timeout=opts.startup_timeout,
                status_interval=opts.status_interval,
                log_file=opts.log_file,
                served_model_name=opts.served_model_name,
                env=env,
            )
        )
        sys.exit(code)
    _run_ui(opts, url, argv, env)


def _missing_program(argv: list[str], engine: str) -> str | None:
    """Why the server's program cannot run here (not on PATH, not executable), or None."""
    program = resolve_self(argv)[0]
    if shutil.which(program) is not None:
        return None
    how = (
        "--llama-server PATH" if engine == "llama.cpp" else "--vllm COMMAND (e.g. --vllm /opt/vllm/bin/vllm)"
    )
    what = "llama.cpp's llama-server" if engine == "llama.cpp" else "vLLM"
    return f"cannot run {program!r}: not found on PATH or not executable — install {what} here, or give {how}"


def _argv_env(opts: StartOptions) -> tuple[list[str], dict[str, str]]:
    """The server's command line and extra environment (the API key goes there, never on argv)."""
    shared = ("drafter", "k", "method", "no_spec", "host", "port", "served_model_name", "extra")
    common = {name: getattr(opts, name) for name in shared}
    with one_line(VllmArgsError, kind=click.ClickException):
        if opts.engine != "llama.cpp":
            argv = build_vllm_argv(
                opts.model, speculative_config=opts.speculative_config, vllm=opts.vllm_cmd, **common
            )
            return argv, server_env(opts.api_key)
        if opts.speculative_config is not None:
            raise VllmArgsError(
                "--speculative-config is vLLM's; for llama.cpp use --method/--drafter/-k "
                "(or llama-server's own flags after --)"
            )
        argv = build_llamacpp_argv(opts.model, server=opts.llama_server, **common)
        return argv, {**llamacpp_env(opts.llama_server), **llamacpp_key_env(opts.api_key)}


def _run_ui(opts: StartOptions, url: str, argv: list[str], env: dict[str, str]) -> None:
    """The app watching the server it starts, with a panel named for what it runs."""
    from mtpwatch.core.provenance import spec_config_from_argv
    from mtpwatch.session.views import method_name
    from mtpwatch.ui.app import run_app  # lazy: Textual loads only for the UI

    # Named for what it is told to run until the log says what vLLM ran: '--method ngram' is not
    # "MTP", and a drafter whose method vLLM detects (core.launch.specrule) is not named at all.
    configured = spec_config_from_argv(argv) if opts.engine != "llama.cpp" else None
    named = configured.get("method") if configured else None
    spec_method = None if opts.no_spec else opts.method or (named if isinstance(named, str) else None)
    if opts.engine == "llama.cpp" and not opts.no_spec and spec_method is None and (opts.drafter or opts.k):
        spec_method = "mtp"
    if opts.no_spec:
        label = "no speculation"
    elif spec_method:
        label = f"{method_name(spec_method)} on"
    elif opts.speculative_config or opts.drafter:
        label = "speculation on (method: vLLM detects)"
    else:
        label = "llama.cpp" if opts.engine == "llama.cpp" else "vLLM"
    spec = ServerSpec(
        label=label,
        url=url,
        model=opts.served_model_name,
        api_key=opts.api_key,
        launch=LaunchSpec(
            argv=tuple(argv),
            env=env,
            kind=opts.engine,
            keep=opts.keep,
            startup_timeout_s=opts.startup_timeout,
        ),
    )
    # SIGTERM/SIGHUP stop the server first; the app may call install_signal_handlers(on_signal=...)
    # again to exit cleanly, which replaces the default (SystemExit) on the same chained handler.
    install_signal_handlers()
    config = AppConfig(
        servers=[spec],
        display=DisplaySettings(spec_method=spec_method),
        title=f"mtpwatch start {opts.model}",
        record=opts.record,
    )
    sys.exit(run_app(config))
