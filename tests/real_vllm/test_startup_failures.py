"""Real vLLM (CPU build) start-up failures through `mtpwatch start --headless`: a bad flag, a model
path that does not exist, and the KV-cache out-of-memory message. Each: exit status 1, the reason,
the server's last log lines and a hint; no traceback from mtpwatch itself; no process left behind
(`VLLM::EngineCore` and `VLLM::Worker` included). The first two fail before any model loads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import mtpwatch
from mtpwatch.commands.options import free_port
from tests.procs import carrying

from .conftest import ROOT, VLLM_ENV, RealEnv

pytestmark = pytest.mark.real_vllm


def marked(token: str) -> list[str]:
    """Live processes (comm and cmdline) whose environment carries this run's marker."""
    return [proc.line(120) for proc in carrying("MTPWATCH_STARTUP_FAILURE", token)]


def start_fails(
    real_env: RealEnv, model: str, *extra: str, env: dict[str, str] | None = None
) -> tuple[str, float]:
    token = uuid.uuid4().hex
    argv = [
        sys.executable, "-m", "mtpwatch", "start", model, "--headless", "--port", str(free_port()),
        "--vllm", str(real_env.vllm), "--startup-timeout", "400",
        "--", "--enforce-eager", "--dtype", "bfloat16", *extra,
    ]  # fmt: skip
    t0 = time.monotonic()
    result = subprocess.run(
        argv,
        cwd=ROOT,
        env={**os.environ, **VLLM_ENV, **(env or {}), "MTPWATCH_STARTUP_FAILURE": token},
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.monotonic() - t0
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-3000:]
    # No traceback from mtpwatch's own code (vLLM's traceback in the log tail is expected; its venv may
    # live under ~/.cache/mtpwatch, so match the package folder, not the word).
    own = str(Path(mtpwatch.__file__).resolve().parent) + os.sep
    assert own not in "".join(line for line in out.splitlines() if 'File "' in line), out[-3000:]
    deadline = time.monotonic() + 15
    while marked(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marked(token) == [], marked(token)
    print(f"failed as expected in {elapsed:.1f} s")
    return out, elapsed


def test_bad_flag_fails_in_seconds(real_env: RealEnv) -> None:
    out, elapsed = start_fails(real_env, str(real_env.models / "gemma3-270m"), "--no-such-flag")
    assert "error: server exited with status" in out
    assert "--no-such-flag" in out
    assert "hint: vLLM does not know a flag" in out
    # It ends at vLLM's exit, not at the 400 s start-up timeout (not a time budget: vLLM's imports
    # alone take minutes on a loaded machine).
    assert "no answer from" not in out and elapsed < 400


def test_model_path_that_does_not_exist(real_env: RealEnv, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    out, _ = start_fails(real_env, str(missing), "--max-model-len", "2048")
    assert "error: server exited with status" in out
    assert "hint: model not found" in out, out[-3000:]


def test_kv_cache_out_of_memory(real_env: RealEnv) -> None:
    """A context far longer than a 1 GiB KV cache holds: vLLM's 'KV cache is needed, which is larger
    than the available KV cache memory' (the CPU build's form of running out of memory at start-up)."""
    out, _ = start_fails(
        real_env,
        str(real_env.models / "gemma3-270m"),
        "--max-model-len",
        "1000000",
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
    )
    assert "error: server exited with status" in out
    assert "hint: not enough memory for the KV cache" in out, out[-3000:]
