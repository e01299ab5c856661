"""The simulator's start-up log in each flavour (`--vllm-log 0.32-cpu|0.34-gpu`, `--frontend rust`) parses
into the phases and facts of the log it imitates: the real vLLM 0.32 CPU log, and the 0.34 GPU (MRV2)
log built from the released wheel's format strings (tests/data)."""

from __future__ import annotations

import asyncio
import io
import itertools
import re
from typing import Any

import pytest

from mtpwatch.core.launch.logparse import LogFacts, LogWatcher, Phase
from mtpwatch.sim.harness import running_sim
from tests.datadir import DataDir

RUST_STATS = (
    r"\[log_stats\.rs:\d+\] Avg prompt tput: \d+\.\d toks/s, Avg generation tput: \d+\.\d toks/s, "
    r"Reqs Running: \d+, Waiting: \d+, GPU KV cache used: \d+\.\d%"
)
"""The Rust frontend's stats line (rust/src/llm/src/log_stats.rs:262-300 of vLLM 0.34.0)."""


def watch(lines: list[str]) -> LogWatcher:
    clock = itertools.count()
    watcher = LogWatcher(clock=lambda: float(next(clock)))
    for line in lines:
        watcher.feed(line)
    return watcher


def filled(facts: LogFacts) -> set[str]:
    return {name for name in facts.__slots__ if getattr(facts, name) not in (None, False)}


def phases(watcher: LogWatcher) -> list[Phase]:
    return sorted(watcher.phase_started, key=lambda p: watcher.phase_started[p])


async def sim_log(**options: Any) -> list[str]:
    log = io.StringIO()
    async with running_sim(preset="gemma4-e4b-gb10", k=3, log=log, startup_delay_s=0.05, **options):
        pass
    return log.getvalue().splitlines()


async def test_gpu_flavour_parses_like_the_034_fixture(data: DataDir) -> None:
    built = data.text("vllm-startup-mtp-gpu-0.34-mrv2.log").splitlines()
    fixture = watch([x for x in built if not x.startswith("# ")])
    sim = watch(await sim_log(vllm_log="0.34-gpu"))
    assert phases(sim) == phases(fixture) == [Phase.STARTING, Phase.LOADING, Phase.COMPILING, Phase.READY]
    assert filled(sim.facts) == filled(fixture.facts)
    for name in ("vllm_version", "model", "spec_method", "spec_model", "num_spec_tokens"):
        assert getattr(sim.facts, name) == getattr(fixture.facts, name), name
    assert not sim.facts.mtp_detected  # MRV2 prints no `Detected MTP model`


async def test_cpu_flavour_parses_like_the_real_032_log(data: DataDir) -> None:
    real = watch(data.text("vllm-startup-ngram-cpu.log").splitlines())
    sim = watch(await sim_log(vllm_log="0.32-cpu"))
    assert phases(sim) == phases(real)
    assert sim.facts.vllm_version == real.facts.vllm_version == "0.32.0"
    # the real log (ngram) gives these; the simulated one (MTP) also the MRV1 MTP lines
    assert filled(real.facts) - {"listening"} <= filled(sim.facts)
    assert sim.facts.mtp_detected


async def test_rust_frontend_log(sse: Any) -> None:
    log = io.StringIO()
    body = {"prompt": "x", "max_tokens": 120, "temperature": 0, "ignore_eos": True}
    opts = {"frontend": "rust", "vllm_log": "0.34-gpu", "log_interval_s": 0.1, "speed": 10.0}
    async with running_sim(preset="gemma4-e4b-gb10", k=3, log=log, startup_delay_s=0.05, **opts) as url:
        await sse(url, "/v1/completions", body)
        deadline = asyncio.get_running_loop().time() + 60
        while "SpecDecoding metrics" not in log.getvalue():
            assert asyncio.get_running_loop().time() < deadline, "no SpecDecoding line within 60 s"
            await asyncio.sleep(0.02)
    watcher = watch(log.getvalue().splitlines())
    assert watcher.phase is Phase.READY
    assert watcher.facts.frontend == "rust"
    assert watcher.facts.listening is not None and watcher.facts.listening.startswith("http://127.0.0.1:")
    stats = [x for x in log.getvalue().splitlines() if "Avg prompt t" in x]
    assert stats and all(re.search(RUST_STATS, x) for x in stats)
    assert watcher.spec_lines and len(watcher.spec_lines[0].per_position) == 3
    assert "Engine 000:" not in log.getvalue() and "Application startup complete" not in log.getvalue()


def test_rust_frontend_needs_a_vllm_that_ships_it() -> None:
    from mtpwatch.sim.options import make_options
    from mtpwatch.sim.server import SimServer

    with pytest.raises(ValueError, match=r"0\.33 and later"):
        SimServer(make_options(frontend="rust", vllm_log="0.32-cpu"))
