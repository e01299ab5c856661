"""Helpers for the simulator tests: SSE streaming and /metrics parsing through httpx."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

SseFn = Callable[..., Awaitable[list[Any]]]


async def _sse(url: str, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> list[Any]:
    """POST a streaming request; return the decoded `data:` events ('[DONE]' kept as a string)."""
    events: list[Any] = []
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream("POST", url + path, json={**body, "stream": True}, headers=headers) as resp,
    ):
        assert resp.status_code == 200, await resp.aread()
        assert resp.headers["content-type"].startswith("text/event-stream")
        async for line in resp.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


@pytest.fixture
def sse() -> SseFn:
    return _sse


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition page keyed by (name, sorted labels)."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


async def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with httpx.AsyncClient(timeout=30) as client:
        resp = await client.get(url + "/metrics")
        resp.raise_for_status()
        return samples(resp.text)


def value(page: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    """Sum of the samples called `name` whose labels include `labels`."""
    total = 0.0
    found = False
    for (n, lbls), v in page.items():
        if n == name and all(dict(lbls).get(k) == want for k, want in labels.items()):
            total += v
            found = True
    assert found, f"no sample {name} {labels}"
    return total


@pytest.fixture
def metrics_tools() -> Any:
    class Tools:
        scrape = staticmethod(scrape)
        value = staticmethod(value)
        samples = staticmethod(samples)

    return Tools
