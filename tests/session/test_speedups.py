"""The A/B speed-up series: which arm speculates comes from the sources, the ratio follows it."""

from __future__ import annotations

from mtpwatch.session.diagnosis import MTP_SLOWER
from mtpwatch.session.speedups import SpeedupSeries
from mtpwatch.session.views import Answer, PromptSummary, ServerView
from tests.ui.samples import StillSource


def _Arm(label: str, speculative: bool, model: str = "m") -> StillSource:
    """A source that only answers what the speed-up reads: its view, model and identity."""
    method = "mtp" if speculative else None
    view = ServerView(
        label=label,
        url="http://127.0.0.1:1",
        status="up",
        speculative=speculative,
        method=method,
        model=model,
    )
    return StillSource(view)


def _answer(tok_s: float) -> Answer:
    return Answer(PromptSummary(tokens=300, ttft_s=0.1, decode_tok_s=tok_s))


def test_the_speculating_arm_goes_over_the_baseline_whichever_it_is() -> None:
    series = SpeedupSeries()
    b_speculates = [_Arm("A", False), _Arm("B", True)]
    shown = series.compare(_answer(20.0), _answer(50.0), b_speculates, window="10 s", race=False)
    assert (shown.label, shown.last, shown.count) == ("B/A", 2.5, 1)
    series.clear()
    a_speculates = [_Arm("A", True), _Arm("B", False)]
    shown = series.compare(_answer(50.0), _answer(20.0), a_speculates, window="10 s", race=False)
    assert (shown.label, shown.last) == ("A/B", 2.5)


def test_mtp_slower_on_the_last_prompts_is_said_and_a_race_says_nothing() -> None:
    arms = [_Arm("A", False), _Arm("B", True)]
    series = SpeedupSeries()
    for _ in range(3):
        shown = series.compare(_answer(20.0), _answer(15.0), arms, window="10 s", race=False)
    assert shown.median == 0.75 and any(MTP_SLOWER in w for w in shown.warnings)
    assert not series.compare(_answer(20.0), _answer(15.0), arms, window="10 s", race=True).warnings
