"""The simulator's per-request speculative-decoding metrics (vLLM >= 0.27's response field)."""

from __future__ import annotations

import pytest

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest
from mtpwatch.sim.harness import running_sim


async def test_per_request_metrics_reconcile_with_the_counters() -> None:
    async with running_sim(speed=20, per_request_spec_metrics=True) as url:
        client = VllmClient(url)
        before = await client.scrape()
        result = await client.generate(GenerationRequest("Explain speculative decoding", max_tokens=64))
        after = await client.scrape()
        await client.aclose()
    spec = result.spec_metrics
    assert spec is not None and spec.num_spec_tokens == after.num_speculative_tokens
    # vLLM: summed over requests these reconcile with the aggregate counters (one request here)
    assert spec.num_spec_steps == after.drafts - before.drafts
    assert spec.num_draft_tokens == after.draft_tokens - before.draft_tokens
    assert spec.num_accepted_draft_tokens == after.accepted - before.accepted
    per_pos = [a - b for a, b in zip(after.accepted_per_pos, before.accepted_per_pos, strict=True)]
    assert spec.per_position == pytest.approx([p / spec.num_spec_steps for p in per_pos])
    assert sum(spec.acceptance_histogram) == spec.num_spec_steps


async def test_no_per_request_metrics_by_default() -> None:
    async with running_sim(speed=20) as url:
        client = VllmClient(url)
        result = await client.generate(GenerationRequest("hello", max_tokens=16))
        await client.aclose()
    assert result.error is None and not result.cancelled and result.spec_metrics is None
