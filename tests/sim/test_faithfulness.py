"""The simulator's served /metrics page and SSE chunks against the real vLLM 0.32 captures, automatically.

test_metrics_format.py and test_endpoints.py compare a freshly rendered page and a few chosen chunks;
this compares the page a running simulator serves after requests, family by family (TYPE, HELP,
sample names including `_created`, label names, `le` boundaries), and the set of distinct chunk
shapes of whole streams, key by key.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mtpwatch.sim.harness import running_sim
from tests.datadir import DataDir

FAST = {"speed": 50.0}


def _families(text: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("vllm:"):
            continue
        labels: dict[str, set[tuple[str, ...]]] = {}
        les: set[float] = set()
        for s in family.samples:
            labels.setdefault(s.name, set()).add(tuple(sorted(s.labels)))
            if "le" in s.labels:
                les.add(float(s.labels["le"]))
        out[family.name] = {"type": family.type, "help": family.documentation, "labels": labels, "le": les}
    return out


def _one_two_five(limit: int) -> set[float]:
    """vLLM's build_1_2_5_buckets(limit) plus +Inf."""
    out: set[float] = {float("inf")}
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > limit:
                return out
            out.add(float(value))
        exponent += 1


async def _served_page(**options: Any) -> tuple[str, int]:
    async with (
        running_sim(served_model_name="spec", k=4, **options, **FAST) as url,
        httpx.AsyncClient(timeout=30) as client,
    ):
        for path, body in (
            ("/v1/completions", {"prompt": "The quick brown fox", "max_tokens": 24, "ignore_eos": True}),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 16}),
        ):
            resp = await client.post(url + path, json=body)
            assert resp.status_code == 200, resp.text
        card = (await client.get(url + "/v1/models")).json()["data"][0]
        page = (await client.get(url + "/metrics")).text
    return page, int(card["max_model_len"])


async def test_served_metrics_page_matches_real_page_family_by_family(data: DataDir) -> None:
    page, max_model_len = await _served_page()
    real = _families(data.text("metrics-ngram-k4-after.txt"))
    sim = _families(page)
    assert sorted(sim) == sorted(real), "families missing or extra in the simulator"
    real_max_model_len = 2048  # the capture's server ran with --max-model-len 2048
    for name, want in real.items():
        got = sim[name]
        assert got["type"] == want["type"], name
        assert got["help"] == want["help"], name
        assert set(got["labels"]) == set(want["labels"]), f"{name}: sample names (_created, _bucket, …)"
        for sample, label_sets in want["labels"].items():
            if name == "vllm:cache_config_info":
                # vLLM writes every CacheConfig field as a label; the simulator keeps the useful subset.
                assert all(set(s) <= set(r) for s in got["labels"][sample] for r in label_sets)
            else:
                assert got["labels"][sample] == label_sets, f"{sample}: label names"
        if want["le"] == _one_two_five(real_max_model_len):
            # vLLM sizes these from max_model_len; the simulator's preset serves a longer context.
            assert got["le"] == _one_two_five(max_model_len), f"{name}: le"
        else:
            assert got["le"] == want["le"], f"{name}: le"


def _fixture_events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def _shape(value: Any) -> Any:
    """Keys and value types, recursively (lists by their first element); values themselves dropped."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value and isinstance(value[0], dict) else "list" if value else "[]"
    if isinstance(value, bool) or value is None:
        return repr(value) if value is None else "bool"
    return "number" if isinstance(value, int | float) else type(value).__name__


def _shapes(events: list[dict[str, Any]], drop_usage: bool = False) -> set[str]:
    out = set()
    for event in events:
        if drop_usage and event.get("choices"):
            event = {k: v for k, v in event.items() if k != "usage"}
        out.add(json.dumps(_shape(event), sort_keys=True))
    return out


async def _stream(url: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", url + path, json={**body, "stream": True}) as resp,
    ):
        assert resp.status_code == 200
        return [json.loads(line[6:]) async for line in resp.aiter_lines() if line.startswith("data: {")]


CASES = [
    ("sse-ngram-k4-completions.txt", "/v1/completions", True, {"prompt": "The quick brown fox"}),
    (
        "sse-ngram-k4-chat.txt",
        "/v1/chat/completions",
        True,
        {"messages": [{"role": "user", "content": "hi"}]},
    ),
    ("sse-baseline-completions.txt", "/v1/completions", False, {"prompt": "The quick brown fox"}),
    ("sse-baseline.txt", "/v1/chat/completions", False, {"messages": [{"role": "user", "content": "hi"}]}),
]


@pytest.mark.parametrize(("fixture", "path", "spec", "body"), CASES, ids=[c[0] for c in CASES])
async def test_stream_chunk_shapes_match_real_capture(
    fixture: str, path: str, spec: bool, body: dict[str, Any], data: DataDir
) -> None:
    real = _fixture_events(data.text(fixture))
    request = {**body, "max_tokens": 30, "temperature": 0, "stream_options": {"include_usage": True}}
    async with running_sim(spec=spec, **FAST) as url:
        events = await _stream(url, path, request)
        continuous = await _stream(
            url,
            path,
            {**request, "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
        )
    assert _shapes(events) == _shapes(real)
    # Continuous usage (no real capture): the same chunks, each with a cumulative `usage` object.
    assert _shapes(continuous, drop_usage=True) == _shapes(real)
    usage_shape = _shape(real[-1]["usage"])
    assert all(_shape(e["usage"]) == usage_shape for e in continuous)
    totals = [e["usage"]["completion_tokens"] for e in continuous]
    assert totals == sorted(totals) and totals[-1] == continuous[-1]["usage"]["completion_tokens"] > 0
