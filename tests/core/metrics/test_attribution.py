"""`prompt_acceptance`: the one rule for which acceptance a prompt gets, on hand-made cases."""

from __future__ import annotations

import pytest

from mtpwatch.core.http.engines import LlamaTimings
from mtpwatch.core.http.generation import RequestSpecMetrics
from mtpwatch.core.metrics.attribution import (
    LLAMACPP_REQUEST_SCOPE,
    PER_REQUEST_SCOPE,
    prompt_acceptance,
)
from mtpwatch.core.metrics.rates import Rates, delta_rates
from mtpwatch.core.metrics.snapshot import MetricsSnapshot


def counters() -> Rates:
    """Counter deltas of a window: 100 drafts of k=2, 200 draft tokens, 120 accepted (60 %)."""
    before = MetricsSnapshot(
        schema="vllm", speculative=True, num_speculative_tokens=2, accepted_per_pos=(0, 0)
    )
    after = MetricsSnapshot(
        schema="vllm",
        speculative=True,
        num_speculative_tokens=2,
        drafts=100,
        draft_tokens=200,
        accepted=120,
        accepted_per_pos=(70, 50),
        generation_tokens=220,
    )
    return delta_rates(before, after, 2.0, "prompt")


RATES = counters()
# 10 verify steps of k=2: 2 accepted none, 3 one, 5 both → 13 of 20 accepted (65 %), τ = 2.3.
PER_REQUEST = RequestSpecMetrics(
    num_spec_steps=10, num_draft_tokens=20, num_accepted_draft_tokens=13, num_spec_tokens=2,
    acceptance_histogram=(2, 3, 5),
)  # fmt: skip
# llama-server: 40 drafted, 30 accepted (75 %).
TIMINGS = LlamaTimings(predicted_n=64, draft_n=40, draft_n_accepted=30)


def test_counters_alone_are_this_request() -> None:
    acc = prompt_acceptance(counters=RATES, scope="this request")
    assert acc.source == "counters" and acc.scope == "this request"
    assert acc.acceptance_rate == pytest.approx(0.6)
    assert acc.mean_acceptance_length == pytest.approx(2.2)
    assert acc.per_position == pytest.approx((0.7, 0.5))
    assert acc.drafts == 100


def test_other_traffic_makes_the_counters_engine_wide() -> None:
    acc = prompt_acceptance(counters=RATES, scope="engine-wide")
    assert acc.source == "counters" and acc.scope == "engine-wide"
    assert acc.acceptance_rate == pytest.approx(0.6)


def test_vllm_per_request_metrics_beat_the_counters_and_the_traffic() -> None:
    for scope in ("this request", "engine-wide"):
        acc = prompt_acceptance(counters=RATES, scope=scope, per_request=PER_REQUEST)
        assert acc.source == "vllm per-request" and acc.scope == PER_REQUEST_SCOPE
        assert acc.acceptance_rate == pytest.approx(0.65)
        assert acc.mean_acceptance_length == pytest.approx(2.3)
        assert acc.per_position == pytest.approx((0.8, 0.5))
        assert acc.per_position_conditional == pytest.approx((0.8, 0.625))
        assert acc.drafts == 10


def test_per_request_metrics_beat_llama_timings_too() -> None:
    acc = prompt_acceptance(counters=RATES, scope="this request", per_request=PER_REQUEST, timings=TIMINGS)
    assert acc.source == "vllm per-request"


def test_llama_timings_give_the_rate_and_the_lone_window_the_rest() -> None:
    acc = prompt_acceptance(counters=RATES, scope="this request", timings=TIMINGS)
    assert acc.source == "llama.cpp timings" and acc.scope == LLAMACPP_REQUEST_SCOPE
    assert acc.acceptance_rate == pytest.approx(0.75)
    assert acc.mean_acceptance_length == pytest.approx(2.2)  # the counters: nothing else ran
    assert acc.drafts == 100


def test_llama_timings_beside_other_traffic_leave_the_rest_unknown() -> None:
    acc = prompt_acceptance(counters=RATES, scope="engine-wide", timings=TIMINGS)
    assert acc.source == "llama.cpp timings"
    assert acc.acceptance_rate == pytest.approx(0.75)
    assert acc.mean_acceptance_length is None and acc.per_position == () and acc.drafts is None


def test_llama_timings_without_drafts_fall_back_to_the_counters() -> None:
    no_drafts = LlamaTimings(predicted_n=64)
    acc = prompt_acceptance(counters=RATES, scope="this request", timings=no_drafts)
    assert acc.source == "counters" and acc.acceptance_rate == pytest.approx(0.6)


def test_nothing_known() -> None:
    acc = prompt_acceptance(counters=None, scope="engine-wide")
    assert acc.source == "none" and acc.acceptance_rate is None and acc.drafts is None
