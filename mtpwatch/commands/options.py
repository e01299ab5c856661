"""Click options shared by several commands, and their checks (one clear line on error).

Each shared flag is defined here once, with one range; its default is read from the field of the
dataclass it fills (`field_default`), never typed again. Imports only click and mtpwatch.config,
so `mtpwatch --help` stays fast.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, MeasureSettings, ServerSpec

F = TypeVar("F", bound=Callable[..., Any])


def field_default(cls: type[Any], name: str) -> Any:
    """The default of the dataclass field `name` of `cls`: what the flag that fills it defaults to."""
    field = next((f for f in dataclasses.fields(cls) if f.name == name), None)
    if field is not None and field.default is not dataclasses.MISSING:
        return field.default
    if field is not None and field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    raise LookupError(f"{cls.__name__}.{name} has no default")


JSON_ALIAS_NOTE = (
    "mtpwatch: --json PATH is deprecated: use --json-file PATH (--json alone prints the JSON on stdout)"
)
"""The one line on stderr when the old spelling `--json PATH` is used."""
_JSON_STDOUT = "\0stdout"
_JSON_ALIAS = "mtpwatch.json_alias"


def _json_flag(ctx: click.Context, param: click.Parameter, value: str | None) -> bool:
    """`--json` alone: True (the JSON on stdout); `--json PATH`: the old spelling, kept for PATH."""
    if value is None or value == _JSON_STDOUT:
        return value is not None
    if "://" in value:
        raise click.BadParameter(
            f"--json takes no value now (it prints the JSON on stdout); put {value} before it, or use "
            "--json-file PATH",
            param_hint="--json",
        )
    click.echo(JSON_ALIAS_NOTE, err=True)
    ctx.meta[_JSON_ALIAS] = Path(value)
    return False


def json_options(what: str) -> Callable[[F], F]:
    """Add --json and --json-file PATH (their help says what each does); `json_file` reads which
    file, the deprecated `--json PATH` included."""

    def decorate(func: F) -> F:
        func = click.option(
            "--json-file",
            "json_path",
            type=click.Path(dir_okay=False, path_type=Path),
            metavar="PATH",
            help=f"Write {what} as JSON to PATH (the table is printed too).",
        )(func)
        return click.option(
            "--json",
            "json_out",
            is_flag=False,
            flag_value=_JSON_STDOUT,
            default=None,
            metavar="",
            callback=_json_flag,
            help=f"Print {what} as JSON on stdout instead of the table (--json PATH: deprecated, "
            "use --json-file PATH).",
        )(func)

    return decorate


def json_file(json_path: Path | None, json_out: bool, plot: bool) -> Path | None:
    """The file `--json-file PATH` (or the deprecated `--json PATH`) names; both: a usage error, as is
    `--plot` with `--json` (both print on stdout)."""
    alias = click.get_current_context().meta.get(_JSON_ALIAS)
    if alias is not None and json_path is not None:
        raise click.UsageError("give --json-file PATH once (--json PATH is its deprecated spelling)")
    if json_out and plot:
        raise click.UsageError("--plot draws on stdout, where --json prints: give --json-file PATH instead")
    return json_path if json_path is not None else alias


def shared_option(*decls: str, **shared: Any) -> Callable[..., Callable[[F], F]]:
    """One shared flag: its names, range and default said once; each command gives its own help line
    (or keeps the shared one) and may add an attribute (the `type=click.Choice(...)` of --schedule
    and --method: each command offers its own)."""

    def option(help: str | None = None, **attrs: Any) -> Callable[[F], F]:
        return click.option(*decls, **{**shared, **({} if help is None else {"help": help}), **attrs})

    return option


temperature_option = shared_option(
    "--temperature", type=click.FloatRange(0.0, 5.0), default=field_default(DisplaySettings, "temperature")
)
chat_option = shared_option(
    "--chat", is_flag=True, help="Send prompts to /v1/chat/completions (default: /v1/completions)."
)
# runs per prompt and arm, warm-up included; the default equals `BenchConfig.runs`
# (tests/commands/test_options.py)
runs_option = shared_option(
    "--runs", type=click.IntRange(2, 10_000), default=field_default(MeasureSettings, "runs")
)
warmup_option = shared_option(
    "--warmup", type=click.IntRange(0, 10_000), default=field_default(MeasureSettings, "warmup")
)
api_key_option = shared_option(
    "--api-key",
    envvar=["VLLM_API_KEY", "OPENAI_API_KEY"],
    help="Bearer token (default: $VLLM_API_KEY, else $OPENAI_API_KEY).",
)
startup_timeout_option = shared_option(
    "--startup-timeout",
    type=click.FloatRange(min=1),
    default=field_default(LaunchSpec, "startup_timeout_s"),
    metavar="S",
)
prompts_option = shared_option("--prompts", "prompts_spec", default="long", metavar="SET|FILE")
limit_option = shared_option("--limit", type=click.IntRange(1, 100_000))
schedule_option = shared_option("--schedule", default=field_default(AppConfig, "schedule"))
k_option = shared_option("-k", "--num-speculative-tokens", "k", type=click.IntRange(1, 64), metavar="N")
method_option = shared_option("--method")
drafter_option = shared_option("--drafter", metavar="MODEL")
vllm_option = shared_option("--vllm", "vllm_cmd", default="vllm", metavar="COMMAND")
model_option = shared_option("--model", default=field_default(ServerSpec, "model"), metavar="NAME")
gpu_option = shared_option("--gpu", metavar="NAME")
gpu_memory_option = shared_option("--gpu-memory", type=click.FloatRange(min=0.1), metavar="GIB")
gpu_free_option = shared_option("--gpu-free", type=click.FloatRange(min=0.0), metavar="GIB")
label_option = shared_option("--label")
metadata_option = shared_option("--metadata", multiple=True, metavar="KEY=VALUE")


def stacked(func: F, *options: Callable[[F], F]) -> F:
    """`func` under `options`, the first outermost, as if they were its decorators in that order."""
    for option in reversed(options):
        func = option(func)
    return func


def display_options(func: F) -> F:
    """Add the display options: the flags `display_settings` turns into `DisplaySettings`."""
    return stacked(
        func,
        chat_option(),
        click.option(
            "--max-tokens",
            type=click.IntRange(1, 1_000_000),
            default=field_default(DisplaySettings, "max_tokens"),
            help="max_tokens of prompts typed in the console.",
        ),
        temperature_option("Sampling temperature (0 makes MTP on/off outputs comparable)."),
        click.option(
            "--interval",
            type=click.FloatRange(0.05, 60.0),
            default=field_default(DisplaySettings, "scrape_interval_s"),
            help="Seconds between /metrics scrapes.",
        ),
        click.option(
            "--idle-interval",
            type=click.FloatRange(0.05, 60.0),
            default=field_default(DisplaySettings, "idle_interval_s"),
            help="Seconds between /metrics scrapes while the server is idle (nothing running or "
            "waiting, no token counted since the last scrape); a prompt sent from the console "
            "scrapes at once. Never shorter than --interval.",
        ),
        click.option(
            "--fps",
            type=click.IntRange(1, 60),
            default=field_default(DisplaySettings, "max_fps"),
            help="At most this many redraws a second while an answer streams; fewer cost less CPU and "
            "fewer bytes over SSH (8 still reads smoothly).",
        ),
        gpu_option(
            "GPU of a remote server for the peak-bandwidth table (and, with --start, the memory plan), "
            "e.g. GB10."
        ),
        click.option(
            "--peak-gbps",
            type=click.FloatRange(1.0, 100_000.0),
            help="Override the GPU's peak memory bandwidth (GB/s).",
        ),
        click.option(
            "--model-config",
            type=click.Path(dir_okay=False),
            help="The served model's config.json, for the analytic bandwidth model.",
        ),
        click.option(
            "--drafter-config",
            type=click.Path(dir_okay=False),
            help="The drafter's config.json (MTP assistant, EAGLE head), for the bandwidth model.",
        ),
        click.option(
            "--theme",
            metavar="NAME",
            help="Colour theme: textual-dark, textual-light, nord, gruvbox, solarized-light, ... "
            "(Ctrl+P lists them).",
        ),
        click.option(
            "--spec-method",
            metavar="NAME",
            help="The server's speculation method (mtp, ngram, eagle3, draft_model, …) when mtpwatch "
            "did not start it; unnamed methods show as 'speculative'.",
        ),
    )


DISPLAY_FIELDS = {"interval": "scrape_interval_s", "idle_interval": "idle_interval_s", "fps": "max_fps"}
"""The `DisplaySettings` field of each display option whose parameter is named otherwise."""


def display_settings(**options: Any) -> DisplaySettings:
    """Check the display options (raising click.UsageError with one line) and build the settings;
    an option left out keeps the field's default."""
    given = DisplaySettings(**{DISPLAY_FIELDS.get(name, name): value for name, value in options.items()})
    if given.gpu is not None:
        # lazy: `mtpwatch --help` imports only click and mtpwatch.config
        from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu

        with one_line(UnknownGpuError, prefix="--gpu: "):
            lookup_gpu(given.gpu)
    if given.theme is not None:
        from textual.theme import BUILTIN_THEMES  # lazy: only when a theme is asked for

        if given.theme not in BUILTIN_THEMES:
            raise click.UsageError(
                f"--theme: unknown theme {given.theme!r}; themes: {', '.join(sorted(BUILTIN_THEMES))}"
            )
    for flag, path in (("--model-config", given.model_config), ("--drafter-config", given.drafter_config)):
        if path is not None and not os.path.isfile(path):
            raise click.UsageError(f"{flag}: no such file: {path}")
    return dataclasses.replace(
        given,
        idle_interval_s=max(given.scrape_interval_s, given.idle_interval_s),
        spec_method=given.spec_method.strip().lower() if given.spec_method else None,
    )


