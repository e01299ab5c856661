"""Click options shared by `attach`, `ab`, `demo` and `bench`, and their checks (one clear line on error).

Imports only click and mtpwatch.config, so `mtpwatch --help` stays fast.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from mtpwatch.config import DisplaySettings

F = TypeVar("F", bound=Callable[..., Any])


def temperature_option(help: str) -> Callable[[F], F]:
    """--temperature (0 to 5, default 0), with the command's own help line."""
    return click.option(
        "--temperature", type=click.FloatRange(0.0, 5.0), default=0.0, show_default=True, help=help
    )


def runs_option(help: str) -> Callable[[F], F]:
    """--runs: runs per prompt and arm, warm-up included (2 to 10,000, default 12)."""
    return click.option("--runs", type=click.IntRange(2, 10_000), default=12, show_default=True, help=help)


def warmup_option(help: str) -> Callable[[F], F]:
    """--warmup: first runs per prompt dropped (0 to 10,000, default 1)."""
    return click.option("--warmup", type=click.IntRange(0, 10_000), default=1, show_default=True, help=help)


def display_options(func: F) -> F:
    """Add the display options: --chat, --max-tokens, --temperature, --interval, --fps, --gpu, --peak-gbps,
    --model-config, --drafter-config, --theme."""
    options = [
        click.option(
            "--chat", is_flag=True, help="Send prompts to /v1/chat/completions (default: /v1/completions)."
        ),
        click.option(
            "--max-tokens",
            type=click.IntRange(1, 1_000_000),
            default=256,
            show_default=True,
            help="max_tokens of prompts typed in the console.",
        ),
        temperature_option("Sampling temperature (0 makes MTP on/off outputs comparable)."),
        click.option(
            "--interval",
            type=click.FloatRange(0.05, 60.0),
            default=0.25,
            show_default=True,
            help="Seconds between /metrics scrapes.",
        ),
        click.option(
            "--fps",
            type=click.IntRange(1, 60),
            default=25,
            show_default=True,
            help="At most this many redraws a second while an answer streams; fewer cost less CPU and "
            "fewer bytes over SSH (8 still reads smoothly).",
        ),
        click.option(
            "--gpu",
            default=None,
            help="GPU of a remote server for the peak-bandwidth table (and, with --start, the memory plan), "
            "e.g. GB10.",
        ),
        click.option(
            "--peak-gbps",
            type=click.FloatRange(1.0, 100_000.0),
            default=None,
            help="Override the GPU's peak memory bandwidth (GB/s).",
        ),
        click.option(
            "--model-config",
            type=click.Path(dir_okay=False),
            default=None,
            help="The served model's config.json, for the analytic bandwidth model.",
        ),
        click.option(
            "--drafter-config",
            type=click.Path(dir_okay=False),
            default=None,
            help="The drafter's config.json (MTP assistant, EAGLE head), for the bandwidth model.",
        ),
        click.option(
            "--theme",
            default=None,
            metavar="NAME",
            help="Colour theme: textual-dark, textual-light, nord, gruvbox, solarized-light, ... "
            "(Ctrl+P lists them).",
        ),
        click.option(
            "--spec-method",
            default=None,
            metavar="NAME",
            help="The server's speculation method (mtp, ngram, eagle3, draft_model, …) when mtpwatch "
            "did not start it; unnamed methods show as 'speculative'.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def display_settings(
    *,
    chat: bool,
    max_tokens: int,
    temperature: float,
    interval: float,
    gpu: str | None,
    fps: int = 25,
    peak_gbps: float | None,
    model_config: str | None,
    drafter_config: str | None = None,
    theme: str | None = None,
    spec_method: str | None = None,
) -> DisplaySettings:
    """Check the display options (raising click.UsageError with one line) and build the settings."""
    if gpu is not None:
        # lazy: `mtpwatch --help` imports only click and mtpwatch.config
        from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu

        try:
            lookup_gpu(gpu)
        except UnknownGpuError as exc:
            raise click.UsageError(f"--gpu: {exc}") from None
    if theme is not None:
        from textual.theme import BUILTIN_THEMES  # lazy: only when a theme is asked for

        if theme not in BUILTIN_THEMES:
            raise click.UsageError(
                f"--theme: unknown theme {theme!r}; themes: {', '.join(sorted(BUILTIN_THEMES))}"
            )
    for flag, path in (("--model-config", model_config), ("--drafter-config", drafter_config)):
        if path is not None and not os.path.isfile(path):
            raise click.UsageError(f"{flag}: no such file: {path}")
    return DisplaySettings(
        scrape_interval_s=interval,
        max_fps=fps,
        chat=chat,
        max_tokens=max_tokens,
        temperature=temperature,
        gpu=gpu,
        peak_gbps=peak_gbps,
        model_config=model_config,
        drafter_config=drafter_config,
        theme=theme,
        spec_method=spec_method.strip().lower() if spec_method else None,
    )


def checked_url(url: str, param: str = "URL") -> str:
    """Normalise a server URL or fail with one clear line before the TUI starts."""
    # lazy: `mtpwatch --help` imports only click and mtpwatch.config
    from mtpwatch.core.http.urls import normalize_url

    try:
        return normalize_url(url)
    except ValueError as exc:
        raise click.UsageError(f"{param}: {exc}") from None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _check_save_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not os.path.isdir(os.path.dirname(os.path.abspath(value))):
        raise click.BadParameter(f"folder {os.path.dirname(os.path.abspath(value))} does not exist")
    return value


def record_option(func: F) -> F:
    """Add --record FILE (everything the app sees, for `mtpwatch replay`)."""
    option = click.option(
        "--record",
        "record",
        type=click.Path(dir_okay=False, writable=True),
        default=None,
        metavar="FILE",
        help="Record scrapes, prompts, answers and stream events to FILE (gzip; "
        "`mtpwatch replay FILE` plays it back, no server needed).",
    )
    return option(func)


def checked_record(path: str | None) -> str | None:
    """One clear line when the recording cannot be created (before the TUI starts)."""
    if path is None:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise click.UsageError(f"--record: no such folder: {folder}")
    if os.path.isdir(path):
        raise click.UsageError(f"--record: {path} is a folder")
    if not os.access(folder, os.W_OK):
        raise click.UsageError(f"--record: cannot write in {folder}")
    return path


def measure_options(func: F) -> F:
    """Add --runs, --warmup and --save (the F6 measurement of the A/B view)."""
    options = [
        runs_option("F6 measurement: runs per prompt and arm, warm-up included."),
        warmup_option("F6 measurement: first runs per prompt dropped as warm-up."),
        click.option(
            "--save",
            "save_path",
            type=click.Path(dir_okay=False),
            default=None,
            callback=_check_save_path,
            help="Save the last F6 measurement here (bench report JSON) on Ctrl+S and when the app exits.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def check_runs(runs: int, warmup: int) -> None:
    """One clear line when the warm-up leaves nothing to measure."""
    if runs <= warmup:
        raise click.UsageError(
            f"--runs ({runs}) must be larger than --warmup ({warmup}): nothing would be measured"
        )


def int_list(value: str | None, option: str) -> tuple[int, ...]:
    """Comma-separated integers (`--lengths 8,16`, `--sweep-k 0,1,2`); () when empty."""
    if value is None or not value.strip():
        return ()
    out: list[int] = []
    for part in value.replace(" ", "").split(","):
        if not part:
            continue
        try:
            out.append(int(part))
        except ValueError:
            raise click.BadParameter(
                f"expected comma-separated integers, got {value!r}", param_hint=option
            ) from None
    return tuple(out)


def check_writable(path: Path | None, option: str) -> None:
    """Fail before an hour of benchmarking, not after it, when an output file cannot be written."""
    if path is None:
        return
    if path.is_dir():
        raise click.BadParameter(f"{path} is a directory", param_hint=option)
    parent = path.parent
    if not parent.is_dir():
        raise click.BadParameter(f"folder {parent} does not exist", param_hint=option)
    existed = path.exists()
    try:
        # Really open it (permission bits say little to root, or on /proc): append mode keeps an
        # existing file intact; a probe file we created is removed again.
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise click.BadParameter(f"cannot write {path}: {exc.strerror or exc}", param_hint=option) from None
    if not existed:
        path.unlink(missing_ok=True)
