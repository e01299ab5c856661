"""SIGHUP, SIGTERM and Ctrl-C (SIGINT) during start-up, during a stream and during an F6 measurement.

`mtpwatch start` launches the simulator through a stand-in for the `vllm` command
(tests/faults/vllm_shim.py), so the whole path is the one a real vLLM takes: its own process
group, log pumping, /health polling, and the stop on every exit path. The terminal UI runs in a
real pseudo-terminal, as over SSH. After each case: mtpwatch has exited, its output has no
traceback, the terminal was restored, and no server process is left (checked by conftest).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from mtpwatch.commands.options import free_port
from tests.headless import terminal_signals
from tests.procs import carrying

from .conftest import MARK, ROOT, SHIM, TOKEN

SIGNALS = [
    pytest.param(signal.SIGHUP, id="SIGHUP"),
    pytest.param(signal.SIGTERM, id="SIGTERM"),
    pytest.param(signal.SIGINT, id="SIGINT"),
]
F6 = "\x1b[17~"
LEAVE_ALT_SCREEN = b"\x1b[?1049l"


def shim_command() -> str:
    return f"{sys.executable} {SHIM}"


def wait(predicate: Callable[[], bool], what: str, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit_s:g} s waiting for {what}")
        time.sleep(0.05)


def healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def running_requests(url: str) -> float:
    try:
        text = httpx.get(url + "/metrics", timeout=2.0).text
    except httpx.HTTPError:
        return 0.0
    match = re.search(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def sim_ports() -> list[int]:
    """Ports of the simulators this suite's processes started (found through /proc)."""
    argvs = [proc.argv for proc in carrying(MARK, TOKEN)]
    return sorted(
        {int(argv[argv.index("--port") + 1]) for argv in argvs if "sim" in argv and "--port" in argv}
    )


class Terminal:
    """A command in a pseudo-terminal (160×48), its output collected by a thread."""

    def __init__(self, argv: list[str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 48, 160, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "48"}
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            preexec_fn=terminal_signals,
        )
        os.close(slave)
        self.master = master
        self.output = bytearray()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def exit_status(self, limit_s: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout=limit_s)
        finally:
            self._reader.join(timeout=5)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.close(self.master)


@contextlib.contextmanager
def terminal(argv: list[str]) -> Iterator[Terminal]:
    term = Terminal(argv)
    try:
        yield term
    finally:
        term.close()


def wait_for_monitor(term: Terminal) -> None:
    """The monitor pane is drawn (it takes keys and prompts): a line only it shows, not a fixed sleep."""
    wait(lambda: b"per-position acceptance" in term.output, "the monitor pane", 60)


def assert_clean_exit(term: Terminal, status: int) -> None:
    text = term.output.decode(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    assert LEAVE_ALT_SCREEN in term.output, "the terminal was not restored"
    assert status in (0, 128 + signal.SIGHUP, 128 + signal.SIGTERM, 130), status


# -- headless start ---------------------------------------------------------------------------------


def headless(port: int, *sim_args: str) -> subprocess.Popen[str]:
    argv = [
        sys.executable, "-m", "mtpwatch", "start", "fault-model", "-k", "2", "--headless",
        "--port", str(port), "--vllm", shim_command(), "--status-interval", "0.5", "--", *sim_args,
    ]  # fmt: skip
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=terminal_signals,
    )


@pytest.mark.parametrize("sig", SIGNALS)
def test_headless_start_signal_during_startup(sig: int) -> None:
    port = free_port()
    proc = headless(port, "--startup-delay", "30")
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "process group" in line:
                break
        time.sleep(0.5)  # the server is loading
        assert not healthy(f"http://127.0.0.1:{port}")
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    name = signal.Signals(sig).name
    assert f"stopping before the server was ready ({name})" in out, out
    assert "server stopped" in out, out


@pytest.mark.parametrize("sig", SIGNALS)
def test_headless_start_signal_during_a_stream(sig: int) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = headless(port, "--speed", "1")
    errors: list[BaseException] = []

    def stream() -> None:
        body = {"prompt": "a long story", "max_tokens": 2000, "stream": True, "ignore_eos": True}
        try:
            with httpx.stream("POST", url + "/v1/completions", json=body, timeout=30) as resp:
                for _ in resp.iter_lines():
                    pass
        except httpx.HTTPError as exc:
            errors.append(exc)

    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if " ready in " in line:
                break
        thread = threading.Thread(target=stream, daemon=True)
        thread.start()
        wait(lambda: running_requests(url) >= 1, "the stream to run")
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=30)
        thread.join(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    assert f"received {signal.Signals(sig).name}" in out and "server stopped" in out, out
    assert errors, "the stream should have been cut when the server stopped"


# -- the terminal UI ------------------------------------------------------------------------------


def tui_start(port: int, *sim_args: str) -> list[str]:
    return [
        sys.executable, "-m", "mtpwatch", "start", "fault-model", "-k", "2",
        "--port", str(port), "--vllm", shim_command(), "--", *sim_args,
    ]  # fmt: skip


@pytest.mark.parametrize("sig", SIGNALS)
def test_tui_start_signal_during_startup(sig: int) -> None:
    port = free_port()
    with terminal(tui_start(port, "--startup-delay", "30")) as term:
        wait(lambda: bool(sim_ports()), "the server process")
        wait(lambda: b"since start" in term.output, "the start-up pane")
        assert not healthy(f"http://127.0.0.1:{port}")
        term.proc.send_signal(sig)
        assert_clean_exit(term, term.exit_status())


@pytest.mark.parametrize("sig", SIGNALS)
def test_tui_start_signal_during_a_stream(sig: int) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with terminal(tui_start(port, "--speed", "1")) as term:
        wait(lambda: healthy(url), "the server")
        wait_for_monitor(term)  # the app switches from the start-up pane to the monitor
        term.type("write a long story about the sea\r")
        wait(lambda: running_requests(url) >= 1, "the stream to run")
        term.proc.send_signal(sig)
        assert_clean_exit(term, term.exit_status())


def test_tui_ctrl_c_key_quits_as_ctrl_q_does_and_stops_the_server() -> None:
    """In the UI, Ctrl-C is a key (the terminal is raw), not SIGINT: it quits as Ctrl+Q does."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with terminal(tui_start(port, "--speed", "1")) as term:
        wait(lambda: healthy(url), "the server")
        wait_for_monitor(term)
        term.type("write a long story about the sea\r")
        wait(lambda: running_requests(url) >= 1, "the stream to run")
        term.type("\x03")
        status = term.exit_status()
        assert_clean_exit(term, status)
        assert status == 0
        assert not healthy(url)  # the server it started is stopped


@pytest.mark.parametrize("sig", SIGNALS)
def test_demo_signal_during_f6_measurement(sig: int) -> None:
    with terminal([sys.executable, "-m", "mtpwatch", "demo"]) as term:
        wait(lambda: len(sim_ports()) == 2, "the two simulators")
        urls = [f"http://127.0.0.1:{p}" for p in sim_ports()]
        wait(lambda: all(healthy(u) for u in urls), "both simulators")
        wait_for_monitor(term)
        term.type(F6)
        wait(lambda: any(running_requests(u) >= 1 for u in urls), "the measurement to run")
        term.proc.send_signal(sig)
        assert_clean_exit(term, term.exit_status())
