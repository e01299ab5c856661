"""Terminal figures of saved bench reports, drawn with plotext (5.3, a dependency), else tables.

Where plotext cannot be imported every figure is the same numbers as a table, so `mtpwatch plot`
always says something. The app's live throughput chart, redrawn four times a second, does not use
plotext: a hand-drawn chart costs ~0.5 ms per frame against ~20 ms for a plotext build.

Every figure fits the width it is given (80 columns by default) and says what it shows: the metric,
the window (measured runs, warm-ups dropped), and for speed-ups the 95 % CI and the 1.0 line.

`write_svg` (`plot --svg`, for a README or a slide) turns plotext's ANSI text into an SVG of a
terminal window with Rich (installed with Textual), as the app's screenshots are made: exactly what
the terminal shows, no extra dependency (PNG would need a rasteriser such as cairosvg).
"""

from __future__ import annotations

import importlib
import io
import math
import statistics
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from mtpwatch.core.reports import figures, reportfile
from mtpwatch.core.reports.compare import Comparison
from mtpwatch.core.reports.reportfile import Interval, SavedReport
from mtpwatch.render.numbers import columns, fixed, percent, ratio, tok_s, vector

#: figure name -> one line for --help
FIGURES: dict[str, str] = {
    "length": "speed-up vs forced output length (a --lengths sweep), 95% CI bars, 1.0 = break-even",
    "category": "speed-up per prompt category, 95% CI bars",
    "runs": "speed per measured run for both arms, in run order (drift shows as a slope)",
    "positions": "per-position acceptance of arm B: marginal (vLLM's) and conditional",
    "k": "speed-up vs k (number of speculative tokens) across several reports",
    "context": "acceptance, per position and speed-up vs prompt length (a --context-lengths sweep)",
}

ARM_NAMES = {"a": "A baseline", "b": "B treatment"}


@dataclass(frozen=True, slots=True)
class Figure:
    """One drawn figure: a title line and its text (a plot or a table)."""

    title: str
    text: str


def load_plotext() -> ModuleType | None:
    """The plotext module, or None when it cannot be imported."""
    try:
        return importlib.import_module("plotext")
    except ImportError:
        return None


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> str:
    """The first column left-aligned, the others right; cut at `width`."""
    lines = columns([header, *rows], right=range(1, len(header)))
    return "\n".join(line[:width].rstrip() for line in lines)


def _ci(iv: Any) -> str:
    """A 95 % CI as the tables write it: `[1.10, 1.35]`."""
    return f"[{fixed(iv.low)}, {fixed(iv.high)}]"


class _Canvas:
    """A fresh plotext figure of a fixed size; `text()` builds it (colourless unless asked)."""

    def __init__(self, plt: ModuleType, width: int, height: int, color: bool) -> None:
        self.plt = plt
        self.color = color
        plt.clear_figure()
        plt.plotsize(width, height)
        plt.theme("pro" if color else "clear")

    def speedups(
        self,
        xs: Sequence[float],
        intervals: Sequence[Any],
        lo: float,
        hi: float,
        color: str,
        label: str | None,
    ) -> None:
        """The medians joined by a line, each with its CI as a vertical bar clipped to [lo, hi]."""
        for x, iv in zip(xs, intervals, strict=True):
            ys = [max(lo, iv.low), min(hi, iv.high)]
            self.plt.plot([x, x], ys, color=color, marker="│" if not self.color else "braille")
        self.plt.plot(xs, [iv.median for iv in intervals], color=color, marker="●", label=label)

    def speedup_axis(self, lo: float, hi: float) -> None:
        """The y axis of a speed-up: [lo, hi] with round ticks and the red 1.0 (break-even) line."""
        self.plt.hline(1.0, "red")
        self.plt.ylim(lo, hi)
        ticks = _speedup_ticks(lo, hi)
        self.plt.yticks(ticks, [f"{t:g}" for t in ticks])
        self.plt.ylabel("speed-up B/A")

    def text(self) -> str:
        out: str = self.plt.build()
        if not self.color:
            out = self.plt.uncolorize(out)
        return "\n".join(line.rstrip() for line in out.splitlines())


