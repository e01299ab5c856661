"""A real Prometheus (Debian's package, fetched and unpacked by setup.sh) scraping simulator processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
SCRAPE_INTERVAL_S = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def prometheus_binary() -> str:
    """The cached binary; runs setup.sh (apt-get download + dpkg -x, cached) when it is not there yet."""
    path = os.environ.get("MTPWATCH_PROMETHEUS")
    if path and os.access(path, os.X_OK):
        return path
    out = subprocess.run(
        ["bash", str(HERE / "setup.sh")], capture_output=True, text=True, timeout=600, check=False
    )
    assert out.returncode == 0, f"tests/prometheus/setup.sh failed:\n{out.stderr[-2000:]}"
    line = next(x for x in out.stdout.splitlines() if x.startswith("export MTPWATCH_PROMETHEUS="))
    return line.split("=", 1)[1]


class Procs:
    """Processes a test starts; each in its own session, stopped (group SIGTERM, then SIGKILL) at the end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, argv: list[str], **kwargs: object) -> subprocess.Popen[str]:
        proc = subprocess.Popen(argv, start_new_session=True, text=True, **kwargs)  # type: ignore[call-overload]
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
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/-/ready", timeout=1).status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("Prometheus not ready within 30 s:\n" + (tmp / "prometheus.log").read_text()[-2000:])
