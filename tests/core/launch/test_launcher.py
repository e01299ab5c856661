"""`core.launch.launcher.Launch`: the one way start, the app and the bench bring a server up."""

from __future__ import annotations

import sys

import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.core.launch.launcher import Launch
from mtpwatch.core.launch.logparse import LogEvent, Phase
from mtpwatch.core.launch.process import StartupError, group_members
from mtpwatch.core.launch.vllm_cmd import build_sim_argv


async def test_simulator_comes_up_with_phases_and_leaves_nothing() -> None:
    port = free_port()
    lines: list[str] = []
    events: list[LogEvent] = []
    launch = Launch(
        build_sim_argv("gemma4-e4b-gb10", port=port, startup_delay=0.3),
        on_line=lines.append,
        on_event=events.append,
    )
    proc = await launch.start()
    pgid = proc.pgid
    elapsed = await launch.wait_ready(f"http://127.0.0.1:{port}", 60)
    assert elapsed > 0
    assert launch.watcher.phase is Phase.READY
    assert any(e.kind == "phase" and e.text.startswith("ready") for e in events)
    assert lines, "the log was followed"
    await launch.stop()
    assert proc.returncode is not None
    assert group_members(pgid) == []


async def test_a_server_that_dies_raises_with_its_exit_status_and_tail() -> None:
    script = (
        "import sys; print('ValueError: No available memory for the cache blocks.', flush=True); sys.exit(3)"
    )
    launch = Launch([sys.executable, "-c", script])
    await launch.start()
    with pytest.raises(StartupError) as info:
        await launch.wait_ready(f"http://127.0.0.1:{free_port()}", 30)
    assert info.value.returncode == 3
    assert launch.watcher.phase is Phase.FAILED
    assert any("No available memory" in line for line in info.value.tail)
    await launch.stop()


async def test_a_program_that_cannot_run_is_one_line() -> None:
    launch = Launch(["/nonexistent/vllm", "serve", "m"])
    with pytest.raises(StartupError, match="cannot run"):
        await launch.start()
    assert not launch.started
