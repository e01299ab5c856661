"""The `mtpwatch` command line: a click group whose subcommands load lazily.

Each subcommand lives in `mtpwatch/commands/<name>.py` and exports a click command called
`command`. Loading lazily keeps `mtpwatch --help` and the first frame of the app fast: nothing
heavy (Textual, aiohttp, prometheus_client) is imported before it is needed.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
from typing import Any

import click

from mtpwatch import __version__, userconfig
from mtpwatch.commands.options import one_line

#: subcommand name (its module: the docstring above) -> one-line help shown by `mtpwatch --help`
COMMANDS: dict[str, str] = {
    "demo": "Two simulated servers (MTP on/off), watched side by side. No GPU.",
    "attach": "Watch a running vLLM server and send it prompts.",
    "start": "Start a vLLM server (MTP on or off), watch it, stop it on exit.",
    "ab": "Side-by-side A/B of two servers (MTP on vs off), one prompt console.",
    "bench": "Headless paired A/B benchmark: speed-up with CI, lossless check.",
    "plot": "Plot saved bench reports in the terminal (speed-up vs length, k).",
    "compare": "Compare several bench reports side by side, prompts matched.",
    "snapshot": "Print spec-decoding numbers once (URL or saved page).",
    "roofline": "Bandwidth ceiling for a model config on a GPU, no server.",
    "sim": "Run the vLLM simulator: a real HTTP server on 127.0.0.1.",
    "replay": "Play a --record recording in the app (or --json), no server.",
    "screenshots": "Write SVG screenshots of the main views.",
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand runs.

    Its context carries the user's defaults (config file and `MTPWATCH_*` variables) as click's
    `default_map`, so every subcommand's options and URL arguments pick them up.
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        if "default_map" not in extra:
            with one_line(userconfig.UserConfigError, kind=click.ClickException):
                config = userconfig.load_user_config()
                extra["default_map"] = userconfig.default_map(config, os.environ, COMMANDS)
        return super().make_context(info_name, args, parent, **extra)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        command: click.Command = importlib.import_module(f"mtpwatch.commands.{cmd_name}").command
        own = (ctx.default_map or {}).get(cmd_name)
        if own and ctx.default_map is not None:
            names: dict[str, str] = {}
            for param in command.params:  # a key may be the parameter's name or its --long-flag
                if param.name is not None:
                    flags = [opt[2:].replace("-", "_") for opt in param.opts if opt.startswith("--")]
                    names.update(dict.fromkeys([param.name, *flags], param.name))
            with one_line(userconfig.UserConfigError, kind=click.ClickException):
                ctx.default_map[cmd_name] = userconfig.resolve_section(cmd_name, own, names)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl(list(COMMANDS.items()))


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """`mtpwatch --version`: the version, then whether the fast paint is on and why
    (`ui/fastpaint/gate.Gate.words`)."""
    if not value or ctx.resilient_parsing:
        return
    from mtpwatch.ui.fastpaint.gate import gate

    click.echo(f"mtpwatch, version {__version__}\n{gate().words()}")
    ctx.exit()


@click.group(
    cls=LazyGroup,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "auto_envvar_prefix": "MTPWATCH",
        "show_default": True,
    },
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version, and whether the fast paint is on, and exit.",
)
def cli() -> None:
    """Watch vLLM speculative decoding (Gemma 4 MTP, EAGLE, ngram) live, next to a prompt console."""


def main(argv: list[str] | None = None) -> Any:
    """Run the CLI. Usage errors print one line and exit with status 2 (click's convention).

    Output that cannot be written (a full disk under ``> out.json``) is one `Error:` line too.
    """
    try:
        try:
            return cli.main(args=argv, prog_name="mtpwatch", standalone_mode=True)
        finally:
            sys.stdout.flush()  # a write error surfaces here, not as a traceback at interpreter exit
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            raise
        # Drop what is still buffered: stdout cannot take it, and the exit must not try again.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        click.echo(f"Error: cannot write the output: {exc.strerror or exc}", err=True)
        sys.exit(1)
