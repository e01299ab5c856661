"""`mtpwatch sim` as a real subprocess, and `SimThread` for sync callers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import httpx
from click.testing import CliRunner

from mtpwatch.commands.sim import command
from mtpwatch.core.launch.vllm_cmd import is_loopback as _is_loopback
from mtpwatch.sim.harness import SimThread


def test_list_presets_and_bad_preset() -> None:
    runner = CliRunner()
    listed = runner.invoke(command, ["--list-presets"])
    assert listed.exit_code == 0 and "gemma4-31b-h100" in listed.output
    bad = runner.invoke(command, ["--preset", "nope"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_loopback_detection() -> None:
    assert _is_loopback("127.0.0.1") and _is_loopback("::1") and _is_loopback("localhost")
    assert not _is_loopback("0.0.0.0") and not _is_loopback("192.168.1.5")


def test_subprocess_prints_url_serves_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtpwatch", "sim", "--port", "0", "--speed", "20", "--startup-delay", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        url = None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if url is None and (m := re.search(r"serving .* on (http://127\.0\.0\.1:\d+)", line)):
                url = m.group(1)
            if "Application startup complete." in line:
                break
        assert url is not None, lines
        assert any("Loading weights took" in x for x in lines)
        assert httpx.get(url + "/health", timeout=10).status_code == 200
        assert httpx.get(url + "/version", timeout=10).headers["x-mtpwatch-sim"] == "1"
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0


def test_exit_fault_ends_the_process() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtpwatch", "sim", "--port", "0", "--fault-exit-after", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 1
    assert proc.stdout is not None and "ERROR" in proc.stdout.read()


def test_sim_thread_for_sync_callers() -> None:
    with SimThread(speed=50.0, served_model_name="t") as url:
        assert httpx.get(url + "/health").status_code == 200
        body = {"model": "t", "prompt": "x", "max_tokens": 5, "temperature": 0, "ignore_eos": True}
        resp = httpx.post(url + "/v1/completions", json=body, timeout=30)
        assert resp.json()["usage"]["completion_tokens"] == 5
    try:
        httpx.get(url + "/health", timeout=1)
    except httpx.TransportError:
        pass
    else:
        raise AssertionError("server still up after the with block")


def test_rust_frontend_flags() -> None:
    """`--frontend rust` implies vLLM 0.34's GPU log; with the 0.32 CPU log it is a usage error (the
    Rust frontend ships from 0.33)."""
    runner = CliRunner()
    bad = runner.invoke(command, ["--frontend", "rust", "--vllm-log", "0.32-cpu", "--port", "0"])
    assert bad.exit_code == 2 and "0.33 and later" in bad.output and "Traceback" not in bad.output
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtpwatch", "sim", "--port", "0", "--speed", "20", "--frontend", "rust"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        url, lines = None, []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if url is None and (m := re.search(r"serving .* on (http://127\.0\.0\.1:\d+)", line)):
                url = m.group(1)
            if "OpenAI server is ready to accept requests" in line:
                break
        assert url is not None, lines
        assert any("vLLM server version 0.34.0" in x for x in lines)
        assert httpx.get(url + "/version", timeout=10).json() == {
            "version": "0.34.0",
            "rust_frontend_version": "0.34.0",
        }
        metrics = httpx.get(url + "/metrics", timeout=10)
        assert metrics.headers["content-type"].startswith("application/openmetrics-text")
        assert httpx.get(url + "/metrics/?name%5B%5D=x", timeout=10).status_code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0
