"""`mtpwatch compare A.json B.json ...`: several bench reports side by side, the same prompts matched."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mtpwatch.commands.options import json_file, json_options, one_line
from mtpwatch.core.jsonout import dumps
from mtpwatch.core.provenance import with_meta
from mtpwatch.core.reports import compare as cmp
from mtpwatch.core.reports import reportfile
from mtpwatch.render.compare_table import format_comparison


@click.command(
    "compare", epilog="The first report is the reference. Example: mtpwatch compare k2.json k4.json k8.json"
)
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@json_options("the comparison")
@click.option("--plot", is_flag=True, help="Also draw the speed-ups (plotext, else a table).")
def command(reports: tuple[Path, ...], json_out: bool, json_path: Path | None, plot: bool) -> None:
    """Compare bench reports: matched prompts, speed-up differences with CIs, provenance warnings."""
    json_path = json_file(json_path, json_out, plot)
    with one_line(reportfile.ReportFileError, cmp.CompareError, kind=click.ClickException):
        loaded = reportfile.load_all(list(reports))
        comparison = cmp.compare(loaded)
    doc = with_meta(cmp.to_json(comparison), metadata={"reports": ", ".join(map(str, reports))})
    if json_out:
        click.echo(dumps(doc, indent=2, ensure_ascii=False))
    else:
        click.echo(format_comparison(comparison))
    if plot:
        from mtpwatch.render.charts import plots

        plt = plots.load_plotext()
        fig = plots.comparison_figure(comparison, plt, 80, 16, sys.stdout.isatty())
        click.echo("\n" + fig.title + "\n" + fig.text)
    if json_path is not None:
        try:
            json_path.write_text(dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")
        except OSError as exc:
            raise click.ClickException(f"cannot write {json_path}: {exc.strerror or exc}") from None
        click.echo(f"wrote {json_path}", err=True)
