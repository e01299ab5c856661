"""Counters move as vLLM's do: identities that must hold after any traffic."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx

from mtpwatch.sim.harness import running_sim


async def _run_some(url: str, sse: Any, n: int, max_tokens: int) -> list[int]:
    bodies = [
        {
            "prompt": f"Question {i}: explain memory bandwidth",
            "max_tokens": max_tokens,
            "temperature": 0,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        }
        for i in range(n)
    ]
    results = await asyncio.gather(*(sse(url, "/v1/completions", b) for b in bodies))
    return [events[-2]["usage"]["completion_tokens"] for events in results]


async def test_spec_identities_after_concurrent_traffic(sse: Any, metrics_tools: Any) -> None:
    async with running_sim(preset="gemma4-31b-h100", speed=50.0) as url:
        completions = await _run_some(url, sse, n=3, max_tokens=60)
        page = await metrics_tools.scrape(url)
    v = metrics_tools.value
    drafts = v(page, "vllm:spec_decode_num_drafts_total")
    draft_tokens = v(page, "vllm:spec_decode_num_draft_tokens_total")
    accepted = v(page, "vllm:spec_decode_num_accepted_tokens_total")
    name = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    per_pos = [v(page, name, position=str(i)) for i in range(8)]
    assert drafts > 0
    assert draft_tokens == 8 * drafts
    assert sum(per_pos) == accepted
    assert all(a >= b for a, b in itertools.pairwise(per_pos))
    assert v(page, "vllm:generation_tokens_total") == sum(completions) == 180
    assert v(page, "vllm:request_success_total", finished_reason="length") == 3
    assert v(page, "vllm:prompt_tokens_total") == v(page, "vllm:request_prompt_tokens_sum")
    # one ITL observation per request per step after the first; one TTFT per request
    assert v(page, "vllm:inter_token_latency_seconds_count") == drafts
    assert v(page, "vllm:time_to_first_token_seconds_count") == 3
    assert v(page, "vllm:e2e_request_latency_seconds_count") == 3
    # iteration tokens: prompt + generated of every step
    assert v(page, "vllm:iteration_tokens_total_sum") == v(page, "vllm:prompt_tokens_total") + 180
    assert v(page, "vllm:num_requests_running") == 0


async def test_baseline_has_no_spec_counters_and_one_token_per_step(sse: Any, metrics_tools: Any) -> None:
    async with running_sim(spec=False, speed=50.0) as url:
        await _run_some(url, sse, n=1, max_tokens=20)
        page = await metrics_tools.scrape(url)
    assert not any(name.startswith("vllm:spec_decode") for name, _ in page)
    v = metrics_tools.value
    assert v(page, "vllm:generation_tokens_total") == 20
    assert v(page, "vllm:inter_token_latency_seconds_count") == 19


async def test_running_gauge_and_kv_usage_during_a_stream(metrics_tools: Any) -> None:
    body = {
        "prompt": "long answer please",
        "max_tokens": 2000,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    async with (
        running_sim(speed=5.0) as url,
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", url + "/v1/completions", json=body) as resp,
    ):
        seen = 0
        async for line in resp.aiter_lines():
            if line.startswith("data: "):
                seen += 1
            if seen >= 3:
                break
        page = await metrics_tools.scrape(url)
    v = metrics_tools.value
    assert v(page, "vllm:num_requests_running") == 1
    assert 0 < v(page, "vllm:kv_cache_usage_perc") < 1


async def test_batching_shares_steps(sse: Any, metrics_tools: Any) -> None:
    """Concurrent requests decode in the same steps: iteration histogram sees >1 request per step."""
    async with running_sim(spec=False, speed=50.0) as url:
        await _run_some(url, sse, n=4, max_tokens=30)
        page = await metrics_tools.scrape(url)
    v = metrics_tools.value
    steps = v(page, "vllm:iteration_tokens_total_count")
    # 4 × 30 tokens in far fewer than 120 steps, because requests share steps
    assert steps < 120
    assert v(page, "vllm:generation_tokens_total") == 120
