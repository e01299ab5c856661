"""The one number formatter: each kind of number (percent, tok/s, ratio, ms, GB/s, counts) is
spelled in one place, and a number that is not there (None, NaN) is shown as one mark.

Every text table and chart of `mtpwatch.render` and the commands formats through these functions.
Precision is one rule per kind (the `*_DIGITS` constants); a column that needs another (the
bench's three-digit request rate) passes `digits=` and says so where it does. Percentages are
`style="tight"` in the tables and reports, `"spaced"` in `snapshot` and `fleet`'s line-per-number
outputs, as the TUI writes them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Literal

MISSING = "—"
"""What a table shows for a number that is not there (None, NaN)."""

PercentStyle = Literal["tight", "spaced"]

FIXED_DIGITS = 2
"""Plain numbers: mean acceptance length, tokens per step, speed-ups."""
PERCENT_DIGITS = 1
"""Percentages: acceptance rate, CV, errors of a prediction."""
TOK_S_DIGITS = 2
"""Tokens per second in the bench and sweep tables (medians of many runs)."""
RATIO_DIGITS = 2
"""Speed-ups (B/A) written with their `x`."""
MS_DIGITS = 1
"""Latencies in milliseconds (TTFT, TPOT, ITL percentiles)."""
GBPS_DIGITS = 0
"""Bandwidth in GB/s."""


def missing(x: float | None) -> bool:
    """True for a number that is not there: None or NaN."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def fixed(x: float | None, digits: int = FIXED_DIGITS, *, none: str = MISSING, signed: bool = False) -> str:
    """`x` with `digits` decimals (`+` in front of positives when `signed`); `none` when missing."""
    if x is None or missing(x):
        return none
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def percent(
    fraction: float | None,
    digits: int = PERCENT_DIGITS,
    *,
    style: PercentStyle = "tight",
    signed: bool = False,
    none: str = MISSING,
) -> str:
    """A fraction as a percentage: 0.62 → `62.0%` (tight) or `62.0 %` (spaced)."""
    if fraction is None or missing(fraction):
        return none
    sep = " " if style == "spaced" else ""
    return f"{fixed(100 * fraction, digits, signed=signed)}{sep}%"


def tok_s(x: float | None, digits: int = TOK_S_DIGITS, *, none: str = MISSING) -> str:
    """Tokens per second, the number only (the column or the sentence names the unit)."""
    return fixed(x, digits, none=none)


def ratio(x: float | None, digits: int = RATIO_DIGITS, *, none: str = MISSING, mark: str = "x") -> str:
    """A speed-up: 1.234 → `1.23x` (the tables, plain ASCII), or `1.23×` with `mark="×"` (prose)."""
    return none if x is None or missing(x) else f"{fixed(x, digits)}{mark}"


def ms(seconds: float | None, digits: int = MS_DIGITS, *, unit: bool = False, none: str = MISSING) -> str:
    """Seconds in milliseconds: 0.0123 → `12.3` (`12.3 ms` with `unit`)."""
    if seconds is None or missing(seconds):
        return none
    return fixed(1000 * seconds, digits) + (" ms" if unit else "")


def gb_s(x: float | None, digits: int = GBPS_DIGITS, *, none: str = MISSING) -> str:
    """Bandwidth: 273.4 → `273 GB/s`."""
    return none if x is None or missing(x) else f"{fixed(x, digits)} GB/s"


def count(x: float | None, *, none: str = MISSING) -> str:
    """A counter's value: whole numbers with thousands separators (`12,345`), else one decimal."""
    if x is None or missing(x):
        return none
    f = float(x)
    return f"{int(f):,}" if f.is_integer() else f"{f:,.1f}"


def interval(median: float, low: float, high: float, digits: int = RATIO_DIGITS) -> str:
    """A speed-up and its confidence interval: `1.23x [1.10, 1.35]`."""
    return f"{fixed(median, digits)}x [{fixed(low, digits)}, {fixed(high, digits)}]"


def vector(xs: Sequence[float | None] | None, digits: int = FIXED_DIGITS, *, none: str = MISSING) -> str:
    """Per-position rates in one line: `0.81 0.62 0.44`; `none` for an empty or missing list."""
    return " ".join(fixed(x, digits, none=none) for x in xs) if xs else none


def columns(rows: Sequence[Sequence[str]], *, right: Collection[int] = (), indent: str = "") -> list[str]:
    """`rows` as lines: each column as wide as its widest cell, two spaces apart, left-aligned but
    the `right` ones; trailing blanks dropped."""
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    align = [str.rjust if i in right else str.ljust for i in range(len(widths))]
    cells = ((a(c, w) for a, c, w in zip(align, row, widths, strict=True)) for row in rows)
    return [(indent + "  ".join(row)).rstrip() for row in cells]
