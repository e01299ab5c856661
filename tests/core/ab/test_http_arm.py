"""HttpArm through the real client and metrics parser, against a captured vLLM 0.32 stream.

The transport replays `tests/data/sse-ngram-k4-completions.txt` (real vLLM, ngram k=4) for every
completion and serves a /metrics page whose counters advance by the captured run's deltas
(51 drafts, 204 draft tokens, 192 accepted, 48 per position) per completion.
"""

from __future__ import annotations

import json

import httpx
import pytest

from mtpwatch.core.ab.http_arm import HttpArm
from mtpwatch.core.ab.plan import CONTENDED, BenchConfig
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.ab.workloads import Prompt
from tests.datadir import DataDir


def _sse_body(data: DataDir) -> bytes:
    lines = data.text("sse-ngram-k4-completions.txt").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("data:"))
    return ("\n".join(lines[start:]) + "\n\n").encode()


def _metrics(n: int, k: int = 4) -> str:
    model = 'engine="0",model_name="spec"'
    out = [
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{model}}} {51.0 * n}",
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{model}}} {204.0 * n}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{model}}} {192.0 * n}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
    ]
    out += [
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{model},position="{p}"}} {48.0 * n}'
        for p in range(k)
    ]
    return "\n".join(out) + "\n"


class FakeVllm:
    def __init__(self, sse: bytes) -> None:
        self.completions = 0
        self.bodies: list[dict[str, object]] = []
        self.sse = sse

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text=_metrics(self.completions))
        if request.url.path == "/v1/completions":
            self.bodies.append(json.loads(request.content))
            self.completions += 1
            return httpx.Response(200, content=self.sse, headers={"content-type": "text/event-stream"})
        return httpx.Response(404)


async def test_http_arm_measures_and_scrapes_acceptance(data: DataDir) -> None:
    fake = FakeVllm(_sse_body(data))
    arm = HttpArm("http://127.0.0.1:9", transport=httpx.MockTransport(fake.handler), label="spec")
    try:
        report = await BenchRunner(BenchConfig([Prompt("p", "x", "c", 128)], runs=3, warmup=1), arm).run()
    finally:
        await arm.aclose()
    assert report.failed == 0
    doc = report.to_json()
    a = doc["arms"]["a"]
    # vLLM's formulas over the two measured runs: 384/408, 1 + 384/102, 96/102 per position
    assert a["acceptance_rate"] == pytest.approx(192 / 204, abs=1e-4)
    assert a["mean_acceptance_length"] == pytest.approx(1 + 192 / 51, abs=1e-4)
    assert a["per_position"] == [pytest.approx(48 / 51, abs=1e-4)] * 4
    assert a["num_speculative_tokens"] == 4
    assert a["tokens"]["median"] == 128  # usage.completion_tokens of the capture
    assert report.gate_failures() == []
    assert all(b["return_token_ids"] is True for b in fake.bodies)
    assert all("ignore_eos" not in b and "min_tokens" not in b for b in fake.bodies)


async def test_http_arm_forces_lengths_in_the_sweep(data: DataDir) -> None:
    fake = FakeVllm(_sse_body(data))
    arm = HttpArm("http://127.0.0.1:9", transport=httpx.MockTransport(fake.handler))
    try:
        await BenchRunner(
            BenchConfig([Prompt("p", "x", "c", 256)], runs=2, warmup=1, lengths=(32,)), arm
        ).run()
    finally:
        await arm.aclose()
    assert fake.bodies and all(
        b["ignore_eos"] is True and b["min_tokens"] == 32 and b["max_tokens"] == 32 for b in fake.bodies
    )


async def test_identical_capture_is_identical_by_text(data: DataDir) -> None:
    # The capture has no token ids (the server was not asked), so the check falls back to text.
    fa, fb = FakeVllm(_sse_body(data)), FakeVllm(_sse_body(data))
    a = HttpArm("http://127.0.0.1:9", transport=httpx.MockTransport(fa.handler))
    b = HttpArm("http://127.0.0.1:10", transport=httpx.MockTransport(fb.handler))
    try:
        report = await BenchRunner(BenchConfig([Prompt("p", "x", "c", 128)], runs=3, warmup=1), a, b).run()
    finally:
        await a.aclose()
        await b.aclose()
    assert report.lossless.identical is True
    assert report.lossless.compared_by == "text"
    assert report.primary.overall.speedup is not None
    assert CONTENDED not in json.dumps(report.to_json(), ensure_ascii=False)
