"""`mtpwatch plot REPORT...`: terminal figures of saved `mtpwatch bench --json` reports."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import click

from mtpwatch.commands.options import one_line
from mtpwatch.core.reports import reportfile
from mtpwatch.render.charts import plots

FIGURE_HELP = "; ".join(f"{k} = {v}" for k, v in plots.FIGURES.items())


def _figure_names(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    unknown = [n for n in names if n not in plots.FIGURES]
    if unknown:
        raise click.BadParameter(
            f"unknown figure {unknown[0]!r}; choose from {', '.join(plots.FIGURES)}", param_hint="--only"
        )
    return names


@click.command("plot", epilog=f"Figures: {FIGURE_HELP}. Example: mtpwatch plot sweep.json --only length")
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--only", metavar="NAME,...", help=f"Draw only: {', '.join(plots.FIGURES)}.")
@click.option(
    "--width", type=click.IntRange(min=40), help="Columns (default: 80, or the terminal's if narrower)."
)
@click.option("--height", type=click.IntRange(min=8), default=20, help="Rows per figure.")
@click.option(
    "--table", "tables", is_flag=True, help="Print tables instead of plots (the fallback without plotext)."
)
@click.option("--color/--no-color", default=None, help="ANSI colours (default: when stdout is a terminal).")
@click.option(
    "--svg",
    "svg_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the figures to an SVG file (for a README or a slide).",
)
def command(
    reports: tuple[Path, ...],
    only: str | None,
    width: int | None,
    height: int,
    tables: bool,
    color: bool | None,
    svg_path: Path | None,
) -> None:
    """Draw speed-up vs length, per category, per run, per position and vs k from bench reports."""
    names = _figure_names(only)
    with one_line(reportfile.ReportFileError, kind=click.ClickException):
        loaded = reportfile.load_all(list(reports))
    if width is None:
        width = min(80, shutil.get_terminal_size((80, 24)).columns) if sys.stdout.isatty() else 80
    plt = None if tables else plots.load_plotext()
    if plt is None and not tables:
        click.echo("plotext cannot be imported (pip install 'plotext>=5.3,<6'): showing tables", err=True)
    use_color = sys.stdout.isatty() if color is None else color
    figs = plots.draw(loaded, only=names, width=width, height=height, color=use_color, plt=plt)
    if not figs:
        what = f" for {', '.join(names)}" if names else ""
        raise click.ClickException(f"nothing to plot{what}: the report(s) have no such data")
    blocks = [("\n".join(textwrap.wrap(fig.title, width)) or fig.title) + "\n" + fig.text for fig in figs]
    click.echo("\n\n".join(blocks), color=use_color)
    if svg_path is not None:
        if plt is not None and not use_color:  # the SVG is in colour: draw the figures again with it
            figs = plots.draw(loaded, only=names, width=width, height=height, color=True, plt=plt)
            blocks = ["\n".join(textwrap.wrap(f.title, width)) + "\n" + f.text for f in figs]
        try:
            title = "mtpwatch plot " + " ".join(r.name for r in loaded)
            plots.write_svg(svg_path, blocks, width=width, title=title)
        except OSError as exc:
            raise click.ClickException(f"cannot write {svg_path}: {exc.strerror or exc}") from None
        click.echo(f"wrote {svg_path}", err=True)
