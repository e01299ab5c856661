"""The k advisor's line in the A/B view: from the last prompt on both arms, which k would be best.

Reads the prompt window of each arm (`ServerFeed.rates("prompt")`): the speculating arm's marginal
per-position acceptance and mean step time (ITL mean: vLLM observes one ITL per engine step), and
the baseline's (one token per step). `core.ab.advisor.advise` does the arithmetic.
"""

from __future__ import annotations

from mtpwatch.core.ab.advisor import Advice, advise
from mtpwatch.ui.feed import ServerFeed


def advice_for(baseline: ServerFeed, speculative: ServerFeed) -> Advice | None:
    """Predictions for k' ≤ the running k from the last prompt; None until both arms measured one."""
    base, spec = baseline.rates("prompt"), speculative.rates("prompt")
    if base is None or spec is None or not spec.per_position:
        return None
    if not base.mean_step_s or not spec.mean_step_s:
        return None
    try:
        return advise(spec.per_position, spec.mean_step_s, base.mean_step_s)
    except ValueError:
        return None


def render_advice(advice: Advice | None) -> str:
    """' · k advisor: best k=K (predicted S×; k=R now T×)' or '' when there is nothing to say."""
    if advice is None:
        return ""
    best, now = advice.at(advice.best_k), advice.at(advice.from_k)
    if best is None or now is None:
        return ""
    if advice.best_k == advice.from_k:
        return f" · k advisor: keep k={advice.from_k} [dim](predicted best of 0…{advice.from_k})[/]"
    return (
        f" · k advisor: [b]k={advice.best_k}[/] predicted {best.speedup:.2f}× "
        f"[dim](k={advice.from_k} now {now.speedup:.2f}×)[/]"
    )
