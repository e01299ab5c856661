"""`mtpwatch replay FILE`: play a `--record` recording in the app, or print its summary (--json)."""

from __future__ import annotations

import json
import sys

import click


@click.command("replay")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the per-prompt summary as JSON; no UI.")
@click.option("--loop", is_flag=True, help="Start over at the end, until quit (a booth screen).")
@click.option(
    "--speed",
    type=click.Choice(["0.25", "0.5", "1", "2", "4", "8", "16"]),
    default="1",
    show_default=True,
    help="Playback speed (+/- change it while playing).",
)
def command(file: str, as_json: bool, loop: bool, speed: str) -> None:
    """Play FILE (written by --record) in the app: Space play/pause, ←/→ 10 s, n/p prompt, +/- speed.

    Needs no server and no network: the panels are computed from the recorded pages and streams by
    the same code that showed them live.
    """
    from mtpwatch.core.record.reader import RecordingError
    from mtpwatch.ui.replay import ReplaySource

    try:
        source = ReplaySource.open(file)
    except FileNotFoundError:
        raise click.ClickException(f"no such file: {file}") from None
    except (RecordingError, OSError, ValueError, KeyError) as exc:
        raise click.ClickException(f"cannot replay {file}: {str(exc).splitlines()[0]}") from None
    if as_json:
        click.echo(json.dumps(source.summary(), indent=2, ensure_ascii=False))
        return
    from mtpwatch.ui.app import run_app

    sys.exit(run_app(source.config, replay=source, loop=loop, speed=float(speed)))
