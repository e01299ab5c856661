"""The k sweep's "speculation on, k=0" row (`core.sweeps.idle`): the 0s server against plain k=0."""

from __future__ import annotations

from mtpwatch.core.sweeps.idle import IDLE, IdleCost
from mtpwatch.render.numbers import fixed, interval, percent, tok_s


def format_idle(cost: IdleCost) -> str:
    """The 0s row in the sweep table's columns, then its cost against plain k=0 with the interval."""
    ci = interval(cost.speedup, *cost.ci) if cost.ci and cost.speedup is not None else fixed(cost.speedup)
    share = "" if cost.drafted_share is None else f"   drafted on {percent(cost.drafted_share)} of steps"
    row = f"{IDLE:>3}{tok_s(cost.decode_tok_s):>14}{ci:>26}{cost.pairs:>7}{share}"
    k = cost.num_speculative_tokens
    head = (
        f"speculation on, k=0 ({IDLE}: num_speculative_tokens={k}, num_speculative_tokens_per_batch_size "
        f"[[1, 1, 0]], k=0 at every batch size) vs no speculation (plain k=0), paired, restart schedule"
    )
    lines = [head, row]
    if cost.interrupted:
        lines.append(f"PARTIAL: {cost.interrupted}")
    if cost.cost is not None and cost.cost_ci is not None:
        low, high = cost.cost_ci
        level = f"{cost.ci_coverage:.0%}"
        lines.append(
            f"price of leaving speculation on: {percent(cost.cost, signed=True)} of plain k=0's decode "
            f"tok/s [{percent(low, signed=True)}, {percent(high, signed=True)}] ({level} CI, "
            f"{cost.pairs} pairs; 1 − speed-up; plain k=0 {tok_s(cost.baseline_tok_s)} tok/s in this bench)"
        )
    return "\n".join(lines)
