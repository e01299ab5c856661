"""`mtpwatch start`: launch a vLLM server (MTP on or off), watch it, stop it on exit.

`--engine llama.cpp` launches llama.cpp's `llama-server` on a GGUF instead, with `--metrics` and the
same short speculation flags (`core.launch.llamacpp_cmd`), through the same process ownership.

With ``--headless`` it runs without the terminal UI: it prints the start-up phases and facts from
the server's log, waits for /health, prints where to attach and then a one-line status every few
seconds, and stops the server's whole process group on Ctrl-C, SIGTERM or SIGHUP (or leaves it
running with ``--keep``). Without it, the app starts the server itself (`LaunchSpec`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import click

from mtpwatch.commands.options import (
    api_key_option,
    checked_record,
    drafter_option,
    k_option,
    method_option,
    record_option,
    startup_timeout_option,
    vllm_option,
)
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, ServerSpec
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import ServerError
from mtpwatch.core.launch.launcher import Launch, resolve_self
from mtpwatch.core.launch.llamacpp_cmd import (
    LLAMACPP_SPEC_TYPES,
    build_llamacpp_argv,
    llamacpp_env,
    llamacpp_key_env,
)
from mtpwatch.core.launch.logparse import LogEvent
from mtpwatch.core.launch.ports import port_in_use_message
from mtpwatch.core.launch.process import ServerProcess, StartupError, describe_exit, install_signal_handlers
from mtpwatch.core.launch.vllm_cmd import METHODS, VllmArgsError, bind_warning, build_vllm_argv, server_env
from mtpwatch.core.metrics.rates import delta_rates
from mtpwatch.core.metrics.snapshot import MetricsSnapshot


def connect_url(host: str, port: int) -> str:
    """The URL a client on this machine uses: a wildcard bind is reached through loopback."""
    if host in ("0.0.0.0", "::", "[::]", ""):
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def default_log_path(port: int) -> Path:
    base = Path(os.environ.get("MTPWATCH_CACHE_DIR", Path.home() / ".cache" / "mtpwatch"))
    return base / "logs" / f"vllm-{port}-{time.strftime('%Y%m%d-%H%M%S')}.log"


class _Printer:
    """Headless output: one line per event, prefixed with seconds since start."""

    def __init__(self, t0: float, out: IO[str]) -> None:
        self.t0 = t0
        self.out = out

    def __call__(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {text}", file=self.out, flush=True)


class _StatusState:
    def __init__(self) -> None:
        self.snap: MetricsSnapshot | None = None
        self.t = 0.0


async def _status_line(client: VllmClient, model: str | None, state: _StatusState) -> str | None:
    """Scrape once and describe the window since the previous scrape (None: nothing to say)."""
    try:
        snap = await client.scrape(model)
    except (ServerError, ValueError) as exc:
        return f"status: {exc}"
    now = time.monotonic()
    prev, prev_t = state.snap, state.t
    state.snap, state.t = snap, now
    if prev is None:
        return None
    rates = delta_rates(prev, snap, now - prev_t, "status")
    parts = [f"{rates.server_tok_s or 0.0:6.1f} tok/s", f"running {snap.requests_running or 0:.0f}"]
    if snap.speculative:
        if rates.acceptance_rate is not None:
            parts.append(f"acceptance {rates.acceptance_rate:6.1%}")
            parts.append(f"mean length {rates.mean_acceptance_length or 0:.2f}")
        else:
            parts.append("acceptance -")
        total = snap.accepted / snap.draft_tokens if snap.draft_tokens else None
        parts.append(f"since start {total:.1%}" if total is not None else "since start -")
    else:
        parts.append("no speculative decoding")
    return "status: " + " | ".join(parts)


async def run_headless(
    argv: list[str],
    *,
    url: str,
    api_key: str | None,
    keep: bool,
    startup_timeout: float,
    status_interval: float,
    log_file: Path | None,
    served_model_name: str | None,
    out: IO[str] = sys.stdout,
    env: Mapping[str, str] | None = None,
) -> int:
    """Start the server, report phases, wait for health, print status until told to stop."""
    t0 = time.monotonic()
    say = _Printer(t0, out)
    say("starting: " + shlex.join(argv))
    server_log = default_log_path(int(url.rsplit(":", 1)[1])) if keep else None
    log_fh = open(log_file, "a", encoding="utf-8") if log_file else None  # noqa: SIM115, ASYNC230

    def on_line(line: str) -> None:
        if log_fh is not None:
            log_fh.write(line + "\n")
            log_fh.flush()

    def on_event(event: LogEvent) -> None:
        # Hints are printed with the failure report, next to the log lines they explain.
        if event.kind in ("phase", "fact", "spec"):
            say(event.text if event.kind != "phase" else f"phase: {event.text}")

    launch = Launch(argv, env=env, keep=keep, log_path=server_log, on_line=on_line, on_event=on_event)
    try:
        proc = await launch.start()
    except StartupError as exc:
        say(f"error: {exc}")
        if log_fh is not None:
            log_fh.close()
        return 1
    say(f"process group {proc.pgid}" + (f", log {server_log}" if server_log else ""))

    loop = asyncio.get_running_loop()
    stop_event, received = _stop_on_signals(loop)
    code = 0
    try:
        try:
            elapsed = await _until_ready(launch, url, startup_timeout, stop_event)
        except StartupError as exc:
            _report_failure(say, out, proc, launch, f"error: {exc}", heading="last log lines:")
            if exc.returncode is None:  # timed out while still running: do not leave it behind
                await proc.stop()
            return 1
        if elapsed is None:
            say(f"stopping before the server was ready ({signal.Signals(received[0]).name})")
            return await _finish(proc, keep, url, say, code=0)
        say(f"ready in {elapsed:.0f} s: {url}")
        say(f"attach from another terminal: mtpwatch attach {url}")

        client = VllmClient(url, api_key=api_key)
        try:
            if not await _status_until_stopped(
                client, served_model_name, proc, stop_event, status_interval, say
            ):
                _report_failure(say, out, proc, launch, f"error: the server {describe_exit(proc.returncode)}")
                return 1
        finally:
            await client.aclose()
        say(f"received {signal.Signals(received[0]).name}" if received else "stopping")
        return await _finish(proc, keep, url, say, code=code)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(signum)
        if not keep or proc.returncode is not None:
            await launch.close_log()
        if log_fh is not None:
            log_fh.close()


async def _until_ready(launch: Launch, url: str, timeout: float, stop_event: asyncio.Event) -> float | None:
    """Seconds until /health answered; None when told to stop first. Raises `StartupError`."""
    health = asyncio.create_task(launch.wait_ready(url, timeout))
    stopper = asyncio.create_task(stop_event.wait())
    await asyncio.wait({health, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if not health.done():
        health.cancel()
        with contextlib.suppress(asyncio.CancelledError, StartupError):
            await health
        return None
    return health.result()


def _stop_on_signals(loop: asyncio.AbstractEventLoop) -> tuple[asyncio.Event, list[int]]:
    """An event set by SIGINT, SIGTERM or SIGHUP (not those ignored, as under nohup), and the
    signals received."""
    stop_event = asyncio.Event()
    received: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue  # nohup: stay alive when the terminal goes

        def on_signal(signum: int = signum) -> None:
            received.append(signum)
            stop_event.set()

        loop.add_signal_handler(signum, on_signal)
    return stop_event, received


def _report_failure(
    say: _Printer, out: IO[str], proc: ServerProcess, launch: Launch, line: str, heading: str | None = None
) -> None:
    """The error line, the server's last 25 log lines and the hints that explain them."""
    say(line)
    tail = proc.tail(25)
    if tail and heading:
        say(heading)
    for tail_line in tail:
        print(f"    {tail_line}", file=out)
    for hint in launch.watcher.hints:
        say(f"hint: {hint}")


