"""The k sweep's concurrency table: speed-up over k=0 per concurrency and k, the best k at each,
the batch-size schedule as a ready `--speculative-config`, and its head-to-head check against the
best fixed k."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from mtpwatch.core.sweeps.resolve import RULE
from mtpwatch.core.sweeps.schedule import Cell, ConcurrencyAdvice
from mtpwatch.render.numbers import interval, percent, ratio


def _cell(cell: Cell) -> str:
    """A speed-up and its interval; † when the interval covers less than 95 % (too few pairs)."""
    return interval(cell.speedup, cell.low, cell.high) + ("†" if cell.coverage < 0.95 else "")


def _weak_note(cells: Sequence[Cell]) -> str | None:
    """The footnote for † cells: what their intervals really cover."""
    weak = [c for c in cells if c.coverage < 0.95]
    if not weak:
        return None
    lowest = min(weak, key=lambda c: c.coverage)
    return (
        f"† too few pairs for a 95% interval: it covers {percent(lowest.coverage, 0)} at "
        f"{lowest.pairs} pairs (min–max of the pairs); use more --runs"
    )


def _choice(conc: ConcurrencyAdvice, c: int) -> str:
    """'2' where the data resolves the best k, '1 (≈0,1,2)' where ks are within the noise."""
    ch = conc.choices.get(c)
    if ch is None or ch.resolved:
        return str(conc.best[c])
    return (
        f"{ch.best} (≈{','.join(map(str, ch.within))})"
        if not ch.weak or len(ch.within) > 1
        else f"{ch.best}?"
    )


def _advice(conc: ConcurrencyAdvice) -> list[str]:
    """The ready config: a fixed k where one does as well everywhere, else the schedule."""
    ranges = ", ".join(f"{lo}–{hi}: k={k}" for lo, hi, k in conc.schedule)
    config = json.dumps(dict(conc.config), separators=(",", ":")) if conc.config is not None else None
    if conc.fixed_k is not None:
        weak = (
            "; intervals under 95 % (†): more --runs may resolve more"
            if any(ch.weak for ch in conc.choices.values())
            else ""
        )
        lines = (
            [f"a fixed k={conc.fixed_k} does as well within the noise at every measured concurrency "
             f"(the smallest such k){weak}:", f"  --speculative-config {shlex.quote(config)}"]
            if config is not None and conc.fixed_k > 0
            else ["k=0 does as well within the noise at every measured concurrency: run without "
                  "speculation (or measure with more --runs)"]
        )  # fmt: skip
        if any(
            len({k for _, _, k in conc.schedule}) > 1 or ch.best != conc.fixed_k
            for ch in conc.choices.values()
        ):
            lines.append(
                f"  the medians' schedule ({ranges}) is not resolved by its intervals: no "
                "num_speculative_tokens_per_batch_size to paste (--verify-schedule measures it head to head)"
            )
        return lines
    lines = [f"schedule (batch size = requests running at once; inclusive ranges): {ranges}"]
    if len(conc.schedule) == 1 and conc.schedule[0][2] > 0:
        lines.append(
            f"  one k wins at every measured concurrency: a fixed num_speculative_tokens "
            f"{conc.schedule[0][2]} does the same as this schedule"
        )
    if config is None:
        return [*lines, "no k beats k=0 at any measured concurrency: run without speculation"]
    return [
        *lines,
        f"  --speculative-config {shlex.quote(config)}",
        f"  (covers batch sizes 1–{conc.schedule[-1][1]}; vLLM keeps the last range's k above; "
        "needs a vLLM with dynamic k, 0.32 or later)",
    ]


def format_concurrency(conc: ConcurrencyAdvice) -> str:
    """The concurrency × k table, the best k at each, the advice and the schedule's check."""
    ks = sorted({k for cells in conc.table.values() for k in cells})
    lines = [
        "per concurrency: speed-up over k=0 [95% CI] (the same prompt sent c at once; above c=1 the speed "
        "is aggregate output tok/s)",
        f"{'c':>5}" + "".join(f"{f'k={k}':>22}" for k in ks) + f"{'best k':>16}",
    ]
    for c, cells in conc.table.items():
        row = "".join(f"{_cell(cells[k]) if k in cells else '—':>22}" for k in ks)
        lines.append(f"{c:>5}{row}{_choice(conc, c):>16}")
    lines.append(f"rule: {RULE} (≈: the ks within the noise; ?: an interval under 95 %, †)")
    lines.extend(_advice(conc))
    if conc.verification:
        lines += [
            "schedule vs the best fixed k, head to head (two benches per best k, both orders, pairs pooled):",
            f"{'c':>5}{'best fixed k':>14}{'its speed-up over k=0':>23}"
            f"{'schedule / fixed k [95% CI]':>30}   verdict",
        ]
        verdicts = {True: "no slower (CI reaches 1.0)", False: "SLOWER", None: "not measured"}
        for vr in conc.verification:
            cell = _cell(vr.head) if vr.head else "—"
            lines.append(
                f"{vr.concurrency:>5}{vr.best_k:>14}{ratio(vr.best_speedup):>23}{cell:>30}"
                f"   {verdicts[vr.no_slower]}" + (" (a hint: †)" if vr.weak else "")
            )
    if conc.verification_note:
        lines.append(f"schedule not verified: {conc.verification_note}")
    shown = [cell for row in conc.table.values() for cell in row.values()]
    shown += [vr.head for vr in conc.verification if vr.head is not None]
    note = _weak_note(shown)
    if note:
        lines.append(note)
    return "\n".join(lines)
