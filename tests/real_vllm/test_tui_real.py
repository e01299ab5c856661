"""(d) The TUI itself starts a real vLLM, watches it, shows non-zero acceptance after a prompt, and
leaves nothing behind when the user quits with Ctrl+Q (the "normal quit" path of a started server).

Runs after test_real_vllm.py (file order), when no other real server is up.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx
import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, ServerSpec
from mtpwatch.core.launch.vllm_cmd import build_vllm_argv
from mtpwatch.ui.app import make_app
from tests.feeds import monitor_of
from tests.waits import wait_for

from .conftest import VLLM_ARGS, VLLM_ENV, RealEnv

pytestmark = pytest.mark.real_vllm

PROMPT = (
    "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    + "The quick brown fox jumps over the lazy dog near the river"
)
STARTUP_LIMIT_S = 600.0


def processes_naming(model: Path, port: int) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and str(model) in cmdline and f"--port {port}" in cmdline:
            found.append(f"{entry}: {cmdline[:120]}")
    return found


async def test_tui_starts_real_vllm_shows_acceptance_and_quits_clean(real_env: RealEnv) -> None:
    port = free_port()
    model = real_env.models / "gemma3-270m"
    argv = build_vllm_argv(
        str(model), method="ngram", k=4, port=port, vllm=str(real_env.vllm),
        served_model_name="spec-tui", extra=VLLM_ARGS,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    launch = LaunchSpec(argv=tuple(argv), env=dict(VLLM_ENV), kind="vllm", startup_timeout_s=STARTUP_LIMIT_S)
    config = AppConfig(
        servers=[ServerSpec(label="ngram", url=url, launch=launch)],
        display=DisplaySettings(scrape_interval_s=0.25, max_tokens=64),
    )
    app = make_app(config)
    t0 = time.monotonic()
    async with app.run_test(size=(160, 48)) as pilot:
        panel = monitor_of(app.screen).panels[0]
        await wait_for(
            pilot, lambda: panel.view is not None and panel.view.status == "up", "/health", STARTUP_LIMIT_S
        )
        started_s = time.monotonic() - t0
        assert processes_naming(model, port), "the server mtpwatch started is not running"
        view = panel.view
        assert view is not None and view.speculative and view.k == 4
        await pilot.press(*PROMPT, "enter")
        await wait_for(pilot, lambda: panel.prompt_count == 1, "the prompt to finish", 120.0)
        summary = panel.last_summary
        assert summary is not None and summary.error is None, summary
        assert summary.tokens == 64  # exact count from the stream's usage
        assert summary.acceptance_rate is not None and summary.acceptance_rate > 0
        await wait_for(
            pilot, lambda: bool(panel.view and panel.view.acceptance_rate), "acceptance in the panel", 30.0
        )
        await pilot.press("ctrl+q")
    # Quitting stopped the server and all its children (EngineCore, worker).
    for _ in range(150):
        if not processes_naming(model, port):
            break
        await asyncio.sleep(0.2)  # polling /proc: nothing to wait on
    assert processes_naming(model, port) == []
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(url + "/health", timeout=5)
    print(f"TUI-started vLLM was up in {started_s:.0f} s")
