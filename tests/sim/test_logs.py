"""vLLM-like log lines: start-up facts and the periodic stats lines in vLLM's exact format."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

from mtpwatch.sim.harness import running_sim
from tests.datadir import DataDir

PREFIX = r"INFO \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] "
ENGINE = (
    PREFIX + r"Engine 000: Avg prompt throughput: \d+\.\d tokens/s, Avg generation throughput: "
    r"\d+\.\d tokens/s, Running: \d+ reqs, Waiting: \d+ reqs, GPU KV cache usage: \d+\.\d%, "
    r"Prefix cache hit rate: \d+\.\d%$"
)
SPEC = (
    PREFIX + r"SpecDecoding metrics: Mean acceptance length: \d+\.\d\d, Accepted throughput: \d+\.\d\d "
    r"tokens/s, Drafted throughput: \d+\.\d\d tokens/s, Accepted: \d+ tokens, Drafted: \d+ tokens, "
    r"Per-position acceptance rate: (\d\.\d{3}(, )?)+, Avg Draft acceptance rate: \d+\.\d%$"
)


def test_patterns_match_the_real_log_lines(data: DataDir) -> None:
    real = data.text("spec-log-lines.txt").splitlines()
    spec = [x for x in real if "SpecDecoding metrics" in x]
    assert spec and all(re.match(SPEC, x) for x in spec)
    engine = [x.replace("CPU KV", "GPU KV") for x in real if "Engine 000" in x]
    assert engine and all(re.match(ENGINE, x) for x in engine)


async def test_startup_and_stats_lines(sse: Any) -> None:
    log = io.StringIO()
    body = {"prompt": "x", "max_tokens": 200, "temperature": 0, "ignore_eos": True}
    async with running_sim(speed=10.0, log=log, log_interval_s=0.1, startup_delay_s=0.05) as url:
        await sse(url, "/v1/completions", body)
        for _ in range(300):
            if "SpecDecoding metrics" in log.getvalue():
                break
            await asyncio.sleep(0.02)
    text = log.getvalue()
    lines = text.splitlines()
    for needle in (
        "vLLM API server version 0.32.0",
        "Loading weights took",
        "Model loading took",
        "Detected MTP model. Sharing target model embedding weights with the draft model.",
        "Gemma4 MTP: centroids masking enabled (num_centroids=2048, top_k=32, active_tokens=4096/262144).",
        "GPU KV cache size:",
        "Starting vLLM API server",
        "Application startup complete.",
        "speculative_config=SpeculativeConfig(method='mtp', "
        "model='google/gemma-4-E4B-it-assistant', num_spec_tokens=2)",
    ):
        assert needle in text, needle
    assert any(re.match(ENGINE, x) for x in lines)
    assert any(re.match(SPEC, x) for x in lines)
    spec_line = next(x for x in lines if "SpecDecoding metrics" in x)
    per_position = re.search(r"Per-position acceptance rate: ([\d., ]+),", spec_line)
    assert per_position is not None and len(per_position.group(1).split(", ")) == 2


async def test_baseline_has_no_mtp_lines() -> None:
    log = io.StringIO()
    async with running_sim(spec=False, speed=10.0, log=log):
        pass
    text = log.getvalue()
    assert "Detected MTP model" not in text
    assert "speculative_config=None" in text
    assert "Application startup complete." in text
