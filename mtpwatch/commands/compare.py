"""`mtpwatch compare A.json B.json ...`: several bench reports side by side, the same prompts matched."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import click

from mtpwatch.core.ab import compare as cmp
from mtpwatch.core.ab import reportfile
from mtpwatch.core.jsonout import dumps
from mtpwatch.core.provenance import with_meta

WIDTH = 80


def _f(x: float | None, fmt: str = "{:.1f}") -> str:
    return "—" if x is None else fmt.format(x)


def format_comparison(c: cmp.Comparison) -> str:
    """The stdout table (fits 80 columns with report names up to 16 characters)."""
    lines: list[str] = []
    n = len(c.matched)
    points = sorted({(conc, length) for _, conc, length in c.matched}, key=lambda p: (p[0], p[1] or 0))
    where = ", ".join(f"c{conc}" + (f" L{length}" if length is not None else "") for conc, length in points)
    head = (
        f"mtpwatch compare · {len(c.rows)} reports · {n} measurement(s) in common "
        f"(same prompt, concurrency, length: {where}). "
        "speed-up = median of per-pair B/A over the matched measurements, 95% CI (order statistics); "
        f"Δ = minus {c.rows[0].name} (the reference), 95% CI by a two-sample bootstrap."
    )
    lines.extend(textwrap.wrap(head, WIDTH))
    lines.append("")
    name_w = max(6, min(12, max(len(r.name) for r in c.rows)))
    lines.append(
        f"{'report':{name_w}} {'k':>2} {'pairs':>5} {'A tok/s':>7} {'B tok/s':>7} "
        f"{'speed-up [95% CI]':>17} {'Δ vs ref [95% CI]':>21} {'B acc':>5}"
    )
    starred = False
    for r in c.rows:
        sp = r.speedup
        sp_s = "—" if sp is None else f"{sp.median:.2f} [{sp.ci.low:.2f},{sp.ci.high:.2f}]"
        if r.diff is None or r.diff_median is None:
            d_s = "reference"
        else:
            sig = "*" if not r.diff.low <= 0 <= r.diff.high else " "
            starred = starred or sig == "*"
            d_s = f"{r.diff_median:+.2f} [{r.diff.low:+.2f},{r.diff.high:+.2f}]{sig}"
        acc = "—" if r.acceptance_rate is None else f"{100 * r.acceptance_rate:.0f}%"
        k = "—" if r.k is None else str(r.k)
        lines.append(
            f"{r.name[:name_w]:{name_w}} {k:>2} {r.pairs:>5} {_f(r.a_rate):>7} {_f(r.b_rate):>7} "
            f"{sp_s:>17} {d_s:>21} {acc:>5}"
        )
    lines.append("")
    if starred:  # the footnote only where a row has the mark
        lines.append("* the 95% CI of Δ excludes 0: the reports differ beyond run-to-run noise")
    lines.append("B acc = arm B's acceptance rate over all its measured runs (server /metrics)")
    for name, count in c.unmatched.items():
        lines.append(f"note: {name}: {count} measurement(s) left out (not in every report)")
    for w in c.warnings:
        lines.extend(textwrap.wrap(f"warning: {w}", WIDTH, subsequent_indent="  "))
    return "\n".join(lines)


@click.command(
    "compare",
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="The first report is the reference. Example: mtpwatch compare k2.json k4.json k8.json",
)
@click.argument("reports", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the comparison as JSON.")  # fmt: skip
@click.option("--plot", "plot", is_flag=True, help="Also draw the speed-ups (plotext, else a table).")
def command(reports: tuple[Path, ...], json_path: Path | None, plot: bool) -> None:
    """Compare bench reports: matched prompts, speed-up differences with CIs, provenance warnings."""
    try:
        loaded = reportfile.load_all(list(reports))
        comparison = cmp.compare(loaded)
    except (reportfile.ReportFileError, cmp.CompareError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(format_comparison(comparison))
    if plot:
        from mtpwatch.charts import plots

        plt = plots.load_plotext()
        fig = plots.comparison_figure(comparison, plt, 80, 16, sys.stdout.isatty())
        click.echo("")
        click.echo(fig.title + "\n" + fig.text)
    if json_path is not None:
        try:
            doc = with_meta(cmp.to_json(comparison), metadata={"reports": ", ".join(map(str, reports))})
            json_path.write_text(dumps(doc, indent=2, ensure_ascii=False) + "\n", "utf-8")
        except OSError as exc:
            raise click.ClickException(f"cannot write {json_path}: {exc.strerror or exc}") from None
        click.echo(f"wrote {json_path}", err=True)
