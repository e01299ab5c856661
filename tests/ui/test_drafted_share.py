"""Dynamic k made visible: the share of decode steps that drafted, from vLLM's counters, in the panel."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.metrics.rates import delta_rates
from mtpwatch.core.metrics.snapshot import parse_snapshot
from mtpwatch.session.views import ServerView, dynamic_k, mixed_lengths
from mtpwatch.ui.markup.panel import render_bars, render_numbers

DATA = Path(__file__).resolve().parents[1] / "data"


def test_the_real_ngram_server_drafted_on_three_quarters_of_its_steps() -> None:
    """vLLM 0.32 CPU, ngram k=4, one 256-token answer: 51 drafts over 69 ITL observations — the
    steps whose prompt had no n-gram match drafted nothing."""
    before = parse_snapshot((DATA / "metrics-ngram-k4-before.txt").read_text(encoding="utf-8"))
    after = parse_snapshot((DATA / "metrics-ngram-k4-after.txt").read_text(encoding="utf-8"))
    r = delta_rates(before, after, 10.0, "10 s")
    assert r.drafted_share == pytest.approx(51 / 69) == F.drafted_share(51, 69)
    assert F.drafted_share(3, 0) is None
    base = parse_snapshot((DATA / "metrics-baseline-after.txt").read_text(encoding="utf-8"))
    assert delta_rates(base, base, 10.0, "10 s").drafted_share is None  # no speculation, no share


def _view(**kw: object) -> ServerView:
    fields: dict[str, object] = {
        "label": "A", "url": "http://127.0.0.1:1", "status": "up", "speculative": True, "k": 4,
        "acceptance_rate": 0.6, "mean_acceptance_length": 2.5, "drafts": 300.0,
        "per_position": (0.8, 0.6, 0.4, 0.2), "per_position_conditional": (0.8, 0.75, 0.67, 0.5),
    }  # fmt: skip
    fields.update(kw)
    return ServerView(**fields)  # type: ignore[arg-type]


def test_the_panel_says_how_many_steps_drafted_under_a_schedule() -> None:
    sched = ((1, 2, 4), (3, 8, 2), (9, 64, 0))
    view = _view(drafted_share=0.23, k_schedule=sched, mean_draft_len=3.1)
    assert dynamic_k(view) and mixed_lengths(view)
    text = render_numbers(view, 160)
    assert "drafted on [b]23 %[/] of steps" in text and "(server, 10 s)" in text
    assert "k by batch size 1–2: k=4, 3–8: k=2, 9–64: k=0" in text
    bars = render_bars(
        view.per_position, view.per_position_conditional, window="10 s", mixed=mixed_lengths(view)
    )
    assert "denominator Δnum_drafts mixes draft lengths: later positions read low" in bars
    # a fixed k drafting on every step: nothing added
    plain = _view(drafted_share=1.0, mean_draft_len=4.0)
    assert not dynamic_k(plain) and "drafted on" not in render_numbers(plain, 160)
    assert "mixes draft lengths" not in render_bars(plain.per_position, plain.per_position_conditional)
    # no schedule, but a share below 99 %: shown; full-length drafts: the denominators do not mix
    ngram = _view(drafted_share=0.74, mean_draft_len=4.0)
    assert dynamic_k(ngram) and not mixed_lengths(ngram)
    assert "drafted on [b]74 %[/] of steps" in render_numbers(ngram, 160)
    # a schedule of k=0 and one k above 0 drafts full length: shown, not mixed
    assert not mixed_lengths(_view(drafted_share=0.5, k_schedule=((1, 1, 4), (2, 8, 0)), mean_draft_len=4.0))
    # llama.cpp has no ITL histogram; speculation off has no drafts
    assert not dynamic_k(_view(drafted_share=0.5, engine="llama.cpp"))
    assert not dynamic_k(_view(drafted_share=0.5, speculative=False))


def test_the_compact_panel_says_it_too() -> None:
    from mtpwatch.ui.markup.panel import compact_numbers

    view = _view(drafted_share=0.86, k_schedule=((1, 1, 4), (2, 8, 0)), mean_draft_len=4.0)
    assert "drafted [b]86 %[/]" in compact_numbers(view, 80)
    assert "k by batch size 1: k=4, 2–8: k=0" in render_numbers(view, 160)
    assert "drafted" not in compact_numbers(_view(drafted_share=1.0), 80)
