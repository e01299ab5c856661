"""`mtpwatch bench` as a hostile user runs it: bad flags, unwritable outputs, Ctrl-C, SIGTERM, bad servers.

Each test is the regression test of a bug found by adversarial QA (see the test's docstring).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mtpwatch.commands.bench import command
from mtpwatch.core.ab.arms import ArmRequest, ArmResult
from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.sim.harness import SimThread
from tests.reference import spec_counters

PROMPTS = [Prompt("p1", "one", "cat", 8)]
REFUSED = "127.0.0.1:1"  # nothing listens on port 1: any request would fail at once


def bench(*args: str) -> Result:
    return CliRunner().invoke(command, list(args))


def one_line_error(result: Result, code: int, *fragments: str) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    line = result.stderr.strip().splitlines()[-1]
    for fragment in fragments:
        assert fragment in line, line
    return line


@pytest.mark.parametrize("path", ["/proc/mtpwatch-qa.json", "/nonexistent-dir/x.json"])
def test_unwritable_json_fails_before_the_run(path: str) -> None:
    """Bug: the bench ran to the end, then died on write_text with a traceback (report lost)."""
    result = bench(REFUSED, "--json-file", path)
    line = one_line_error(result, 2, "--json-file")
    assert "connect" not in result.output  # failed before any request
    assert path in line or "does not exist" in line


def test_writable_probe_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    result = bench(REFUSED, "--json-file", str(target), "--prompts", "short", "--limit", "1", "--runs", "2")
    one_line_error(result, 1, "connection refused")
    assert not target.exists()


def test_negative_temperature_is_rejected() -> None:
    """Bug: --temperature -1 was sent to the server (the simulator accepted it)."""
    one_line_error(bench(REFUSED, "--temperature", "-1"), 2, "--temperature")


def test_unknown_prompt_set_lists_the_built_in_sets() -> None:
    """Bug: a mistyped set name said "prompt file not found: nosuchset"."""
    one_line_error(bench(REFUSED, "--prompts", "nosuchset"), 2, "built-in sets: long", "short")


@pytest.mark.parametrize("url", ["ftp://x", "http://", "http://127.0.0.1:99999"])
def test_bad_url_is_one_line_exit_1(url: str) -> None:
    """Bug: a bad URL was a usage error (three lines, exit 2); snapshot says it in one line, exit 1."""
    result = bench(url)
    one_line_error(result, 1, "bad server URL")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "flags", [["--runs", "0"], ["--runs", "-1"], ["--concurrency", "0"], ["--lengths", "abc"]]
)
def test_bad_numbers_are_usage_errors(flags: list[str]) -> None:
    one_line_error(bench(REFUSED, *flags), 2)


class FlakyArm:
    """Generates fine; its /metrics fails, or its counters reset (a restart) after `reset_after` scrapes."""

    def __init__(self, *, scrape_error: bool = False, reset_after: int | None = None) -> None:
        self.label = "flaky"
        self.scrape_error = scrape_error
        self.reset_after = reset_after
        self.scrapes = 0

    async def generate(self, request: ArmRequest) -> ArmResult:
        await asyncio.sleep(0)
        return ArmResult(8, 0.01, 100.0, text="x", token_ids=tuple(range(8)))

    async def counters(self) -> MetricsSnapshot | None:
        self.scrapes += 1
        if self.scrape_error:
            raise RuntimeError("metrics answered 500")
        n = float(self.scrapes)
        created = 1.0
        if self.reset_after is not None and self.scrapes > self.reset_after:
            n, created = n - self.reset_after, 2.0
        return spec_counters(n, 2 * n, n, (n,), 1, created)


async def test_unreadable_metrics_and_restarts_are_reported() -> None:
    """Bug: /metrics failures and server restarts were swallowed; acceptance silently showed '—'."""
    config = BenchConfig(prompts=PROMPTS, runs=4, warmup=1)
    runner = BenchRunner(config, FlakyArm(scrape_error=True), FlakyArm(reset_after=3))
    report = await runner.run()
    assert any("/metrics could not be read" in p and "500" in p for p in report.problems["a"])
    assert any("restarted" in p for p in report.problems["b"])
    doc = report.to_json()
    assert doc["problems"]["a"] and doc["problems"]["b"]
    assert doc["interrupted"] is None


async def test_partial_report_after_cancel_keeps_finished_runs() -> None:
    config = BenchConfig(prompts=PROMPTS, runs=50, warmup=1)
    runner = BenchRunner(config, FlakyArm(), FlakyArm())
    enough = asyncio.Event()

    def on_event(event: object) -> None:
        if len(runner.records) >= 6:
            enough.set()

    task = asyncio.create_task(runner.run(on_event))
    await asyncio.wait_for(enough.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    report = runner.partial_report("stopped by Ctrl-C")
    assert len(report.records) == len(runner.records) >= 6
    assert report.interrupted == "stopped by Ctrl-C"
    assert any("completed" in g for g in report.gate_failures())
    assert report.to_json()["runs"]


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[str, str]]:
    with (
        SimThread(preset="gemma4-e4b-gb10", spec=False, speed=10) as a,
        SimThread(preset="gemma4-e4b-gb10", spec=True, speed=10) as b,
    ):
        yield a, b


@pytest.mark.parametrize(
    ("sig", "code", "name"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")]
)
def test_interrupted_bench_prints_and_writes_what_it_measured(
    sims: tuple[str, str], tmp_path: Path, sig: signal.Signals, code: int, name: str, repo_root: Path
) -> None:
    """Bug: Ctrl-C printed only "Aborted!" and SIGTERM nothing; every measured run was lost."""
    out = tmp_path / "partial.json"
    argv = [sys.executable, "-m", "mtpwatch", "bench", "--ab", *sims, "--prompts", "long", "--runs", "40",
            "--progress", "--json-file", str(out)]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        cwd=repo_root,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stderr is not None and proc.stdout is not None
    ready = threading.Event()
    err: list[bytes] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        while chunk := proc.stderr.read1(4096):  # type: ignore[attr-defined]
            err.append(chunk)
            if b"[4/" in b"".join(err):
                ready.set()
        ready.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert ready.wait(120), "bench made no progress"
        proc.send_signal(sig)
        stdout = proc.stdout.read().decode()
        assert proc.wait(60) == code
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(10)
    stderr = b"".join(err).decode()
    assert "Traceback" not in stderr + stdout
    assert "PARTIAL REPORT" in stdout and f"stopped by {name}" in stdout
    assert f"stopped by {name}" in stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["interrupted"].startswith(f"stopped by {name}")
    assert len(doc["runs"]) >= 4
