"""`vllm bench serve`'s per-request figures: percentiles, TPOT, ITL, request throughput."""

from __future__ import annotations

import random
import statistics

import pytest

from mtpwatch.core.ab.latency import PERCENTILES, percentile, summarize_latency
from mtpwatch.core.ab.plan import Point
from mtpwatch.core.ab.records import RequestTiming, RunRecord
from mtpwatch.core.ab.runlog import record_from_json, record_to_json
from mtpwatch.core.http.generation import GenerationStats, StreamEvent


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 1001])
def test_percentile_is_numpys_linear_method(n: int) -> None:
    rng = random.Random(n)
    xs = [rng.lognormvariate(0, 1) for _ in range(n)]
    if n >= 2:  # statistics' 'inclusive' method is numpy.percentile's default ('linear')
        cuts = statistics.quantiles(xs, n=100, method="inclusive")
        for p in (1, 25, 50, 90, 99):
            assert percentile(xs, p) == pytest.approx(cuts[p - 1], rel=1e-12)
    assert percentile(xs, 50) == pytest.approx(statistics.median(xs), rel=1e-12)
    assert percentile(xs, 0) == min(xs) and percentile(xs, 100) == max(xs)
    with pytest.raises(ValueError):
        percentile([], 50)


def _rec(
    run: int, *requests: RequestTiming, warmup: bool = False, wall: float = 1.0, errors: int = 0
) -> RunRecord:
    return RunRecord(
        "a", "p", "c", Point(len(requests) + errors, None), run, warmup, run, sum(q.tokens for q in requests),
        None, None, None, wall, errors, "boom" if errors else None, False, requests=requests,
    )  # fmt: skip


def test_summary_follows_vllm_definitions() -> None:
    # TPOT = (e2el - ttft)/(tokens - 1) per request; a 1-token request has none (vLLM skips it).
    q1 = RequestTiming(tokens=11, ttft_s=0.1, e2el_s=1.1, itl_s=(0.2, 0.3, 0.5))
    q2 = RequestTiming(tokens=5, ttft_s=0.2, e2el_s=0.6, itl_s=(0.1, 0.3))
    q3 = RequestTiming(tokens=1, ttft_s=0.3, e2el_s=0.3)
    warm = RequestTiming(tokens=3, ttft_s=9.0, e2el_s=19.0, itl_s=(5.0,))
    records = [
        _rec(0, warm, warmup=True, wall=19.0),
        _rec(1, q1, wall=1.2),
        _rec(2, q2, q3, wall=0.8, errors=1),  # concurrency 3, one request failed
    ]
    s = summarize_latency(records)
    assert s is not None
    assert s.completed == 3 and s.duration_s == pytest.approx(2.0)
    assert s.request_throughput == pytest.approx(1.5)  # completed / Σ wall of measured runs
    assert s.tpot is not None and s.tpot.n == 2
    assert s.tpot.mean == pytest.approx((0.1 + 0.1) / 2)
    assert s.ttft is not None and s.ttft.n == 3 and s.ttft.at(50) == pytest.approx(0.2)
    assert s.itl is not None and s.itl.n == 5  # every gap of every request, pooled; no warm-up
    assert s.itl.at(50) == pytest.approx(0.3) and s.itl.at(99) == pytest.approx(
        percentile([0.2, 0.3, 0.5, 0.1, 0.3], 99)
    )
    js = s.to_json()
    assert js["tpot_ms"]["mean"] == pytest.approx(100.0) and set(js["ttft_ms"]) == {"n", "mean"} | {
        f"p{p}" for p in PERCENTILES
    }
    assert summarize_latency([_rec(0, q1, warmup=True)]) is None


def test_old_logs_without_timings_still_count_requests() -> None:
    old = RunRecord("a", "p", "c", Point(), 1, False, 0, 8, 0.1, 50.0, 40.0, 0.5, 0, None, False)
    s = summarize_latency([old])
    assert s is not None and s.completed == 1 and s.request_throughput == pytest.approx(2.0)
    assert s.ttft is None and s.tpot is None and s.itl is None


def test_run_log_keeps_the_timings() -> None:
    q = RequestTiming(tokens=4, ttft_s=0.05, e2el_s=0.2, itl_s=(0.05, 0.04, 0.06))
    back = record_from_json(record_to_json(_rec(1, q)))
    assert back.requests == (q,)


def test_generation_stats_keep_the_gap_between_output_chunks() -> None:
    stats = GenerationStats(clock=lambda: 0.0)
    stats.start(0.0)
    for t, out in ((0.1, False), (0.5, True), (0.7, True), (1.2, True)):  # a role-only chunk first
        stats.add(StreamEvent(t=t, text="x" if out else "", tokens=int(out), completion_tokens=0, output=out))
    result = stats.finish(t=1.3)
    assert result.itl_s == pytest.approx((0.2, 0.5))
    assert result.ttft_s == pytest.approx(0.5)
