"""PrometheusSource on answers a real Prometheus gives in the awkward cases: several engines per
instance, no per-position series (older vLLM), a stale series, a target that is down, bad input.

The happy path against a real Prometheus is tests/real_prometheus/test_prometheus_fleet.py; here canned API
answers (the JSON shape of /api/v1/query) cover what that setup cannot produce on demand.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mtpwatch.core.sources.prometheus import PrometheusError, PrometheusSource, check_selector, promql_queries

NOW = 1_800_000_000.0


def vec(*items: tuple[dict[str, str], float]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": m, "value": [NOW, str(v)]} for m, v in items]},
    }


def lbl(instance: str, engine: str | None = "0", **extra: str) -> dict[str, str]:
    out = {"instance": instance, "model_name": "m", **extra}
    if engine is not None:
        out["engine"] = engine
    return out


A, B, C = "10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"


def answers(query: str) -> dict[str, Any]:
    if query.startswith("max by") and "timestamp" in query:
        name = {"name": "vllm:spec_decode_num_drafts_total"}
        return vec(
            (lbl(A, "0", **name), NOW - 1), (lbl(A, "1", **name), NOW - 1),
            (lbl(B, **name), NOW - 2), (lbl(C, **name), NOW - 400),
        )  # fmt: skip
    if query.startswith("up"):
        return vec(({"instance": A, "job": "vllm"}, 1), ({"instance": B, "job": "vllm"}, 1))
    if "increase" in query:
        if "per_pos" in query:  # only A's engines have the per-position series
            return vec(
                (lbl(A, "0", position="0"), 80), (lbl(A, "0", position="1"), 40),
                (lbl(A, "1", position="0"), 90), (lbl(A, "1", position="1"), 60),
            )  # fmt: skip
        if "draft_tokens" in query:
            return vec((lbl(A, "0"), 200), (lbl(A, "1"), 200), (lbl(B), 600))
        if "accepted_tokens_total" in query:
            return vec((lbl(A, "0"), 120), (lbl(A, "1"), 150), (lbl(B), 300))
        if "drafts_total" in query:
            return vec((lbl(A, "0"), 100), (lbl(A, "1"), 100), (lbl(B), 150))
        if "generation_tokens" in query:
            return vec((lbl(A, "0"), 220), (lbl(A, "1"), 250), (lbl(B), 450))
    if "num_requests_running" in query:
        return vec((lbl(A, "0"), 1), (lbl(A, "1"), 2), (lbl(B), 3))
    return vec()


def transport(seen: list[str]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        seen.append(query)
        return httpx.Response(200, json=answers(query))

    return httpx.MockTransport(handle)


async def test_engines_missing_positions_and_stale_series() -> None:
    seen: list[str] = []
    source = PrometheusSource("http://prom:9090", selector='{job="vllm"}', transport=transport(seen))
    try:
        rows = await source.rows(30.0, at=NOW)
    finally:
        await source.aclose()
    by = {(r.source, r.engine): r for r in rows}
    assert set(by) == {(A, "0"), (A, "1"), (B, "0"), (C, "0")}
    a0, a1, b, c = by[(A, "0")], by[(A, "1")], by[(B, "0")], by[(C, "0")]
    # several engines per instance: one row each, named by engine
    assert a0.name == "10.0.0.1:8000 e0" and a1.engines_on_source == 2
    assert a0.acceptance == pytest.approx(120 / 200) and a0.mean_length == pytest.approx(1 + 120 / 100)
    assert a0.per_position == pytest.approx((0.8, 0.4)) and a0.k == 2
    assert a0.decode_tok_s == pytest.approx(220 / 30) and a0.running == 1
    # no per-position series: acceptance still there, k estimated, the row says so
    assert b.per_position == () and b.k == 4 and b.acceptance == pytest.approx(0.5)
    assert "no per-position series" in b.reason
    # a series whose newest sample is 400 s old
    assert c.state == "stale" and "400 s old" in c.reason
    assert all('job="vllm"' in q for q in seen if not q.startswith("up"))


def test_selector_checks_and_queries() -> None:
    assert check_selector('{job="vllm"}') == 'job="vllm"'
    assert check_selector('job="vllm", env!~"dev.*"') == 'job="vllm", env!~"dev.*"'
    assert check_selector("") == ""
    for bad in ("job=vllm", "{job='vllm'}", '{job="a"} or up'):
        with pytest.raises(ValueError, match="not a PromQL label selector"):
            check_selector(bad)
    q = promql_queries(90.0, '{job="vllm"}')
    assert q["drafts"] == (
        'sum by (instance, model_name, engine) (increase({__name__=~"vllm:spec_decode_num_drafts_total|'
        'llamacpp:spec_decode_num_drafts_total", job="vllm"}[90s]))'
    )
    assert "[1500ms]" in promql_queries(1.5)["tok_s"]


async def test_prometheus_errors_are_one_line() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "parse error"})

    source = PrometheusSource("http://prom:9090", transport=httpx.MockTransport(refuse))
    with pytest.raises(PrometheusError, match=r"refused the query \(400\): parse error"):
        await source.rows(10.0)
    await source.aclose()

    def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>")

    source = PrometheusSource("http://prom:9090", transport=httpx.MockTransport(html))
    with pytest.raises(PrometheusError, match="without JSON"):
        await source.rows(10.0)
    await source.aclose()
