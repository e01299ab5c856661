"""`mtpwatch replay FILE`: play a `--record` recording in the app, or print its summary (--json)."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import click


def _with_meta(file: str, summary: dict[str, Any]) -> dict[str, Any]:
    """The summary, starting with a `meta` block: the recording, and each server as it was recorded."""
    from mtpwatch.core.provenance import ArmInfo, GpuInfo, with_meta

    arms: dict[str, ArmInfo] = {}
    for name, server in zip(("a", "b"), summary.get("servers") or [], strict=False):
        k = server.get("k")
        arms[name] = ArmInfo(
            url=str(server.get("url") or ""),
            served_name=server.get("model"),
            model=server.get("model"),
            method=server.get("method"),
            k=k if isinstance(k, int) else None,
            speculative=server.get("speculative"),
            vllm_version=server.get("version"),
        )
    gpus = [s.get("gpu") for s in summary.get("servers") or [] if s.get("gpu")]
    gpu = GpuInfo(str(gpus[0]), None, "the recording") if gpus else None
    return with_meta(summary, metadata={"recording": file}, arms=arms, gpu=gpu)


@click.command("replay")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the per-prompt summary as JSON; no UI.")
@click.option("--loop", is_flag=True, help="Start over at the end, until quit (a booth screen).")
@click.option(
    "--speed",
    type=click.Choice(["0.25", "0.5", "1", "2", "4", "8", "16"]),
    default="1",
    help="Playback speed (+/- change it while playing).",
)
def command(file: str, as_json: bool, loop: bool, speed: str) -> None:
    """Play FILE (written by --record) in the app: Space play/pause, ←/→ 10 s, n/p prompt, +/- speed.

    Needs no server and no network: the panels are computed from the recorded pages and streams by
    the same code that showed them live.
    """
    from mtpwatch.core.record.reader import RecordingError
    from mtpwatch.session.replay import ReplaySource

    try:
        source = ReplaySource.open(file)
    except FileNotFoundError:
        raise click.ClickException(f"no such file: {file}") from None
    except (RecordingError, OSError, ValueError, KeyError) as exc:
        raise click.ClickException(f"cannot replay {file}: {str(exc).splitlines()[0]}") from None
    if as_json:
        click.echo(json.dumps(_with_meta(file, source.summary()), indent=2, ensure_ascii=False))
        return
    from mtpwatch.ui.app import run_app

    sys.exit(run_app(dataclasses.replace(source.config, loop=loop, speed=float(speed)), replay=source))
