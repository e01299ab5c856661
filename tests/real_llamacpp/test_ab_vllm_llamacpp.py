"""A/B across engines: `mtpwatch bench --ab` with a real vLLM (CPU, no speculation) as A and a real
llama-server (draft model) as B, both serving Gemma 3 270M; the report's acceptance for B equals
llama-server's counter deltas over the measured runs, and A reports none.

Runs last in the llama.cpp suite: it needs the real-vLLM environment too (tests/run.sh exports it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from .conftest import ROOT, LlamaPool
from .test_real_llamacpp import PROMPT, raw_counters

pytestmark = pytest.mark.real_llamacpp


def _real_vllm_conftest() -> ModuleType:
    path = ROOT / "tests" / "real_vllm" / "conftest.py"
    spec = importlib.util.spec_from_file_location("real_vllm_conftest_for_ab", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(1500)  # a vLLM start (up to 600 s on a busy machine) and the bench
def test_bench_ab_vllm_against_llama_cpp(llama_pool: LlamaPool, tmp_path: Path) -> None:
    venv, models = os.environ.get("MTPWATCH_VLLM_VENV"), os.environ.get("MTPWATCH_TEST_MODELS")
    if not venv or not models:
        pytest.fail(
            "the vLLM-vs-llama.cpp A/B needs MTPWATCH_VLLM_VENV and MTPWATCH_TEST_MODELS (tests/run.sh)"
        )
    rv = _real_vllm_conftest()
    llama = llama_pool.get("draft")
    vllm = rv.start_server(rv.RealEnv(Path(venv), Path(models)), "baseline", tmp_path)
    try:
        prompts = tmp_path / "prompts.jsonl"
        prompts.write_text(json.dumps({"prompt": PROMPT, "category": "copy", "max_tokens": 32}) + "\n")
        before = raw_counters(httpx.get(llama.url + "/metrics", timeout=10).text)
        out = tmp_path / "ab.json"
        run = subprocess.run(
            [
                sys.executable, "-m", "mtpwatch", "bench", "--ab", vllm.url, llama.url,
                "--prompts", str(prompts), "--runs", "3", "--warmup", "1", "--json-file", str(out),
                "--no-progress",
            ],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        after = raw_counters(httpx.get(llama.url + "/metrics", timeout=10).text)
        # exit status 1 means a sanity gate failed (listed in 'gates'); only a crash is wrong here
        assert run.returncode in (0, 1), run.stdout + run.stderr
        assert "Traceback" not in run.stderr, run.stderr
        report = json.loads(out.read_text())
        print(run.stdout[-3000:])
        assert report["failed_requests"] == 0, report["problems"]
        assert report["servers"] == {"a": vllm.url, "b": llama.url}
        a, b = report["arms"]["a"], report["arms"]["b"]
        assert a["runs"] == b["runs"] == 2 and a["failed"] == b["failed"] == 0
        assert a["acceptance_rate"] is None  # vLLM without speculation: no counters
        # B's acceptance = llama-server's counter deltas around its measured (not warm-up) runs.
        runs = [r for r in report["runs"] if r["arm"] == "b"]
        measured = [r for r in runs if not r["warmup"]]
        drafts = [r["drafts"] for r in measured]
        assert b["drafts"] == sum(drafts) > 0
        # The bench does not scrape around warm-up runs: llama-server's deltas over the whole bench
        # (no other traffic) are the measured runs' plus at most one run's worth.
        assert 0 <= (after.drafts - before.drafts) - sum(drafts) <= max(drafts)
        assert (after.accepted - before.accepted) - sum(r["accepted"] for r in measured) >= 0
        assert b["num_speculative_tokens"] == 4
        assert 0.0 < b["acceptance_rate"] <= 1.0
        # Both arms count exactly the tokens each server says it generated.
        assert all(r["tokens"] == 32 for r in report["runs"]), [r["tokens"] for r in report["runs"]]
        assert after.predicted - before.predicted == 32 * len(runs)
        assert report["speedup"] is not None and report["speedup"]["median"] > 0
    finally:
        vllm.quit(signal.SIGTERM)
