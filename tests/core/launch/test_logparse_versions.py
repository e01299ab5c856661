"""LogWatcher across vLLM versions: 0.32's CPU build (Model Runner V1, a real log) and 0.33/0.34 on a GPU
(Model Runner V2, logs built from the released wheels' format strings: tests/data/vllm-startup-*-mrv2.log),
and the stats lines of the Python API server and of the Rust frontend (docs/vllm-startup-lines.md)."""

from __future__ import annotations

import itertools

import pytest

from mtpwatch.core.launch.logparse import LogWatcher, Phase
from tests.datadir import DataDir

GPU_LOGS = ("vllm-startup-mtp-gpu-0.33-mrv2.log", "vllm-startup-mtp-gpu-0.34-mrv2.log")


def feed(lines: list[str]) -> tuple[LogWatcher, list[str]]:
    clock = itertools.count()
    watcher = LogWatcher(clock=lambda: float(next(clock)))
    texts: list[str] = []
    for line in lines:
        texts += [f"{e.kind}: {e.text}" for e in watcher.feed(line)]
    return watcher, texts


def log_lines(data: DataDir, name: str) -> list[str]:
    """The fixture's log lines, without its header (`# ` lines saying how it was built)."""
    return [line for line in data.text(name).splitlines() if not line.startswith("# ")]


def phase_order(watcher: LogWatcher) -> list[Phase]:
    return sorted(watcher.phase_started, key=lambda p: watcher.phase_started[p])


@pytest.mark.parametrize("name", GPU_LOGS)
def test_mrv2_gpu_log_gives_the_phases_and_facts_of_the_cpu_log(data: DataDir, name: str) -> None:
    """The same phases in the same order, and the same facts filled in, as the real 0.32 CPU log: MRV2
    has no `Starting to load model` (its loading phase starts at `Loading model from scratch...`) and
    no `Loading drafter model` / `Detected MTP model` (the drafter is named by the engine's config)."""
    cpu, _ = feed(data.text("vllm-startup-ngram-cpu.log").splitlines())
    gpu, texts = feed(log_lines(data, name))
    assert (
        phase_order(gpu)
        == phase_order(cpu)
        == [
            Phase.STARTING,
            Phase.LOADING,
            Phase.COMPILING,
            Phase.READY,
        ]
    )
    version = "0.33.0" if "0.33" in name else "0.34.0"
    facts = gpu.facts
    assert facts.vllm_version == version  # the logo's "version …" (0.34) or "…version V, serving…" (0.33)
    assert facts.model == "google/gemma-4-E4B-it"
    assert (facts.spec_method, facts.spec_model, facts.num_spec_tokens) == (
        "mtp",
        "google/gemma-4-E4B-it-assistant",
        3,
    )
    assert (facts.weights_gib, facts.weights_s) == (15.65, 24.12)  # Model loading took (MRV2, GPU)
    assert (facts.kv_cache_tokens, facts.kv_cache_gib, facts.max_concurrency) == (1234560, 80.12, 9.42)
    assert facts.listening == "http://0.0.0.0:8000"
    assert facts.centroids_masking is not None
    assert not facts.mtp_detected  # MRV1's line only: MRV2 prints none
    filled = {k for k, v in vars_of(facts).items() if v not in (None, False)}
    cpu_filled = {k for k, v in vars_of(cpu.facts).items() if v not in (None, False)}
    assert cpu_filled <= filled  # every fact the CPU log gives, the GPU log gives too
    assert gpu.hints == [] and gpu.errors == []
    assert f"fact: vLLM {version}" in texts
    # the loading phase starts at MRV2's line, the compile phase at "Model loading took"
    loading = next(i for i, t in enumerate(texts) if t.startswith("phase: loading"))
    assert texts.index("fact: weights: 15.65 GiB loaded in 24.1 s") > loading
    assert len(gpu.spec_lines) == 1 and gpu.spec_lines[0].per_position == (0.83, 0.65, 0.47)
    assert gpu.facts.frontend is None  # its stats line is the Python API server's


def vars_of(facts: object) -> dict[str, object]:
    return {name: getattr(facts, name) for name in facts.__slots__}  # type: ignore[attr-defined]