async def _status_until_stopped(
    client: VllmClient, served_model_name: str | None, proc: ServerProcess, stop_event: asyncio.Event,
    status_interval: float, say: _Printer,
) -> bool:  # fmt: skip
    """A status line every `status_interval` seconds until told to stop (True) or the server exits (False)."""
    state = _StatusState()
    exited = asyncio.ensure_future(proc.wait())
    try:
        while not stop_event.is_set():
            status = await _status_line(client, served_model_name, state)
            if status:
                say(status)
            waiter = asyncio.ensure_future(stop_event.wait())
            await asyncio.wait({waiter, exited}, timeout=status_interval, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if exited.done():
                return False
        return True
    finally:
        exited.cancel()


async def _finish(proc: ServerProcess, keep: bool, url: str, say: _Printer, *, code: int) -> int:
    if keep and proc.returncode is None:
        proc.detach()
        say(f"left running (--keep): process group {proc.pgid}, log {proc.log_path}")
        say(f"attach: mtpwatch attach {url}")
        say(f"stop:   kill -TERM -- -{proc.pgid}")
        return code
    status = await proc.stop(timeout=10)
    say(f"server stopped (exit status {status})")
    return code


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("model")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
@drafter_option("Drafter model (MTP assistant, EAGLE-3, draft model).")
@k_option("Number of speculative tokens per step.")
@method_option(
    [*METHODS, *LLAMACPP_SPEC_TYPES],
    "Speculation method (default mtp when -k/--drafter; llama.cpp: draft-simple with --drafter, "
    "and its own --spec-type names).",
)
@click.option("--speculative-config", metavar="JSON", help="vLLM's --speculative-config, as JSON.")
@click.option("--no-spec", is_flag=True, help="Serve without speculative decoding (the baseline).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address vLLM listens on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
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
    show_default=True,
    help="vLLM, or llama.cpp's llama-server (MODEL is then a GGUF file; -k is --spec-draft-n-max).",
)
@click.option(
    "--llama-server",
    "llama_server",
    default="llama-server",
    show_default=True,
    metavar="COMMAND",
    help="With --engine llama.cpp: how to run llama-server, e.g. '/opt/llama.cpp/build/bin/llama-server'.",
)
@click.option("--keep", is_flag=True, help="Leave the server running when mtpwatch exits.")
@click.option("--headless", is_flag=True, help="No UI: print phases, then a status line every few seconds.")
@startup_timeout_option("Give up if /health does not answer within S seconds.")
@click.option(
    "--status-interval",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0.1),
    metavar="S",
    help="Headless: seconds between status lines.",
)
@click.option(
    "--log-file", type=click.Path(dir_okay=False, path_type=Path), help="Also write the server log here."
)
@record_option
def command(
    model: str,
    extra: tuple[str, ...],
    drafter: str | None,
    k: int | None,
    method: str | None,
    speculative_config: str | None,
    no_spec: bool,
    host: str,
    port: int,
    api_key: str | None,
    served_model_name: str | None,
    vllm_cmd: str,
    engine: str,
    llama_server: str,
    keep: bool,
    headless: bool,
    startup_timeout: float,
    status_interval: float,
    log_file: Path | None,
    record: str | None,
) -> None:
    """Start a vLLM server for MODEL (MTP on or off), watch it, stop it on exit.

    Arguments after `--` go to `vllm serve` unchanged, e.g.
    `mtpwatch start google/gemma-4-E4B-it -k 4 --drafter ... -- --max-model-len 8192`.
    With `--engine llama.cpp`, MODEL is a GGUF and they go to llama-server, e.g.
    `mtpwatch start --engine llama.cpp model.gguf --drafter draft.gguf -k 4 -- -c 4096`.
    """
    argv, env = _argv_env(
        engine, model, drafter, k, method, speculative_config, no_spec, host, port, vllm_cmd, llama_server,
        served_model_name, extra, api_key,
    )  # fmt: skip
    if record is not None and headless:
        raise click.UsageError("--record records the UI session; drop --headless")
    missing = _missing_program(argv, engine)
    if missing:  # before the UI, as `ab` refuses: not a TUI that says `cannot run 'vllm'` twice
        raise click.ClickException(missing)
    record = checked_record(record)
    warning = bind_warning(host, api_key)
    if warning:
        click.echo(warning, err=True)
    taken = port_in_use_message(host, port)
    if taken:
        raise click.ClickException(taken)
    url = connect_url(host, port)
    if headless:
        code = asyncio.run(
            run_headless(
                argv,
                url=url,
                api_key=api_key,
                keep=keep,
                startup_timeout=startup_timeout,
                status_interval=status_interval,
                log_file=log_file,
                served_model_name=served_model_name,
                env=env,
            )
        )
        sys.exit(code)

    _run_ui(
        model, url, argv, env, engine, no_spec, method, drafter, k, speculative_config, served_model_name,
        api_key, keep, startup_timeout, record,
    )  # fmt: skip


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


