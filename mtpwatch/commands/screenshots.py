"""`mtpwatch screenshots [DIR]`: SVGs of the main views from fixed sample states (deterministic)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

#: (file stem, config mode, sample kind, terminal size, keys pressed after loading)
VIEWS: list[tuple[str, str, str, tuple[int, int], tuple[str, ...]]] = [
    ("monitor", "single", "single", (200, 50), ()),
    ("ab", "ab", "ab", (200, 50), ()),
    ("compact", "ab", "ab", (80, 24), ()),
    ("compact-single", "single", "single", (80, 24), ()),
    ("help", "single", "single", (120, 40), ("f1",)),
    ("start", "start", "start", (120, 32), ()),
    ("disconnected", "single", "down", (120, 32), ()),
]


async def write_screenshots(out: Path) -> list[Path]:
    """Render each view into `out/<name>.svg`; returns the paths written."""
    from textual.widgets import Input

    from mtpwatch.ui import samples
    from mtpwatch.ui.app import make_app

    written: list[Path] = []
    for name, mode, kind, size, keys in VIEWS:
        app = make_app(samples.config(mode), autostart=False)
        async with app.run_test(size=size) as pilot:
            for widget in app.screen.query(Input):
                widget.cursor_blink = False
            await pilot.pause()
            await samples.load(app, kind)
            for key in keys:
                await pilot.press(key)
            await pilot.pause(0.3)
            path = out / f"{name}.svg"
            path.write_text(app.export_screenshot(title="mtpwatch"), encoding="utf-8")
            written.append(path)
    return written


@click.command("screenshots")
@click.argument("directory", default="screenshots", type=click.Path(file_okay=False))
def command(directory: str) -> None:
    """Write SVG screenshots of the main views into DIRECTORY (default: screenshots/)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)  # save paths need the folder; done before the event loop
    for path in asyncio.run(write_screenshots(out)):
        click.echo(str(path))