@contextlib.contextmanager
def one_line(
    *errors: type[Exception],
    kind: type[click.ClickException] = click.UsageError,
    option: str | None = None,
    prefix: str = "",
) -> Iterator[None]:
    """`errors` raised inside become click's one-line error: `kind` (a usage mistake unless said
    otherwise) with `prefix` before the message, or a BadParameter naming `option`."""
    try:
        yield
    except errors as exc:
        if option is not None:
            raise click.BadParameter(str(exc), param_hint=option) from None
        raise kind(prefix + str(exc)) from None


def checked_url(url: str, param: str = "URL") -> str:
    """Normalise a server URL or fail with one clear line before the TUI starts."""
    # lazy: `mtpwatch --help` imports only click and mtpwatch.config
    from mtpwatch.core.http.urls import normalize_url

    with one_line(ValueError, prefix=f"{param}: "):
        return normalize_url(url)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _check_save_path(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    check_writable(Path(value) if value is not None else None, "--save")
    return value


def _checked_record(ctx: click.Context, param: click.Parameter, path: str | None) -> str | None:
    """One clear line when the recording cannot be created (before the TUI starts); a folder is
    refused by the type (`dir_okay=False`)."""
    if path is None:
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise click.UsageError(f"--record: no such folder: {folder}")
    if not os.access(folder, os.W_OK):
        raise click.UsageError(f"--record: cannot write in {folder}")
    return path


record_option = click.option(
    "--record",
    type=click.Path(dir_okay=False, writable=True),
    callback=_checked_record,
    metavar="FILE",
    help="Record scrapes, prompts, answers and stream events to FILE (gzip; "
    "`mtpwatch replay FILE` plays it back, no server needed).",
)


def measure_options(func: F) -> F:
    """Add --runs, --warmup and --save (the F6 measurement of the A/B view)."""
    return stacked(
        func,
        runs_option("F6 measurement: runs per prompt and arm, warm-up included."),
        warmup_option("F6 measurement: first runs per prompt dropped as warm-up."),
        click.option(
            "--save",
            "save_path",
            type=click.Path(dir_okay=False),
            callback=_check_save_path,
            help="Save the last F6 measurement here (bench report JSON) on Ctrl+S and when the app exits.",
        ),
    )


def check_runs(runs: int, warmup: int) -> None:
    """One clear line when the warm-up leaves nothing to measure."""
    if runs <= warmup:
        raise click.UsageError(
            f"--runs ({runs}) must be larger than --warmup ({warmup}): nothing would be measured"
        )


def int_list(value: str | None, option: str) -> tuple[int, ...]:
    """Comma-separated integers (`--lengths 8,16`, `--sweep-k 0,1,2`); () when empty."""
    try:
        return tuple(int(part) for part in (value or "").replace(" ", "").split(",") if part)
    except ValueError:
        raise click.BadParameter(
            f"expected comma-separated integers, got {value!r}", param_hint=option
        ) from None


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
