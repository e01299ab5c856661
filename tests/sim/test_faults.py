"""Fault switches: cut streams, /metrics errors and delays, restart, exit."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from mtpwatch.sim.harness import running_sim


async def _read_stream(url: str, body: dict[str, Any]) -> tuple[list[str], BaseException | None]:
    lines: list[str] = []
    error: BaseException | None = None
    try:
        async with (
            httpx.AsyncClient(timeout=30) as client,
            client.stream("POST", url + "/v1/completions", json={**body, "stream": True}) as resp,
        ):
            async for line in resp.aiter_lines():
                if line.startswith("data: "):
                    lines.append(line)
    except httpx.HTTPError as exc:
        error = exc
    return lines, error


async def test_cut_stream_after_n_tokens_from_options() -> None:
    body = {
        "prompt": "x",
        "max_tokens": 100,
        "temperature": 0,
        "ignore_eos": True,
        "return_token_ids": True,
        "stream_options": {"include_usage": True},
    }
    async with running_sim(speed=50.0, cut_stream_after=10) as url:
        lines, error = await _read_stream(url, body)
        async with httpx.AsyncClient() as client:
            page = (await client.get(url + "/metrics")).text
    assert "data: [DONE]" not in lines
    import json

    tokens = sum(len(json.loads(line[6:])["choices"][0]["token_ids"]) for line in lines)
    assert tokens == 10
    assert error is not None  # connection dropped mid-body
    assert 'finished_reason="abort",model_name="google/gemma-4-E4B-it"} 1.0' in page


async def test_metrics_500_and_delay_via_endpoint() -> None:
    async with running_sim(speed=50.0) as url, httpx.AsyncClient() as client:
        r = await client.post(url + "/sim/fault", json={"metrics_500": True})
        assert r.json()["metrics_status"] == 500
        assert (await client.get(url + "/metrics")).status_code == 500
        await client.post(url + "/sim/fault", json={"clear": True, "metrics_delay_s": 5})
        with pytest.raises(httpx.ReadTimeout):
            await client.get(url + "/metrics", timeout=0.3)
        await client.post(url + "/sim/fault", json={"clear": True})
        assert (await client.get(url + "/metrics")).status_code == 200
        bad = await client.post(url + "/sim/fault", json={"cut_stream_after": "many"})
        assert bad.status_code == 400


async def test_restart_resets_counters_and_created(sse: Any) -> None:
    body = {"prompt": "x", "max_tokens": 20, "temperature": 0, "ignore_eos": True}
    async with running_sim(speed=50.0) as url, httpx.AsyncClient() as client:
        await sse(url, "/v1/completions", body)
        before = (await client.get(url + "/metrics")).text
        await client.post(url + "/sim/fault", json={"restart": True})
        for _ in range(200):  # event-driven enough: the restart is a few event-loop turns
            after = (await client.get(url + "/metrics")).text
            if after != before and "generation_tokens_total" in after:
                break
            await asyncio.sleep(0.01)
    line = 'vllm:generation_tokens_total{engine="0",model_name="google/gemma-4-E4B-it"}'
    assert f"{line} 20.0" in before
    assert f"{line} 0.0" in after

    def created(text: str) -> str:
        return next(x for x in text.splitlines() if x.startswith("vllm:generation_tokens_created"))

    assert created(before) != created(after)


async def test_exit_closes_server() -> None:
    async with running_sim(speed=50.0) as url, httpx.AsyncClient() as client:
        r = await client.post(url + "/sim/fault", json={"exit": True})
        assert r.json()["exit"] is True
        for _ in range(400):
            try:
                await client.get(url + "/health", timeout=0.5)
            except httpx.TransportError:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(httpx.TransportError):
            await client.get(url + "/health", timeout=0.5)