def _argv_env(
    engine: str, model: str, drafter: str | None, k: int | None, method: str | None,
    speculative_config: str | None, no_spec: bool, host: str, port: int, vllm_cmd: str, llama_server: str,
    served_model_name: str | None, extra: tuple[str, ...], api_key: str | None,
) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """The server's command line and extra environment (the API key goes there, never on argv)."""
    try:
        if engine == "llama.cpp":
            if speculative_config is not None:
                raise VllmArgsError(
                    "--speculative-config is vLLM's; for llama.cpp use --method/--drafter/-k "
                    "(or llama-server's own flags after --)"
                )
            argv = build_llamacpp_argv(
                model,
                drafter=drafter,
                k=k,
                method=method,
                no_spec=no_spec,
                host=host,
                port=port,
                server=llama_server,
                served_model_name=served_model_name,
                extra=extra,
            )
            return argv, {**llamacpp_env(llama_server), **llamacpp_key_env(api_key)}
        else:
            argv = build_vllm_argv(
                model,
                drafter=drafter,
                k=k,
                method=method,
                speculative_config=speculative_config,
                no_spec=no_spec,
                host=host,
                port=port,
                vllm=vllm_cmd,
                served_model_name=served_model_name,
                extra=extra,
            )
            return argv, server_env(api_key)
    except VllmArgsError as exc:
        raise click.ClickException(str(exc)) from None


