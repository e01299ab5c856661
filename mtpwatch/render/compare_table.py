"""The `mtpwatch compare` table: several bench reports side by side (80 columns)."""

from __future__ import annotations

import textwrap

from mtpwatch.core.reports import compare as cmp
from mtpwatch.render.numbers import MISSING, fixed, percent, tok_s

WIDTH = 80
NAME_W = 12
"""Report names up to this long name the rows; longer ones are numbered, with a legend."""


def format_comparison(c: cmp.Comparison) -> str:
    """The stdout table (fits 80 columns: names longer than `NAME_W` are numbered, with a legend)."""
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
    tagged = any(len(r.name) > NAME_W for r in c.rows)
    names = [f"#{i}" if tagged else r.name for i, r in enumerate(c.rows, 1)]
    name_w = max(6, max(len(tag) for tag in names))
    lines.append(
        f"{'report':{name_w}} {'k':>2} {'pairs':>5} {'A tok/s':>7} {'B tok/s':>7} "
        f"{'speed-up [95% CI]':>17} {'Δ vs ref [95% CI]':>21} {'B acc':>5}"
    )
    starred = False
    for name, r in zip(names, c.rows, strict=True):
        sp = r.speedup
        sp_s = MISSING if sp is None else f"{fixed(sp.median)} [{fixed(sp.ci.low)},{fixed(sp.ci.high)}]"
        if r.diff is None or r.diff_median is None:
            d_s = "reference"
        else:
            sig = "*" if not r.diff.low <= 0 <= r.diff.high else " "
            starred = starred or sig == "*"
            low, high = fixed(r.diff.low, signed=True), fixed(r.diff.high, signed=True)
            d_s = f"{fixed(r.diff_median, signed=True)} [{low},{high}]{sig}"
        acc = percent(r.acceptance_rate, 0)
        k = MISSING if r.k is None else str(r.k)
        lines.append(
            f"{name:{name_w}} {k:>2} {r.pairs:>5} {tok_s(r.a_rate, 1):>7} {tok_s(r.b_rate, 1):>7} "
            f"{sp_s:>17} {d_s:>21} {acc:>5}"
        )
    lines.append("")
    if tagged:
        for name, r in zip(names, c.rows, strict=True):
            lines.extend(textwrap.wrap(f"{name} = {r.name}", WIDTH, subsequent_indent="     "))
    if starred:  # the footnote only where a row has the mark
        lines.append("* the 95% CI of Δ excludes 0: the reports differ beyond run-to-run noise")
    lines.append("B acc = arm B's acceptance rate over all its measured runs (server /metrics)")
    for name, count in c.unmatched.items():
        lines.append(f"note: {name}: {count} measurement(s) left out (not in every report)")
    for w in c.warnings:
        lines.extend(textwrap.wrap(f"warning: {w}", WIDTH, subsequent_indent="  "))
    return "\n".join(lines)
