"""`vllm bench forward --output-json` as the advisor's step-time table (`core.sweeps.forward`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpwatch.core.sweeps.advisor import KMeasure, advise_sweep, fit_ratios
from mtpwatch.core.sweeps.forward import ForwardError, load_forward, parse_forward, steps_at

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "vllm-bench-forward.json"


def test_the_forward_table_gives_step_ratios_per_batch() -> None:
    table = load_forward(FIXTURE)
    assert {s.batch for s in table.steps} == {1, 4}
    assert table.skipped == ("prefill",)  # a prefill is no decode step
    ratios = table.ratios(1)
    assert sorted(ratios) == [1, 2, 3, 4]
    assert ratios[2] == pytest.approx(7051.9 / 6120.5)
    assert steps_at(table, (1, 4)) == (1, ratios)  # the sweep's smallest concurrency
    assert steps_at(table, (3,))[0] == 4 and steps_at(table, (2,))[0] == 1  # nearest, ties to smaller
    assert steps_at(table, (4,))[1] == {2: pytest.approx(7702.6 / 6409.0)}


def test_the_advisor_predicts_from_the_forward_table() -> None:
    table = load_forward(FIXTURE)
    fit = fit_ratios(table.ratios(1), 100.0, "vllm bench forward x, batch 1")
    assert fit.kind == "linear" and fit.measured[3] == pytest.approx(7517.3 / 6120.5)
    marginal = (0.9, 0.8, 0.7, 0.6)
    advice = advise_sweep([KMeasure(1, 1.6, 1.9)], marginal[:1], 100.0, range(4), step_fit=fit)
    # τ(k') from the acceptance, t(k') from the forward table: k=1's speed-up is τ(1) / ρ(1)
    assert advice.at(1) is not None and advice.at(1).speedup == pytest.approx(1.9 / fit.ratio(1))  # type: ignore[union-attr]
    assert (
        advice.fit is fit and advice.serving_fit is not None and advice.serving_fit.source == "serving runs"
    )
    assert advice.held_out == {}  # every step time is out of sample already
    doc = advice.to_json()
    assert (
        doc["step_times_from"] == "vllm bench forward x, batch 1"
        and doc["serving_fit"]["kind"] == "two-point"
    )
    assert "step model from vllm bench forward x, batch 1" in advice.line()


def test_not_forward_output(tmp_path: Path) -> None:
    with pytest.raises(ForwardError, match="not `vllm bench forward"):
        parse_forward({"cases": []})
    with pytest.raises(ForwardError, match="no decode/verify case"):
        parse_forward([{"case": "p", "requests": [{"query_len": 64, "kv_len": 64}], "median_us": 9.0}])
    only_k = [
        {"case": "v", "requests": [{"query_len": 3, "kv_len": 99, "num_draft_tokens": 2}], "median_us": 9.0}
    ]
    with pytest.raises(ForwardError, match="no k=0 case"):
        steps_at(parse_forward(only_k), (1,))
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ForwardError):
        load_forward(bad)
    mixed = json.loads(FIXTURE.read_text(encoding="utf-8"))[:1]
    mixed[0]["requests"] = [*mixed[0]["requests"], {"query_len": 3, "kv_len": 99, "num_draft_tokens": 2}]
    with pytest.raises(ForwardError):  # drafts of two lengths in one step: not one k
        parse_forward(mixed)
