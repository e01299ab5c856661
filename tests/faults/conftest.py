"""The fault matrix: shared helpers, and the check that no server process outlives a test.

Every process a test starts (simulators, `mtpwatch` commands, the servers they launch, vLLM's
`VLLM::EngineCore`/`VLLM::Worker` children) inherits ``MTPWATCH_FAULT_SUITE=<token>``; after each
test, no live process but pytest itself may still carry it.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.pilot import Pilot

from mtpwatch.commands.options import free_port
from mtpwatch.config import ServerSpec
from mtpwatch.session.watch import ServerFeed
from mtpwatch.ui.app import MtpWatchApp
from tests.feeds import monitor_of, server_feeds
from tests.procs import carrying
from tests.waits import wait_for

ROOT = Path(__file__).resolve().parents[2]
SHIM = Path(__file__).resolve().parent / "vllm_shim.py"
MARK = "MTPWATCH_FAULT_SUITE"
TOKEN = uuid.uuid4().hex
os.environ[MARK] = TOKEN  # inherited by every process the suite starts


def marked_processes() -> list[str]:
    """'pid comm: cmdline' of live processes (other than this one) that carry the suite's token."""
    return [proc.line(160) for proc in carrying(MARK, TOKEN)]


@pytest.fixture(autouse=True)
def no_process_left() -> Iterator[None]:
    """Fail a test that leaves a simulator, vLLM (EngineCore/Worker included) or mtpwatch running."""
    yield
    deadline = time.monotonic() + 10.0
    left = marked_processes()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = marked_processes()
    if left:
        for line in left:  # do not let one failure leak into the next tests
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
        pytest.fail("processes left behind:\n" + "\n".join(left), pytrace=False)


def one_error_line(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """The command failed with status 1 and said why in exactly one `Error:` line, no traceback."""
    assert result.returncode == 1, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def run_mtpwatch(*args: str, timeout: float = 60.0, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mtpwatch", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


async def sim_fault(url: str, body: dict[str, Any]) -> None:
    async with httpx.AsyncClient(timeout=5.0) as http:
        (await http.post(url + "/sim/fault", json=body)).raise_for_status()


def status_of(app: MtpWatchApp, index: int = 0) -> tuple[str, str]:
    """(status, status line) of a panel as drawn."""
    view = monitor_of(app.screen).panels[index].view
    return ("none", "") if view is None else (view.status, view.status_detail)


def bad_numbers(obj: Any, path: str = "") -> list[str]:
    """Fields of a view (recursively) that are NaN, infinite or negative."""
    import dataclasses

    if obj is None or isinstance(obj, (bool, str)):
        return []
    if isinstance(obj, (int, float)):
        return [] if math.isfinite(obj) and obj >= 0 else [f"{path}={obj!r}"]
    if isinstance(obj, (tuple, list)):
        return [bad for i, item in enumerate(obj) for bad in bad_numbers(item, f"{path}[{i}]")]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [bad for f in dataclasses.fields(obj) for bad in bad_numbers(getattr(obj, f.name), f.name)]
    return []


async def assert_numbers_match_fresh_attach(
    pilot: Pilot[Any], app: MtpWatchApp, url: str, index: int = 0
) -> None:
    """After recovery, a prompt's numbers in the app equal those of a freshly attached feed.

    The fresh feed scrapes the idle server before and after the prompt the app sends; counter deltas
    (tokens, drafts, acceptance, mean acceptance length, per position) and the totals since the
    server started must be identical, and nothing on screen may be negative or NaN.
    """
    feed = server_feeds(app.screen)[index]
    panel = monitor_of(app.screen).panels[index]
    fresh = ServerFeed(ServerSpec(label="fresh", url=url), feed.state().display)
    try:
        await wait_for(pilot, lambda: not monitor_of(app.screen).generating, "the app to be idle")
        await fresh.poll()
        assert fresh.watch.status == "up", fresh.watch.reason
        count = panel.prompt_count
        monitor_of(app.screen).send("numbers after recovery")
        await wait_for(pilot, lambda: panel.prompt_count == count + 1, "the prompt after recovery")
        summary = panel.last_summary
        assert summary is not None and summary.error is None, summary
        await fresh.poll()
        mine = feed.state().prompt_rates
        theirs = fresh.watch.collector.window(1e9, fresh.clock())
        assert mine is not None and theirs is not None
        for name in ("generation_tokens", "drafts", "draft_tokens", "accepted", "accepted_per_pos"):
            assert getattr(mine, name) == getattr(theirs, name), name
        for name in ("acceptance_rate", "mean_acceptance_length", "per_position"):
            assert getattr(mine, name) == getattr(theirs, name), name
        assert mine.generation_tokens == summary.tokens > 0
        a, b = feed.watch.collector.latest, fresh.watch.collector.latest
        assert a is not None and b is not None
        for name in ("generation_tokens", "drafts", "draft_tokens", "accepted", "speculative", "created"):
            assert getattr(a, name) == getattr(b, name), name
        for window in ("10 s", "60 s", "prompt"):
            assert bad_numbers(feed.view(window)) == [], window
    finally:
        await fresh.close()


@dataclass
class SimProcess:
    """`mtpwatch sim` as its own process (so it can be SIGKILLed), on a fixed port."""

    port: int
    args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SimProcess:
        argv = [sys.executable, "-m", "mtpwatch", "sim", "--port", str(self.port), *self.args]
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60  # a loaded machine takes a while to start Python
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, "the simulator exited"
            time.sleep(0.05)
        raise AssertionError("the simulator did not start")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)


@pytest.fixture
def sim_process() -> Iterator[Callable[..., SimProcess]]:
    started: list[SimProcess] = []

    def make(*args: str, port: int | None = None) -> SimProcess:
        sim = SimProcess(port or free_port(), args).start()
        started.append(sim)
        return sim

    yield make
    for sim in started:
        sim.kill()