def _drift(report: SavedReport, arm: str) -> float | None:
    """Median over prompts (and lengths) of last measured run / first measured run − 1."""
    groups: dict[tuple[str, int, int | None], list[float]] = {}
    for r in report.runs:
        if r.arm == arm and not r.warmup and not r.error and r.rate is not None:
            groups.setdefault(r.key, []).append(r.rate)
    changes = [g[-1] / g[0] - 1 for g in groups.values() if len(g) > 1 and g[0] > 0]
    return statistics.median(changes) if changes else None


def _clip_range(intervals: Sequence[Any]) -> tuple[float, float]:
    """The y range of a speed-up plot: every median, 1.0, and the CIs up to one median range beyond.

    A CI from three noisy pairs can reach 200x; drawn whole it would flatten every other point.
    """
    meds = [iv.median for iv in intervals] + [1.0]
    span = max(max(meds) - min(meds), 0.25)
    lo = max(min(iv.low for iv in intervals), min(meds) - span)
    hi = min(max(iv.high for iv in intervals), max(meds) + span)
    return _limits([lo, hi, *meds])


def _speedup_ticks(lo: float, hi: float) -> list[float]:
    """Round y ticks between lo and hi that always include 1.0 (the break-even line sits on one)."""
    span = hi - lo
    step = next((st for st in (0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0) if span / st <= 6), 20.0)
    first = math.ceil(lo / step) * step
    ticks = [round(first + i * step, 6) for i in range(int((hi - first) / step) + 1)]
    if lo <= 1.0 <= hi and 1.0 not in ticks:
        ticks.append(1.0)
    return sorted(ticks)


def _limits(values: Sequence[float]) -> tuple[float, float]:
    """The axis range of `values` and 1.0 (the break-even line), 8 % of the span beyond each end."""
    lo, hi = min([*values, 1.0]), max([*values, 1.0])
    span = hi - lo or max(abs(hi), 1.0) * 0.1
    return lo - 0.08 * span, hi + 0.08 * span


def _interval_chart(
    plt: ModuleType,
    labels: Sequence[str],
    intervals: Sequence[Any],
    width: int,
    height: int,
    color: bool,
    title: str,
) -> str:
    """Horizontal median + CI bars, one row per label, with the 1.0 line (speed-ups)."""
    cv = _Canvas(plt, width, max(height, 2 * len(labels) + 6), color)
    ys = list(range(len(labels), 0, -1))  # first label on top
    for y, iv in zip(ys, intervals, strict=True):
        plt.plot([iv.low, iv.high], [y, y], color="blue", marker="─" if not color else "braille")
    plt.scatter([iv.median for iv in intervals], ys, color="blue", marker="●")
    plt.vline(1.0, "red")
    xs = [iv.low for iv in intervals] + [iv.high for iv in intervals]
    plt.xlim(*_limits(xs))
    plt.ylim(0.5, len(labels) + 0.5)
    plt.yticks(ys, [label[:14] for label in labels])
    plt.xlabel("speed-up B/A (red: 1.0)")
    plt.title(title)
    return cv.text()


