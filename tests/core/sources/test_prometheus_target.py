"""One target read from Prometheus: the now and the history say the same of whether it speculates.

A llama-server that drafts exports no per-position series here; its drafted tokens say it speculates,
in a snapshot and in every point of its history alike (`snapshot.Fold`: a page's rule).
"""

from __future__ import annotations

from typing import Any

import httpx

from mtpwatch.core.sources.prometheus import PrometheusSource
from mtpwatch.core.sources.prometheus_target import target_history, target_snapshot

NOW = 1_800_000_000.0
LLAMA = {"__name__": "llamacpp:tokens_predicted_total"}
VALUES = {"draft_tokens": 300.0, "drafts": 100.0, "accepted": 150.0, "generation_tokens": 400.0}


def _key(query: str) -> str | None:
    """Which counter a query of `target_queries` asks for (by its llama.cpp sample name)."""
    names = {
        "draft_tokens": "num_draft_tokens",
        "drafts": "num_drafts_total",
        "accepted": "num_accepted_tokens_total",
    }
    if "tokens_predicted" in query and not query.startswith("count"):
        return "generation_tokens"
    return next((key for key, part in names.items() if part in query and "per_pos" not in query), None)


def _answer(request: httpx.Request) -> httpx.Response:
    query = request.url.params["query"]
    key = _key(query)
    if request.url.path.endswith("query_range"):
        steps = [NOW - 20.0, NOW - 10.0, NOW]
        result: list[dict[str, Any]] = (
            [{"metric": {}, "values": [[t, str(VALUES[key] * (i + 1) / 3)] for i, t in enumerate(steps)]}]
            if key
            else []
        )
        return httpx.Response(
            200, json={"status": "success", "data": {"resultType": "matrix", "result": result}}
        )
    if query.startswith("count by (__name__)"):
        result = [{"metric": LLAMA, "value": [NOW, "1"]}]
    else:
        result = [{"metric": {}, "value": [NOW, str(VALUES[key])]}] if key else []
    return httpx.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": result}})


async def test_a_drafting_llama_server_speculates_now_and_in_its_history() -> None:
    source = PrometheusSource("http://prom:9090", transport=httpx.MockTransport(_answer))
    try:
        now = await target_snapshot(source, "h:8080", None, None)
        history = await target_history(source, "h:8080", None, None, span_s=20.0, step_s=10.0, end=NOW)
    finally:
        await source.aclose()
    assert now.schema == "llamacpp" and now.speculative and now.draft_tokens == 300.0
    assert now.accepted_per_pos == ()
    assert [t for t, _ in history] == [NOW - 20.0, NOW - 10.0, NOW]
    assert all(snap.speculative and snap.draft_tokens > 0 for _, snap in history)
