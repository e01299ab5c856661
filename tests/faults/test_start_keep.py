"""`mtpwatch start --headless --keep`: on SIGTERM mtpwatch exits and leaves the server running, says so
(its process group, its log, how to attach and how to stop it), and the server keeps answering and
logging; the command it prints stops it, leaving no process behind (checked by conftest)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from mtpwatch.commands.options import free_port
from tests.headless import terminal_signals

from .conftest import ROOT, marked_processes
from .test_signals import healthy, shim_command, wait


def test_keep_leaves_the_server_running_and_says_how_to_stop_it(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable, "-m", "mtpwatch", "start", "fault-model", "-k", "2", "--headless", "--keep",
        "--port", str(port), "--vllm", shim_command(), "--status-interval", "0.5",
    ]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env={**os.environ, "MTPWATCH_CACHE_DIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=terminal_signals,
    )
    pgid: int | None = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if " ready in " in line:
                break
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert "Traceback" not in out
        left = re.search(r"left running \(--keep\): process group (\d+), log (\S+)", out)
        assert left is not None, out
        pgid = int(left.group(1))
        log = Path(left.group(2))
        assert "received SIGTERM" in out and "server stopped" not in out, out
        assert f"attach: mtpwatch attach {url}" in out
        assert f"stop:   kill -TERM -- -{pgid}" in out
        # mtpwatch is gone; the server still answers, and logs to the file it named (under the cache)
        assert log.parent == tmp_path / "logs" and log.name.startswith(f"vllm-{port}-")
        assert healthy(url)
        size = log.stat().st_size
        httpx.post(
            url + "/v1/completions", json={"prompt": "hi", "max_tokens": 4}, timeout=30
        ).raise_for_status()
        wait(lambda: log.stat().st_size > size, "the kept server's next log line")
        # the stop command it printed ends the server's whole group
        os.killpg(pgid, signal.SIGTERM)
        wait(lambda: not marked_processes(), "the kept server to stop")
        assert not healthy(url)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