def _run_ui(
    model: str, url: str, argv: list[str], env: dict[str, str], engine: str, no_spec: bool,
    method: str | None, drafter: str | None, k: int | None, speculative_config: str | None,
    served_model_name: str | None,
    api_key: str | None, keep: bool, startup_timeout: float, record: str | None,
) -> None:  # fmt: skip
    """The app watching the server it starts, with a panel named for what it runs."""
    from mtpwatch.core.provenance import spec_config_from_argv
    from mtpwatch.session.views import method_name
    from mtpwatch.ui.app import run_app  # lazy: Textual loads only for the UI

    # Named for what it is told to run until the log says what vLLM ran: '--method ngram' is not
    # "MTP", and a drafter whose method vLLM detects (core.launch.specrule) is not named at all.
    configured = spec_config_from_argv(argv) if engine != "llama.cpp" else None
    named = configured.get("method") if configured else None
    spec_method = None if no_spec else method or (named if isinstance(named, str) else None)
    if engine == "llama.cpp" and not no_spec and spec_method is None and (drafter or k):
        spec_method = "mtp"
    if no_spec:
        label = "no speculation"
    elif spec_method:
        label = f"{method_name(spec_method)} on"
    else:
        label = (
            "speculation on (method: vLLM detects)"
            if speculative_config or drafter
            else ("llama.cpp" if engine == "llama.cpp" else "vLLM")
        )
    spec = ServerSpec(
        label=label,
        url=url,
        model=served_model_name,
        api_key=api_key,
        launch=LaunchSpec(
            argv=tuple(argv),
            env=env,
            kind="llama.cpp" if engine == "llama.cpp" else "vllm",
            keep=keep,
            startup_timeout_s=startup_timeout,
        ),
    )
    # SIGTERM/SIGHUP stop the server first; the app may call install_signal_handlers(on_signal=...)
    # again to exit cleanly, which replaces the default (SystemExit) on the same chained handler.
    install_signal_handlers()
    config = AppConfig(
        servers=[spec],
        display=DisplaySettings(spec_method=spec_method),
        title=f"mtpwatch start {model}",
        record=record,
    )
    sys.exit(run_app(config))
