"""A new user's shell for the README's commands: their PATH, their terminal, the processes a line leaves.

`user_path()` is the PATH of someone who just cloned the repository: this test run's own virtual
environment is not on it, nor any other folder holding an `mtpwatch`. A line then finds `mtpwatch`
only where the README put it (``.venv/bin/mtpwatch`` after "Try it", the tool's bin folder after
"Install"). `Tty` runs one line in a pseudo-terminal, as typed at a prompt.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterable
from pathlib import Path

import httpx

UP = re.compile(r":(\d+) · ● up")
"""A pane header of a server that answers (the app's `HOST:PORT · ● up`)."""
TEST_BIN = Path(sys.executable).parent
"""The bin folder of the virtual environment running the tests (not on a new user's PATH)."""

ANSI = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\x1b\][^\x07]*\x07|\x1bP[^\x1b]*\x1b\\"
)


def user_path(*first: Path) -> str:
    """`first`, then this machine's PATH without the tests' venv and without any other `mtpwatch`."""
    keep: list[str] = [str(p) for p in first]
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or Path(entry).resolve() == TEST_BIN.resolve():
            continue
        if (Path(entry) / "mtpwatch").exists():
            continue  # an mtpwatch installed on this machine before: a new user has none
        keep.append(entry)
    return os.pathsep.join(keep)


def user_env(*first: Path, **extra: str) -> dict[str, str]:
    """The environment a README line runs in: no MTPWATCH_* settings, no config file, `user_path`."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(("MTPWATCH_", "VIRTUAL_ENV"))}
    out["PATH"] = user_path(*first)
    out["MTPWATCH_CONFIG"] = os.devnull  # no config file (a missing one is an error)
    out.update(extra)
    return out


def run(line: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`line` through bash, as typed; its whole process group is stopped if it outlives `timeout`."""
    proc = subprocess.Popen(
        ["bash", "-c", line], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        raise AssertionError(f"{line!r} ran past {timeout:.0f} s:\n{out[-2000:]}\n{err[-2000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def group_alive(pgid: int) -> list[int]:
    """The processes of process group `pgid` still alive (zombies excluded)."""
    alive: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text(errors="replace")
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        if len(fields) > 3 and int(fields[3]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry))
    return alive


class Tty:
    """One README line run by bash in a pseudo-terminal of `cols`×`rows`; `screen` is what it drew."""

    def __init__(self, line: str, cwd: Path, env: dict[str, str], cols: int = 160, rows: int = 48) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {**env, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
        self.line = line
        self.proc = subprocess.Popen(
            ["bash", "-c", line], cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
            start_new_session=True,
        )  # fmt: skip
        os.close(slave)
        self.master = master
        self.raw = b""

    def read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            with contextlib.suppress(OSError):  # the child closed the terminal
                self.raw += os.read(self.master, 1 << 16)

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", "replace"))

    def wait_for(self, *needles: str, limit_s: float = 180.0) -> None:
        """Until every needle has been drawn (generous: the machine may be loaded)."""
        deadline = time.monotonic() + limit_s
        while not all(n in self.screen for n in needles):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.line!r} never drew {needles!r}; screen tail:\n{self.screen[-3000:]}"
                )
            self.read(0.2)

    def wait_up(self, servers: int, limit_s: float = 300.0) -> None:
        """Until `servers` different servers' pane headers have said "HOST:PORT · ● up"; a pane that
        says "● failed" fails at once."""
        deadline = time.monotonic() + limit_s
        while len(set(UP.findall(self.screen))) < servers:
            if "● failed" in self.screen:
                raise AssertionError(f"{self.line!r}: a server failed; screen tail:\n{self.screen[-3000:]}")
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.line!r}: fewer than {servers} up; screen tail:\n{self.screen[-3000:]}"
                )
            self.read(0.2)

    def quit(self, limit_s: float = 60.0) -> int:
        """Ctrl+Q; the exit status once the line has ended and left no process of its group behind."""
        os.write(self.master, b"\x11")
        deadline = time.monotonic() + limit_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.read(0.1)
        if self.proc.poll() is None:
            kill_group(self.proc)
            raise AssertionError(f"{self.line!r} did not quit on Ctrl+Q:\n{self.screen[-3000:]}")
        code = self.proc.returncode
        while group_alive(self.proc.pid) and time.monotonic() < deadline:
            self.read(0.1)
        left = group_alive(self.proc.pid)
        os.close(self.master)
        assert not left, f"{self.line!r} left processes {left}"
        return code

    def close(self) -> None:
        if self.proc.poll() is None or group_alive(self.proc.pid):
            kill_group(self.proc)
        with contextlib.suppress(OSError):
            os.close(self.master)


def free_port(consecutive: int = 1) -> int:
    """A free loopback port (the first of `consecutive` free ones)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port: int = s.getsockname()[1]
        if port + consecutive > 65535:
            continue
        if all(_bindable(p) for p in range(port, port + consecutive)):
            return port
    raise AssertionError("no free ports")


def nothing_listens(port: int) -> bool:
    """No server accepts connections on loopback `port` (a port in TIME_WAIT counts as free)."""
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_healthy(urls: Iterable[str], limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    for url in urls:
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{url} never answered /health"
            time.sleep(0.2)