def speedup_vs_length(
    report: SavedReport, plt: ModuleType | None, width: int, height: int, color: bool
) -> Figure | None:
    """Speed-up B/A against forced output length, one series per concurrency; None without a sweep."""
    sweep = {c: pts for c, pts in figures.length_sweep(report).items() if len(pts) >= 2}
    if not sweep:
        return None
    verdicts = figures.break_even_verdicts(report)
    title = f"{report.name}: speed-up B/A vs output length (median, 95% CI; 1.0 = break-even)"
    notes: list[str] = []
    for c in (c for c in sweep if c in verdicts):
        notes += textwrap.wrap(f"break-even (concurrency {c}): {verdicts[c]}", width, subsequent_indent="  ")
    if plt is None:
        rows = [
            [f"c{p.concurrency}", str(p.length), ratio(p.speedup.median), _ci(p.speedup), str(p.speedup.n),
             "faster" if p.speedup.low > 1 else "slower" if p.speedup.high < 1 else "not resolved"]
            for pts in sweep.values() for p in pts
        ]  # fmt: skip
        table = _table(["conc.", "length", "speed-up", "95% CI", "pairs", "B vs A"], rows, width)
        return Figure(title, "\n".join([table, *notes]))
    cv = _Canvas(plt, width, height, color)
    lengths = sorted({p.length for pts in sweep.values() for p in pts})
    # x is the index of the length (sweeps are roughly geometric: 8, 32, 128, 512 stay readable)
    pos = {length: i + 1 for i, length in enumerate(lengths)}
    colors = ["blue", "green", "magenta", "cyan"]
    lo, hi = _clip_range([p.speedup for pts in sweep.values() for p in pts])
    clipped = False
    for i, (conc, pts) in enumerate(sweep.items()):
        col = colors[i % len(colors)]
        xs = [pos[p.length] + 0.08 * i for p in pts]
        clipped = clipped or any(p.speedup.low < lo or p.speedup.high > hi for p in pts)
        cv.speedups(xs, [p.speedup for p in pts], lo, hi, col, f"concurrency {conc}")
    cv.speedup_axis(lo, hi)
    if clipped:
        notes.insert(0, "(some CI bars run past the plot's edge: `--table` shows them whole)")
    plt.xlim(0.5, len(lengths) + 0.5)
    plt.xticks(list(pos.values()), [str(x) for x in lengths])
    plt.xlabel("forced output length (tokens)")
    plt.title("speed-up vs output length; red line: 1.0 (break-even)")
    return Figure(title, "\n".join([cv.text(), *notes]))


def speedup_per_category(
    report: SavedReport, plt: ModuleType | None, width: int, height: int, color: bool
) -> Figure | None:
    """Speed-up B/A per category at the primary point; None with fewer than two categories."""
    cats = figures.category_speedups(report)
    if len(cats) < 2:
        return None
    title = f"{report.name}: speed-up B/A per category (median, 95% CI)"
    if plt is None:
        rows = [
            [c.category, ratio(c.speedup.median), _ci(c.speedup), str(c.speedup.n),
             percent(c.acceptance_rate)]
            for c in cats
        ]  # fmt: skip
        header = ["category", "speed-up", "95% CI", "pairs", "B acceptance"]
        return Figure(title, _table(header, rows, width))
    text = _interval_chart(
        plt, [c.category for c in cats], [c.speedup for c in cats], width, height, color,
        "speed-up per category, median and 95% CI",
    )  # fmt: skip
    return Figure(title, text)


def rate_per_run(
    report: SavedReport, plt: ModuleType | None, width: int, height: int, color: bool
) -> Figure | None:
    """Each arm's speed per measured run in run order; None when no run has a speed."""
    series = figures.run_series(report)
    if not series:
        return None
    conc = {r.concurrency for r in report.runs}
    metric = "decode tok/s" if conc == {1} else "tok/s (decode at c=1, aggregate above)"
    title = f"{report.name}: {metric} per measured run, in run order (warm-ups dropped)"
    if plt is None:
        rows = [
            [ARM_NAMES.get(arm, arm), str(len(s.rate)), tok_s(min(s.rate), 1), tok_s(max(s.rate), 1),
             percent(_drift(report, arm), signed=True)]
            for arm, s in series.items()
        ]  # fmt: skip
        header = ["arm", "runs", "min", "max", "drift: last/first run of a prompt (median)"]
        return Figure(title, _table(header, rows, width))
    cv = _Canvas(plt, width, height, color)
    colors = {"a": "blue", "b": "green"}
    for arm, s in series.items():
        plt.scatter(s.order, s.rate, color=colors.get(arm, "magenta"), marker="●" if arm == "b" else "○",
                    label=ARM_NAMES.get(arm, arm))  # fmt: skip
    plt.xlabel("run (order finished)")
    plt.ylabel(metric.split(" (")[0])
    plt.title(f"{metric} per run; a slope means drift")
    return Figure(title, cv.text())


