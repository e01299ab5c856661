"""LogWatcher on real vLLM 0.32 logs: phases, facts, SpecDecoding lines, failure hints."""

from __future__ import annotations

import itertools

import pytest

from mtpwatch.core.launch.logparse import LogWatcher, Phase, parse_spec_line
from tests.datadir import DataDir


def feed_file(data: DataDir, name: str) -> tuple[LogWatcher, list[str]]:
    clock = itertools.count()  # one "second" per line: phase times are line numbers
    watcher = LogWatcher(clock=lambda: float(next(clock)))
    texts: list[str] = []
    for line in data.text(name).splitlines():
        texts += [f"{e.kind}: {e.text}" for e in watcher.feed(line)]
    return watcher, texts


def test_real_cpu_startup_log_phases_and_facts(data: DataDir) -> None:
    watcher, texts = feed_file(data, "vllm-startup-ngram-cpu.log")
    assert watcher.phase is Phase.READY
    started = watcher.phase_started
    assert started[Phase.STARTING] < started[Phase.LOADING] < started[Phase.COMPILING] < started[Phase.READY]
    facts = watcher.facts
    assert facts.vllm_version == "0.32.0"
    assert facts.model is not None and facts.model.endswith("models/gemma3-270m")
    assert (facts.spec_method, facts.spec_model, facts.num_spec_tokens) == ("ngram", None, 4)
    assert (facts.weights_gib, facts.weights_s) == (0.50, 1.36)
    assert (facts.kv_cache_tokens, facts.kv_cache_gib, facts.max_concurrency) == (110733, 2.0, 54.07)
    assert facts.listening == "http://127.0.0.1:18012"
    assert not facts.mtp_detected
    assert watcher.hints == [] and watcher.errors == []
    assert "fact: speculative decoding: ngram, k=4" in texts
    # "Enforce eager set, disabling torch.compile" comes before loading and is not the compile phase
    assert texts.index("fact: weights: 0.50 GiB loaded in 1.4 s") < next(
        i for i, t in enumerate(texts) if t.startswith("phase: compiling")
    )
    assert len(watcher.spec_lines) == 1
    assert watcher.spec_lines[0].accepted == 91 and watcher.spec_lines[0].drafted == 136


def test_spec_log_lines_fixture(data: DataDir) -> None:
    watcher, _ = feed_file(data, "spec-log-lines.txt")
    lines = watcher.spec_lines
    assert len(lines) == data.text("spec-log-lines.txt").count("SpecDecoding metrics:")
    first = lines[0]
    assert first.mean_acceptance_length == 4.76
    assert (first.accepted_throughput, first.drafted_throughput) == (12.57, 13.39)
    assert (first.accepted, first.drafted) == (184, 196)
    assert first.per_position == (0.939, 0.939, 0.939, 0.939)
    assert first.acceptance_rate == pytest.approx(0.939)
    # the log's own formula holds on every line: rate = accepted / drafted (printed to 0.1 %)
    for line in lines:
        assert line.acceptance_rate == pytest.approx(line.accepted / line.drafted, abs=0.0005 + 1e-9)
    mtp2 = [s for s in lines if len(s.per_position) == 2]
    assert mtp2[0].per_position == (0.070, 0.000)
    assert watcher.facts.mtp_detected
    # the first draft_model attempt failed: the hybrid KV-cache hint, once
    assert [h.problem for h in watcher.hints] == [
        "draft model on a hybrid-attention target (sliding + full layers)"
    ]
    assert "--disable-hybrid-kv-cache-manager" in watcher.hints[0].fix
    assert any("All drafting layers" in e for e in watcher.errors)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            "(APIServer pid=1) ERROR 11-29 21:00:00 [api.py:1] OSError: [Errno 98] Address already in use",
            "port",
        ),
        (
            "(EngineCore pid=2) ERROR 11-29 21:00:00 [core.py:1] ValueError: To serve at least one "
            "request with the model's max seq len (131072), (20.0 GiB KV cache is needed, which is "
            "larger than the available KV cache memory (3.2 GiB).",
            "KV cache",
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
            "KV cache",
        ),
        (
            "ValueError: The checkpoint you are trying to load has model type `gemma4` but Transformers does "
            "not recognize this architecture.",
            "unknown model",
        ),
        ("ValueError: Model architectures ['Gemma4ForCausalLM'] are not supported for now.", "unknown model"),
        ("RuntimeError: operator torchvision::nms does not exist", "torchvision"),
        ("importlib.metadata.PackageNotFoundError: No package metadata was found for vllm", "cannot find"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "CUDA out of memory"),
        (
            "(EngineCore pid=2) ValueError: Free memory on device cuda:0 (10.5/119.7 GiB) on startup is less "
            "than desired GPU memory utilization (0.9, 107.7 GiB). Decrease GPU memory utilization or reduce "
            "GPU memory used by other processes.",
            "free GPU memory",
        ),
        ("vllm: error: unrecognized arguments: --no-such-flag", "flag"),
        (
            "ValueError: Invalid repository ID or local directory specified: '/nonexistent/model'.",
            "model not found",
        ),
        (  # vLLM 0.32 (CPU build) given a local path that does not exist
            "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
            "'namespace/repo_name': '/tmp/no-such-model'. Use `repo_type` argument if needed.",
            "model not found",
        ),
    ],
)
def test_failure_hints(line: str, problem: str) -> None:
    watcher = LogWatcher()
    events = watcher.feed(line)
    assert [e.kind for e in events] == ["hint"]
    assert problem in watcher.hints[0].problem
    assert watcher.feed(line) == []  # a hint is given once


def test_vllm_internal_port_retry_is_not_a_failure() -> None:
    watcher = LogWatcher()
    watcher.feed("WARNING 11-29 21:00:00 [parallel.py:746] Address already in use. Retrying with a new port.")
    assert watcher.hints == []


def test_gemma4_centroids_and_gpu_weights_lines() -> None:
    watcher = LogWatcher()
    watcher.feed(
        "(EngineCore_DP0 pid=9) INFO 01-02 10:00:00 [gemma4_mtp.py:506] Gemma4 MTP: centroids masking "
        "enabled (num_centroids=2048, top_k=32, active_tokens=4096/262144)."
    )
    watcher.feed(
        "INFO 01-02 10:00:01 [gpu_model_runner.py:5150] Model loading took 9.87 GiB memory "
        "and 12.345678 seconds"
    )
    watcher.feed("INFO 01-02 10:00:02 [gpu_worker.py:760] Available KV cache memory: 71.5 GiB")
    assert watcher.facts.centroids_masking == "num_centroids=2048, top_k=32, active_tokens=4096/262144"
    assert (watcher.facts.weights_gib, watcher.facts.weights_s) == (9.87, 12.345678)
    assert watcher.facts.kv_cache_gib == 71.5
    assert watcher.phase is Phase.COMPILING


def test_phase_never_goes_back_and_failure_sticks() -> None:
    watcher = LogWatcher()
    watcher.feed("INFO:     Application startup complete.")
    watcher.feed("INFO 11-29 21:00:00 [cpu_model_runner.py:68] Starting to load model x...")
    assert watcher.phase is Phase.READY
    assert watcher.mark_failed(1)[0].text == "failed (exit status 1)"
    assert watcher.mark_ready() == []
    assert watcher.phase is Phase.FAILED


def test_parse_spec_line_rejects_other_lines() -> None:
    assert parse_spec_line("Engine 000: Avg prompt throughput: 12.6 tokens/s") is None
    assert parse_spec_line("SpecDecoding metrics: garbled") is None
