"""Diagnoses decided from all the evidence on screen (issue 40, item 3): `session.diagnosis`."""

from __future__ import annotations

from typing import Any

from textual.content import Content

from mtpwatch.core.provenance import arm_warnings
from mtpwatch.session.diagnosis import DRAFTER_MISMATCH, MTP_SLOWER, ab_arms, ab_warnings, make_verdict
from mtpwatch.session.views import BandwidthView, ServerView
from mtpwatch.ui.markup.panel import render_bars

# k=64 with a healthy drafter, as issue 40 saw it: position 1 accepts 69 %, mean length 2.55,
# so the rate Δaccepted / Δdraft_tokens is 1.55 / 64 = 2.4 %.
HEALTHY_64 = (0.69, 0.40, 0.22, 0.12, 0.07, 0.03, *([0.02] * 4), *([0.0] * 54))


def _verdict(**kw: Any) -> tuple[str, str]:
    args: dict[str, Any] = {
        "method": "mtp",
        "speculative": True,
        "acceptance_rate": 0.6,
        "mean_acceptance_length": 2.2,
        "drafts": 500.0,
        "bandwidth": BandwidthView(),
        "window": "10 s",
    }
    args.update(kw)
    return make_verdict(**args)


def test_a_low_rate_at_a_large_k_with_a_good_position_1_blames_k_not_the_drafter() -> None:
    text, level = _verdict(
        acceptance_rate=1.55 / 64, mean_acceptance_length=2.55, k=64, per_position=HEALTHY_64
    )
    assert DRAFTER_MISMATCH not in text and "failing" not in text
    assert "k=64" in text and "position 1 accepts 69 %" in text and "2.55 tokens per verify step" in text
    assert "positions past 5 accept under 5 %" in text and level == "warn"
    assert not text.startswith("hint")


def test_a_mismatched_drafter_is_still_called_one_from_position_1() -> None:
    mismatch = (0.01, 0.0, 0.0, 0.0)
    text, level = _verdict(acceptance_rate=0.0025, mean_acceptance_length=1.01, k=4, per_position=mismatch)
    assert level == "bad" and DRAFTER_MISMATCH in text and "position 1 accepts 1 %" in text
    # without per-position counters, a mean length near 1 with the low rate is the evidence
    text, level = _verdict(acceptance_rate=0.01, mean_acceptance_length=1.02)
    assert level == "bad" and DRAFTER_MISMATCH in text
    # ... and a low rate with a healthy mean length is not
    text, _ = _verdict(acceptance_rate=0.03, mean_acceptance_length=2.9, k=64)
    assert DRAFTER_MISMATCH not in text and "k=64" in text


def test_thin_evidence_gives_a_hint_not_a_verdict() -> None:
    mismatch = (0.01, 0.0)
    text, level = _verdict(
        acceptance_rate=0.005, mean_acceptance_length=1.01, drafts=12.0, per_position=mismatch
    )
    assert text.startswith("hint: ") and level == "warn" and "over 12 drafts" in text
    roof = BandwidthView(bandwidth_term=2.0, ceiling_baseline_tok_s=30.0, ceiling_spec_tok_s=60.0)
    text, level = _verdict(drafts=8.0, bandwidth=roof)
    assert text.startswith("hint: MTP is paying off") and level == "good"
    text, _ = _verdict(drafts=500.0, bandwidth=roof)
    assert text.startswith("MTP is paying off")


def test_ab_between_two_models_says_so_with_benchs_rule_and_guesses_nothing() -> None:
    models = ("google/gemma-4-26B-A4B-it", "google/gemma-4-E4B-it")
    warnings = ab_warnings([0.1, 0.1, 0.1], method="MTP", race=False, models=models, tokens=(300, 300))
    bench = arm_warnings({"a": {"model": models[0]}, "b": {"model": models[1]}})
    assert len(warnings) == 1 and warnings[0].replace(" · ", ": ", 1) == bench[0]
    assert "compares two models" in warnings[0] and MTP_SLOWER not in warnings[0]
    # even while speculation looks faster: the ratio compares models either way
    assert ab_warnings([3.0], method=None, race=False, models=models)


def test_ab_slower_names_its_evidence_and_is_a_hint_on_few_prompts() -> None:
    same = ("m", "m")
    (one,) = ab_warnings([0.8], method="MTP", race=False, models=same, tokens=(300, 310))
    assert one.startswith("hint: MTP is slower here (1 prompt)") and "roofline" in one
    (short,) = ab_warnings([0.8, 0.7, 0.9], method="MTP", race=False, models=same, tokens=(9, 8))
    assert short.startswith("MTP is slower here") and "short answers (8 tokens)" in short
    assert ab_warnings([1.5, 1.6, 1.4], method="MTP", race=False, models=same) == ()
    assert ab_warnings([0.5, 0.5, 0.5], method="MTP", race=True, models=same) == ()


def test_the_per_position_bars_keep_one_column_past_position_9() -> None:
    rows = Content.from_markup(render_bars(HEALTHY_64[:12], (), window="10 s")).plain.split("\n")[1:]
    columns = {row.index("%") for row in rows}
    assert len(rows) == 12 and rows[8].startswith("pos  9 ") and rows[9].startswith("pos 10 ")
    assert len(columns) == 1, rows  # the percentages line up


def test_ab_arms_puts_the_speculating_arm_over_the_baseline_whichever_it_is() -> None:
    def view(label: str, speculative: bool | None, method: str | None = None) -> ServerView:
        return ServerView(
            label=label, url="http://127.0.0.1:1", status="up", speculative=speculative, method=method
        )

    assert ab_arms([view("A", False), view("B", True, "mtp")]) == (0, 1, "MTP")
    assert ab_arms([view("A", True, "mtp"), view("B", False)]) == (1, 0, "MTP")
    assert ab_arms([view("A", True, "mtp"), view("B", True, "mtp")]) == (0, 1, None)
    assert ab_arms([None, view("B", True)]) == (0, 1, None)