def acceptance_per_position(
    report: SavedReport, plt: ModuleType | None, width: int, height: int, color: bool
) -> Figure | None:
    """Marginal and conditional acceptance per draft position; None without speculative decoding."""
    curves = figures.position_curves(report)
    if not curves:
        return None
    title = (
        f"{report.name}: acceptance per draft position (server /metrics, measured runs); "
        "marginal = P(first i accepted), conditional = P(i | i-1)"
    )
    if plt is None:
        parts = []
        for arm, c in curves.items():
            pairs = zip(c.marginal, c.conditional, strict=True)
            rows = [[str(i + 1), fixed(m, 3), fixed(cd, 3)] for i, (m, cd) in enumerate(pairs)]
            mal = fixed(c.mean_acceptance_length)
            parts.append(f"{ARM_NAMES.get(arm, arm)} (mean acceptance length {mal})")
            parts.append(_table(["position", "marginal", "conditional"], rows, width))
        return Figure(title, "\n".join(parts))
    cv = _Canvas(plt, width, height, color)
    for arm, c in curves.items():
        xs = list(range(1, len(c.marginal) + 1))
        tag = "" if len(curves) == 1 else f" {arm.upper()}"
        plt.plot(xs, list(c.marginal), color="blue", marker="●", label=f"marginal{tag}")
        cond = [(x, v) for x, v in zip(xs, c.conditional, strict=True) if v is not None]
        if cond:
            plt.plot([x for x, _ in cond], [v for _, v in cond], color="green", marker="○",
                     label=f"conditional{tag}")  # fmt: skip
        plt.xticks(xs, [str(x) for x in xs])
    plt.ylim(0, 1.05)
    plt.xlabel("draft position")
    plt.ylabel("acceptance")
    plt.title("per-position acceptance (marginal: vLLM's definition)")
    return Figure(title, cv.text())


def speedup_vs_k(
    reports: Sequence[SavedReport], plt: ModuleType | None, width: int, height: int, color: bool
) -> Figure | None:
    """Speed-up against k across reports; None unless at least two distinct k values are known."""
    points = figures.k_sweep(reports)
    if len({p.k for p in points}) < 2:
        return None
    title = "speed-up B/A vs k (speculative tokens), one point per report (median, 95% CI; 1.0 = break-even)"
    if plt is None:
        rows = [
            [p.name, str(p.k), ratio(p.speedup.median), _ci(p.speedup), str(p.speedup.n),
             fixed(p.mean_acceptance_length)]
            for p in points
        ]  # fmt: skip
        header = ["report", "k", "speed-up", "95% CI", "pairs", "acc. length"]
        return Figure(title, _table(header, rows, width))
    cv = _Canvas(plt, width, height, color)
    xs = [float(p.k) for p in points]
    lo, hi = _clip_range([p.speedup for p in points])
    cv.speedups(xs, [p.speedup for p in points], lo, hi, "blue", None)
    cv.speedup_axis(lo, hi)
    ks = sorted({p.k for p in points})
    plt.xlim(min(ks) - 0.5, max(ks) + 0.5)
    plt.xticks(ks, [str(k) for k in ks])
    plt.xlabel("k (num_speculative_tokens)")
    plt.title("speed-up vs k; red line: 1.0 (break-even)")
    return Figure(title, cv.text())


