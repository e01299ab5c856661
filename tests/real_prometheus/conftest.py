"""Fleet tests' helpers: simulator processes, a real Prometheus (Debian's package, fetched and unpacked by
setup_prometheus.sh, cached) and VictoriaMetrics (setup_victoria.sh), and `mtpwatch` run in a
pseudo-terminal as a user runs it."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mtpwatch.commands.options import free_port

HERE = Path(__file__).resolve().parent
SCRAPE_INTERVAL_S = 1


def prometheus_binary() -> str:
    """The cached binary; runs setup.sh (apt-get download + dpkg -x, cached) when it is not there yet."""
    path = os.environ.get("MTPWATCH_PROMETHEUS")
    if path and os.access(path, os.X_OK):
        return path
    out = subprocess.run(
        ["bash", str(HERE / "setup_prometheus.sh")], capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, f"tests/real_prometheus/setup_prometheus.sh failed:\n{out.stderr[-2000:]}"
    line = next(x for x in out.stdout.splitlines() if x.startswith("export MTPWATCH_PROMETHEUS="))
    return line.split("=", 1)[1]


def victoria_binary() -> str:
    """Debian's victoria-metrics, cached; runs setup_victoria.sh (apt-get download + dpkg -x) when absent."""
    path = os.environ.get("MTPWATCH_VICTORIA")
    if path and os.access(path, os.X_OK):
        return path
    out = subprocess.run(
        ["bash", str(HERE / "setup_victoria.sh")], capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, f"tests/real_prometheus/setup_victoria.sh failed:\n{out.stderr[-2000:]}"
    line = next(x for x in out.stdout.splitlines() if x.startswith("export MTPWATCH_VICTORIA="))
    return line.split("=", 1)[1]


class Procs:
    """Processes a test starts; each in its own session, stopped (group SIGTERM, then SIGKILL) at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[str]:
        proc = subprocess.Popen(argv, start_new_session=True, text=True, **kwargs)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@pytest.fixture
def procs() -> Iterator[Procs]:
    p = Procs()
    try:
        yield p
    finally:
        p.stop()


def start_sims(procs: Procs, *extra: list[str]) -> list[str]:
    """One `mtpwatch sim` process per entry of `extra` (its flags); their URLs."""
    urls: list[str] = []
    started = []
    for flags in extra:
        proc = procs.start(
            [sys.executable, "-m", "mtpwatch", "sim", "--port", "0", "--log-interval", "60", *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        started.append(proc)
    for proc in started:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert " on http://" in line, line
        urls.append(line.rsplit(" on ", 1)[1].strip())
    return urls


def start_prometheus(procs: Procs, tmp: Path, targets: list[str], interval_s: int = SCRAPE_INTERVAL_S) -> str:
    """Prometheus scraping `targets` (host:port) every `interval_s`; ready when /-/ready answers 200."""
    binary = prometheus_binary()
    port = free_port()
    config = tmp / "prometheus.yml"
    hosts = ", ".join(f'"{t}"' for t in targets)
    config.write_text(
        f"global: {{scrape_interval: {interval_s}s, evaluation_interval: {interval_s}s}}\n"
        "scrape_configs:\n"
        f"  - job_name: vllm\n    static_configs:\n      - targets: [{hosts}]\n"
    )
    log = (tmp / "prometheus.log").open("w")
    procs.start(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/-/ready", timeout=1).status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("Prometheus not ready within 60 s:\n" + (tmp / "prometheus.log").read_text()[-2000:])


ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\x1b\][^\x07]*\x07")


class Tty:
    """`mtpwatch ARGS` in a pseudo-terminal; `screen` is everything it drew, escapes removed."""

    def __init__(self, procs: Procs, args: list[str], cols: int = 200, rows: int = 40) -> None:
        import fcntl
        import struct
        import termios

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
        self.proc = procs.start(
            [sys.executable, "-m", "mtpwatch", *args], stdin=slave, stdout=slave, stderr=slave, env=env
        )
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

    def wait_for(self, *needles: str, limit_s: float = 60.0) -> None:
        deadline = time.monotonic() + limit_s
        while not all(n in self.screen for n in needles):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"never saw {needles!r}; screen tail:\n{self.screen[-3000:]}")
            self.read(0.2)

    def quit(self, limit_s: float = 20.0) -> int:
        """Ctrl+Q; the exit status once the process ends (reading on so it never blocks on output)."""
        os.write(self.master, b"\x11")
        deadline = time.monotonic() + limit_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.read(0.1)
        code = self.proc.wait(timeout=5)
        os.close(self.master)
        return code
