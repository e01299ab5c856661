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
    if query.startswith("max by") and 'timestamp({__name__="vllm:spec_decode_num_drafts_total"' in query:
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
        rows = (await source.read(30.0, at=NOW)).rows
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
    assert all('job="vllm"' in q for q in seen if not q.startswith(("up", "vector(time())")))


def test_selector_checks_and_queries() -> None:
    assert check_selector('{job="vllm"}') == 'job="vllm"'
    assert check_selector('job="vllm", env!~"dev.*"') == 'job="vllm", env!~"dev.*"'
    assert check_selector("") == ""
    for bad in ("job=vllm", "{job='vllm'}", '{job="a"} or up'):
        with pytest.raises(ValueError, match="not a PromQL label selector"):
            check_selector(bad)
    q = promql_queries(90.0, '{job="vllm"}')
    assert q["drafts"] == (
        "sum by (instance, model_name, engine, spec_method) "
        '(increase({__name__=~"vllm:spec_decode_num_drafts_total|'
        'llamacpp:spec_decode_num_drafts_total", job="vllm"}[90s]))'
    )
    assert "[1500ms]" in promql_queries(1.5)["tok_s"]


async def test_prometheus_errors_are_one_line() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "parse error"})

    source = PrometheusSource("http://prom:9090", transport=httpx.MockTransport(refuse))
    with pytest.raises(PrometheusError, match=r"refused the query \(400\): parse error"):
        await source.read(10.0)
    await source.aclose()

    def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>")

    source = PrometheusSource("http://prom:9090", transport=httpx.MockTransport(html))
    with pytest.raises(PrometheusError, match="without JSON"):
        await source.read(10.0)
    await source.aclose()


def store_answers(lag: float, interval: float, samples: float) -> httpx.MockTransport:
    """A store with a 15 s scrape interval, `lag` s behind (VictoriaMetrics: 30), whose newest samples
    are 10 s old at its own instant: A live, B restarted in the window, C seen an hour ago and gone."""
    store_t = NOW - lag

    def handle(request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        if query == "vector(time())":
            return httpx.Response(200, json=vec(({}, store_t)))
        if query.endswith("[600s]"):  # raw samples of one instance: a gap of `interval`, one late
            ts = [NOW - 600 + i * interval for i in range(int(600 // interval))]
            ts[5] += 3
            values = [[t, str(i)] for i, t in enumerate(ts)]
            return httpx.Response(
                200, json={"status": "success", "data": {"result": [{"metric": lbl(A), "values": values}]}}
            )
        if query.startswith("max(count_over_time"):
            return httpx.Response(200, json=vec(({}, samples)))
        if query.startswith("count by") and "per_pos" in query:
            return httpx.Response(200, json=vec((lbl(A), 3), (lbl(B), 3), (lbl(C), 2)))
        if query.startswith("count by"):
            return httpx.Response(200, json=vec((lbl(A), 1), (lbl(B), 1), (lbl(C), 1)))
        if query.startswith("sum by") and "resets(" in query:
            return httpx.Response(200, json=vec((lbl(A), 0), (lbl(B), 1)))
        if query.startswith("max by") and 'timestamp({__name__="vllm:spec_decode_num_drafts_total"' in query:
            name = {"name": "vllm:spec_decode_num_drafts_total"}
            return httpx.Response(
                200, json=vec((lbl(A, **name), store_t - 10), (lbl(B, **name), store_t - 10))
            )
        if query.startswith("up"):
            return httpx.Response(200, json=vec(({"instance": A}, 1), ({"instance": B}, 1)))
        if "increase" in query and "[60s]" in query:
            return httpx.Response(200, json=vec((lbl(A), 100), (lbl(B), 100)))
        return httpx.Response(200, json=vec())

    return httpx.MockTransport(handle)


@pytest.mark.parametrize("lag", [0.0, 30.0])
async def test_window_fits_the_store_and_ages_use_its_time(lag: float) -> None:
    source = PrometheusSource("http://store", transport=store_answers(lag, 15.0, 3))
    try:
        read = await source.read(10.0, at=NOW)
    finally:
        await source.aclose()
    by = {r.source: r for r in read.rows}
    # 10 s asked, 15 s scrape interval: the window is 4 intervals, and the view says so
    assert read.fit.window_s == 60.0 and read.fit.interval_s == 15.0
    assert any("window 60 s, not 10 s" in n for n in read.fit.notes)
    # 3 samples a series: 30 s of history for a 60 s window, flagged
    assert any("only 30 s of history for a 60 s window" in n for n in read.fit.notes)
    # a store 30 s behind (VictoriaMetrics's latency offset): live rows are not stale
    assert by[A].state == "up" and read.fit.lag_s == pytest.approx(lag)
    assert by[B].state == "restarted" and "reset" in by[B].reason
    # seen in the last hour, silent now: listed, not dropped, with its k
    assert by[C].state == "missing" and by[C].k == 2
    assert read.stats.queries >= 15 and read.stats.bytes > 0 and read.stats.series > 0
