"""Security: loopback by default, a warning for an open bind without a key, and the API key nowhere.

The key is looked for in every place a user or another local user could see it: the command
lines of every process the suite started (/proc/*/cmdline, world-readable), mtpwatch's output and
the server log it writes, JSON and CSV results, screenshots and tracebacks. The simulator must
require it on /v1/* (as vLLM does) while /health and /metrics stay open.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, ServerSpec
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import AuthError
from mtpwatch.core.launch.vllm_cmd import build_vllm_argv, server_env
from mtpwatch.sim.harness import SimThread, running_sim
from mtpwatch.ui.app import make_app
from tests.feeds import monitor_of
from tests.procs import carrying
from tests.waits import wait_for

from .conftest import MARK, ROOT, SHIM, TOKEN, run_mtpwatch

KEY = "sk-mtpwatch-" + TOKEN[:16]


def suite_cmdlines() -> list[str]:
    """Command lines of every live process that carries the suite's token (pytest excluded)."""
    return [" ".join(proc.argv) for proc in carrying(MARK, TOKEN)]


def listeners(port: int) -> list[str]:
    """Local addresses listening on `port` (from /proc/net/tcp and tcp6), as hex strings."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, state = fields[1], fields[3]
            if state == "0A" and int(address.rsplit(":", 1)[1], 16) == port:
                found.append(address.rsplit(":", 1)[0])
    return found


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1, ::1


def test_started_server_is_loopback_only_and_the_key_is_nowhere(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_file = tmp_path / "server.log"
    argv = [
        sys.executable, "-m", "mtpwatch", "start", "secret-model", "-k", "2", "--headless",
        "--port", str(port), "--vllm", f"{sys.executable} {SHIM}", "--status-interval", "0.5",
        "--log-file", str(log_file), "--", "--speed", "20",
    ]  # fmt: skip
    # The key comes from the environment, so that mtpwatch's own command line is clean too.
    env = {**os.environ, "VLLM_API_KEY": KEY}
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if " ready in " in line:
                break
        assert listeners(port) and set(listeners(port)) <= LOOPBACK, listeners(port)
        cmdlines = suite_cmdlines()
        assert any("secret-model" in c for c in cmdlines)  # the server is there ...
        assert not [c for c in cmdlines if KEY in c]  # ... and its key is not on any command line
        # the server requires the key it was given through the environment
        assert httpx.get(url + "/v1/models").status_code == 401
        assert httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        json_out = tmp_path / "ab.json"
        csv_out = tmp_path / "ab.csv"
        snap = run_mtpwatch("snapshot", url, "--json", env=env)
        assert snap.returncode == 0, snap.stderr
        bench = run_mtpwatch(
            "bench", "--ab", url, url, "--prompts", "short", "--limit", "1", "--runs", "2", "--warmup", "0",
            "--max-tokens", "8", "--json-file", str(json_out), "--csv", str(csv_out), env=env, timeout=120,
        )  # fmt: skip
        assert json_out.exists() and csv_out.exists(), bench.stderr
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "server stopped" in out
    for name, text in [
        ("mtpwatch start output", out),
        ("server log", log_file.read_text(encoding="utf-8")),
        ("snapshot --json", snap.stdout + snap.stderr),
        ("bench output", bench.stdout + bench.stderr),
        ("bench --json", json_out.read_text(encoding="utf-8")),
        ("bench --csv", csv_out.read_text(encoding="utf-8")),
    ]:
        assert text.strip(), name
        assert KEY not in text, name


def test_launched_argv_and_env_carry_the_key_the_right_way() -> None:
    argv = build_vllm_argv("M", k=2)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"  # loopback unless told
    assert KEY not in " ".join(argv) and server_env(KEY) == {"VLLM_API_KEY": KEY}


@pytest.mark.parametrize(
    ("key", "warned"), [(None, True), (KEY, False)], ids=["no-key-warns", "with-key-quiet"]
)
def test_non_loopback_bind_without_a_key_warns(key: str | None, warned: bool) -> None:
    """192.0.2.1 (TEST-NET-1) is no address of this machine: nothing ever listens beyond loopback."""
    env = {name: value for name, value in os.environ.items() if name != "VLLM_API_KEY"}
    if key:
        env["VLLM_API_KEY"] = key
    result = run_mtpwatch(
        "start", "m", "--headless", "--host", "192.0.2.1", "--port", str(free_port()),
        "--vllm", f"{sys.executable} {SHIM}", "--startup-timeout", "20", env=env,
    )  # fmt: skip
    assert "Traceback" not in result.stdout + result.stderr
    warning = [
        line for line in result.stderr.splitlines() if line.startswith("warning: the server listens on")
    ]
    assert bool(warning) is warned, result.stderr
    if warned:
        assert "192.0.2.1 without --api-key" in warning[0]
    assert result.returncode == 1  # the server cannot bind an address this machine does not have
    assert KEY not in result.stdout + result.stderr


async def test_screenshot_and_traceback_never_show_the_key(tmp_path: Path) -> None:
    async with running_sim(speed=20, api_key=KEY) as url:
        spec = ServerSpec(label="keyed", url=url, api_key=KEY)
        app = make_app(
            AppConfig(servers=[spec], display=DisplaySettings(scrape_interval_s=0.1, max_tokens=16))
        )
        async with app.run_test(size=(160, 48)) as pilot:
            panel = monitor_of(app.screen).panels[0]
            await wait_for(
                pilot, lambda: panel.view is not None and panel.view.status == "up", "up with the key"
            )
            monitor_of(app.screen).send("hello")
            await wait_for(pilot, lambda: panel.prompt_count == 1, "the prompt")
            assert panel.last_summary is not None and panel.last_summary.error is None
            svg = app.export_screenshot()
            await pilot.press("ctrl+q")
        assert "keyed" in svg and KEY not in svg
        # a wrong key: one line, no key in it
        async with VllmClient(url, api_key=KEY + "-wrong") as client:
            with pytest.raises(AuthError) as caught:
                await client.models()
        assert KEY not in str(caught.value)
    # what Textual prints when the app crashes: a traceback with every frame's locals
    from rich.console import Console
    from rich.traceback import Traceback

    launch = LaunchSpec(argv=tuple(build_vllm_argv("M")), env=server_env(KEY))
    keyed = ServerSpec(label="keyed", url="http://127.0.0.1:1", api_key=KEY, launch=launch)

    def crash(spec: ServerSpec) -> None:
        raise RuntimeError(f"crashed watching {spec.label}")

    try:
        crash(keyed)
    except RuntimeError as exc:
        console = Console(record=True, width=200, file=io.StringIO())
        console.print(Traceback.from_exception(type(exc), exc, exc.__traceback__, show_locals=True))
        text = console.export_text()
    assert "keyed" in text and KEY not in text


async def test_simulator_requires_the_key_on_v1_only() -> None:
    body = {"prompt": "hi", "max_tokens": 4}
    good = {"Authorization": f"Bearer {KEY}"}
    async with running_sim(speed=50, api_key=KEY) as url, httpx.AsyncClient(timeout=10) as http:
        for path in ("/v1/models",):
            assert (await http.get(url + path)).status_code == 401
            assert (await http.get(url + path, headers={"Authorization": "Bearer nope"})).status_code == 401
            assert (await http.get(url + path, headers=good)).status_code == 200
        assert (await http.post(url + "/v1/completions", json=body)).status_code == 401
        assert (await http.post(url + "/v1/chat/completions", json=body)).status_code == 401
        assert (await http.post(url + "/v1/completions", json=body, headers=good)).status_code == 200
        assert (await http.get(url + "/health")).status_code == 200
        assert (await http.get(url + "/metrics")).status_code == 200  # as vLLM: metrics stay open


def test_simulator_takes_the_key_from_the_environment() -> None:
    port = free_port()
    env = {**os.environ, "VLLM_API_KEY": KEY}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtpwatch", "sim", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(url + "/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        assert httpx.get(url + "/v1/models").status_code == 401
        assert httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert not [c for c in suite_cmdlines() if KEY in c]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_no_key_in_the_simulator_log() -> None:
    import io

    log = io.StringIO()
    with SimThread(speed=50, api_key=KEY, log=log) as url:
        httpx.post(
            url + "/v1/completions",
            json={"prompt": "hi", "max_tokens": 4},
            headers={"Authorization": f"Bearer {KEY}"},
        ).raise_for_status()
    assert "non-default args" in log.getvalue() and KEY not in log.getvalue()
