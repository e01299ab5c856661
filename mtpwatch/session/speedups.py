"""The console's A/B speed-up: one ratio per prompt that ran on both arms, and what its line says.

Which arm speculates is read from the sources (each arm's `Source.view`: its counters, its method;
`diagnosis.ab_arms`), never from what a panel happens to show: the ratio is the speculating arm's
decode tok/s over the baseline's ("A/B" when A speculates), else B over A.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mtpwatch.session.sources import Source
from mtpwatch.session.views import Answer

if TYPE_CHECKING:  # the first frame imports none of the advisor's or the diagnosis' modules
    from mtpwatch.core.sweeps.advisor import Advice


@dataclass(frozen=True)
class Comparison:
    """What the A/B lines show after a prompt ran on both arms."""

    last: float | None
    """This prompt's speed-up (None when an arm has no decode tok/s)."""
    median: float | None
    """The median over every prompt so far."""
    count: int
    label: str
    """'B/A' or 'A/B': the speculating arm over the baseline."""
    warnings: tuple[str, ...]
    """`diagnosis.ab_warnings`: speculation slower (the median of the last prompts under 1), two models."""
    advice: Advice | None = None
    """The k advisor (`advice.advice_for`; MTP against the same model without it), else None."""
    lossy: str | None = None
    """Why the MTP arm's output may differ by design (`advice.lossy_reason`: 'fly verification is
    lossy'), else None."""


class SpeedupSeries:
    """The speed-ups of the prompts sent to both arms so far (a replay clears them on a seek back)."""

    def __init__(self) -> None:
        self.ratios: list[float] = []
        """Speculating / baseline decode tok/s, one per prompt, in order."""

    def clear(self) -> None:
        self.ratios.clear()

    def compare(
        self, a: Answer, b: Answer, sources: Sequence[Source], *, window: str, race: bool
    ) -> Comparison:
        """Add the prompt whose answers are `a` (arm A) and `b` (arm B); what its lines show."""
        from mtpwatch.session.advice import advice_for, lossy_reason
        from mtpwatch.session.diagnosis import ab_arms, ab_warnings, model_warnings

        base, mtp, method = ab_arms([source.view(window) for source in sources])
        answers = (a, b)
        t_base, t_mtp = answers[base].summary.decode_tok_s, answers[mtp].summary.decode_tok_s
        last = t_mtp / t_base if t_base and t_mtp else None
        if last is not None:
            self.ratios.append(last)
        models = (sources[0].state().model, sources[1].state().model) if len(sources) >= 2 else (None, None)
        warnings = ab_warnings(
            self.ratios, method=method, race=race, models=models, tokens=(a.summary.tokens, b.summary.tokens)
        )
        mtp_arm = method == "MTP" and len(sources) > max(base, mtp)
        one_model = not model_warnings(models)
        return Comparison(
            last=last,
            median=statistics.median(self.ratios) if self.ratios else None,
            count=len(self.ratios),
            label="B/A" if mtp == 1 else "A/B",  # the waiting line's, F6's and the help's word
            warnings=warnings,
            advice=advice_for(sources[base], sources[mtp]) if mtp_arm and one_model else None,
            lossy=lossy_reason(sources[mtp]) if mtp_arm else None,
        )