def acceptance_vs_context(
    reports: Sequence[SavedReport], plt: ModuleType | None, width: int, height: int, color: bool
) -> Figure | None:
    """Acceptance (overall and per position) against prompt length; None without two lengths."""
    points = figures.context_sweep(reports)
    if len(points) < 2:
        return None
    title = "acceptance vs prompt length (server counters; prompts padded from the set's own text)"
    if plt is None or not any(p.acceptance_rate is not None for p in points):
        rows = [
            [str(p.length), percent(p.acceptance_rate), vector(p.per_position),
             ratio(p.speedup.median) if p.speedup else "—", _ci(p.speedup) if p.speedup else "—"]
            for p in points
        ]  # fmt: skip
        header = ["length", "acceptance", "per position", "speed-up", "95% CI"]
        return Figure(title, _table(header, rows, width))
    cv = _Canvas(plt, width, height, color)
    xs = [float(i + 1) for i in range(len(points))]  # lengths are roughly geometric: by index
    colors = ["blue", "green", "magenta", "cyan", "yellow"]
    plt.plot(xs, [p.acceptance_rate or 0.0 for p in points], color="red", marker="●", label="acceptance")
    for i in range(min(len(colors), min(len(p.per_position) for p in points))):
        plt.plot(xs, [p.per_position[i] for p in points], color=colors[i], label=f"position {i + 1}")
    plt.ylim(0.0, 1.05)
    plt.xlim(0.5, len(points) + 0.5)
    plt.xticks(xs, [str(p.length) for p in points])
    plt.xlabel("prompt length (tokens)")
    plt.ylabel("accepted")
    plt.title("acceptance vs prompt length")
    speedups = [f"{p.length}: {ratio(p.speedup.median)} {_ci(p.speedup)}" for p in points if p.speedup]
    note = textwrap.wrap("speed-up B/A (95% CI) " + ", ".join(speedups), width) if speedups else []
    return Figure(title, "\n".join([cv.text(), *note]))


def comparison_figure(
    comparison: Comparison, plt: ModuleType | None, width: int, height: int, color: bool
) -> Figure:
    """The speed-up of each compared report over the matched measurements, with its 95% CI."""
    title = "speed-up B/A per report over the matched measurements (median, 95% CI; 1.0 = break-even)"
    shown = [(r.name, s) for r in comparison.rows if (s := r.speedup) is not None]
    names = [name for name, _ in shown]
    intervals = [Interval(s.median, s.ci.low, s.ci.high, s.n_pairs) for _, s in shown]
    if plt is None:
        cells = [
            [name, ratio(iv.median), _ci(iv), str(iv.n)] for name, iv in zip(names, intervals, strict=True)
        ]
        return Figure(title, _table(["report", "speed-up", "95% CI", "pairs"], cells, width))
    return Figure(title, _interval_chart(plt, names, intervals, width, height, color, "speed-up per report"))


def draw(
    reports: Sequence[SavedReport],
    *,
    only: Sequence[str] = (),
    width: int = 80,
    height: int = 20,
    color: bool = False,
    plt: ModuleType | None = None,
) -> list[Figure]:
    """Every figure that the reports have data for (or only those named), in FIGURES order."""
    across = {"k": speedup_vs_k, "context": acceptance_vs_context}
    per_report = {
        "length": speedup_vs_length,
        "category": speedup_per_category,
        "runs": rate_per_run,
        "positions": acceptance_per_position,
    }
    out: list[Figure | None] = []
    for name in (name for name in FIGURES if not only or name in only):
        if name in across:
            out.append(across[name](reports, plt, width, height, color))
        else:
            out += [per_report[name](report, plt, width, height, color) for report in reports]
    return [fig for fig in out if fig is not None]


def report_figures(document: Mapping[str, Any], label: str | None, *, color: bool) -> str:
    """The figures `mtpwatch plot` would draw from a report document (a bench's --json), at 80 columns."""
    saved = reportfile.parse(document, path="this bench", name=label or "this bench")
    figs = draw([saved], width=80, color=color, plt=load_plotext())
    return "\n\n".join(textwrap.fill(f.title, 80) + "\n" + f.text for f in figs)


def write_svg(path: Path, blocks: Sequence[str], *, width: int, title: str) -> None:
    """Write an SVG of these text blocks (ANSI colours kept), `width` columns wide, to `path` (raises
    OSError when it cannot)."""
    from rich.console import Console
    from rich.text import Text

    console = Console(
        record=True, width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor"
    )
    for i, block in enumerate(blocks):
        if i:
            console.print()
        console.print(Text.from_ansi(block), crop=False, no_wrap=True, overflow="ignore")
    path.write_text(console.export_svg(title=title), encoding="utf-8")
