"""`mtpwatch start --keep` in the terminal UI: quitting leaves the server running, logging to a file
under the cache (a pipe would die with mtpwatch), and prints how to attach and stop it; the test
stops it as printed, leaving no process behind (checked by conftest). The headless `--keep`:
tests/faults/test_start_keep.py."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest

from mtpwatch.commands.options import free_port

from .conftest import marked_processes
from .test_signals import (
    LEAVE_ALT_SCREEN,
    assert_clean_exit,
    healthy,
    shim_command,
    terminal,
    wait,
    wait_for_monitor,
)


def test_quitting_the_ui_leaves_a_kept_server_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [
        sys.executable, "-m", "mtpwatch", "start", "fault-model", "-k", "2", "--keep",
        "--port", str(port), "--vllm", shim_command(),
    ]  # fmt: skip
    monkeypatch.setenv("MTPWATCH_CACHE_DIR", str(tmp_path))  # inherited by the terminal's mtpwatch
    try:
        with terminal(argv) as term:
            wait(lambda: healthy(url), "the server")
            wait_for_monitor(term)
            term.type("\x11")  # Ctrl+Q
            status = term.exit_status()
            assert_clean_exit(term, status)
            assert status == 0
            # after the terminal is restored: where it logs, how to attach, how to stop it
            after = term.output.rsplit(LEAVE_ALT_SCREEN, 1)[1].decode(errors="replace")
            pgid = int(after.split("left running (--keep): process group ", 1)[1].split(",", 1)[0])
            assert f"attach: mtpwatch attach {url}" in after
            assert f"stop:   kill -TERM -- -{pgid}" in after
        # mtpwatch is gone; the server it started still answers and logs to its file
        assert healthy(url), "the kept server was stopped with mtpwatch"
        [log] = (tmp_path / "logs").glob(f"vllm-{port}-*.log")
        size = log.stat().st_size
        httpx.post(
            url + "/v1/completions", json={"prompt": "hi", "max_tokens": 4}, timeout=30
        ).raise_for_status()
        wait(lambda: log.stat().st_size > size, "the kept server's next log line")
        [server] = {os.getpgid(int(line.split()[0])) for line in marked_processes()}
        assert server == pgid
        os.killpg(server, signal.SIGTERM)  # what the printed stop line does
        wait(lambda: not marked_processes(), "the kept server to stop")
    finally:
        for line in marked_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