def test_banner_without_logo_gives_version_without_comma() -> None:
    """0.33/0.34 with VLLM_DISABLE_LOG_LOGO: `vLLM server version 0.34.0, serving model M`
    (vllm/entrypoints/common/startup.py:18); the comma is not part of the version."""
    line = "vLLM server version 0.34.0, serving model m/x"
    watcher, texts = feed([f"(APIServer pid=1) INFO 12-05 10:00:01 [startup.py:38] {line}"])
    assert watcher.facts.vllm_version == "0.34.0"
    assert watcher.facts.model == "m/x"
    assert texts == ["fact: vLLM 0.34.0"]


def test_rust_frontend_lines() -> None:
    """The Rust frontend (0.34.0 sdist): its ready line (rust/src/server/src/lib.rs:352) is the ready
    phase and gives the address; its stats line (rust/src/llm/src/log_stats.rs:262-300) says which
    frontend it is; its SpecDecoding line has Python's text."""
    watcher, texts = feed(
        [
            "(RustFrontend pid=7) INFO 12-05 10:01:14 [server/src/lib.rs:352] OpenAI server is ready to "
            'accept requests bind_address="127.0.0.1:8000" scheme="http" model="m/x"',
            "(RustFrontend pid=7) INFO 12-05 10:01:24 [log_stats.rs:300] Avg prompt tput: 2.7 toks/s, Avg "
            "generation tput: 12.8 toks/s, Reqs Running: 2, Waiting: 1, GPU KV cache used: 3.5%, Prefix "
            "cache hit rate: 10.0%",
            "(RustFrontend pid=7) INFO 12-05 10:01:24 [log_stats.rs:329] SpecDecoding metrics: Mean "
            "acceptance length: 3.68, Accepted throughput: 0.73 tokens/s, Drafted throughput: 1.10 "
            "tokens/s, Accepted: 91 tokens, Drafted: 136 tokens, Per-position acceptance rate: 0.676, "
            "0.559, 0.441, 0.324, Avg Draft acceptance rate: 66.9%",
        ]
    )
    assert watcher.phase is Phase.READY
    assert watcher.facts.listening == "http://127.0.0.1:8000"
    assert watcher.facts.frontend == "rust"
    assert "fact: API server: vLLM's Rust frontend (OpenMetrics /metrics)" in texts
    [spec] = watcher.spec_lines
    assert (spec.accepted, spec.drafted, spec.acceptance_rate) == (91, 136, pytest.approx(0.669))
    assert spec.per_position == (0.676, 0.559, 0.441, 0.324)


@pytest.mark.parametrize(
    ("line", "frontend"),
    [
        # Python, CPU build (the real 0.32 log's wording)
        (
            "Engine 000: Avg prompt throughput: 2.7 tokens/s, Avg generation throughput: 12.8 tokens/s, "
            "Running: 0 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
            None,
        ),
        # Python with the optional parts (loggers.py:298-326: Deferred, Preemptions)
        (
            "Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 40.0 tokens/s, "
            "Running: 3 reqs, Waiting: 2 reqs, Deferred: 1 reqs, Preemptions: 4, GPU KV cache usage: 91.5%",
            None,
        ),
        # Rust with the optional parts (log_stats.rs:269-296) and the external hit rate
        (
            "Avg prompt tput: 0.0 toks/s, Avg generation tput: 40.0 toks/s, Reqs Running: 3, Waiting: 2, "
            "Deferred: 1 reqs, Preemptions: 4, GPU KV cache used: 91.5%, Prefix cache hit rate: 50.0%, "
            "External prefix cache hit rate: 20.0%",
            "rust",
        ),
    ],
)
def test_stats_line_says_only_which_frontend(line: str, frontend: str | None) -> None:
    watcher, texts = feed([line])
    assert watcher.facts.frontend == frontend
    assert texts == (["fact: API server: vLLM's Rust frontend (OpenMetrics /metrics)"] if frontend else [])
    assert watcher.phase is Phase.STARTING and watcher.errors == []


def test_garbled_stats_line_is_no_stats_line() -> None:
    watcher, _ = feed(["Avg prompt tput: garbled", "Loading weights took 1.36 seconds"])
    assert watcher.facts.frontend is None and watcher.facts.weights_s == 1.36
