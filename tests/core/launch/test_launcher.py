"""`core.launch.launcher.Launch`: the one way start, the app and the bench bring a server up."""

from __future__ import annotations

import sys
from pathlib import Path

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


async def test_a_server_that_dies_says_why_in_its_one_line() -> None:
    """The error's one line carries the log's root cause, not the wrapper that points at it."""
    script = (
        "import sys\n"
        "print('ERROR 12-01 10:47:17 [core.py:1091] EngineCore failed to start.')\n"
        "print('Traceback (most recent call last):')\n"
        "print('ValueError: Free memory on device cuda:0 (3.21/112.06 GiB) on startup is less than "
        "desired')\n"
        "print('RuntimeError: Engine core initialization failed. See root cause above.', flush=True)\n"
        "sys.exit(1)\n"
    )
    launch = Launch([sys.executable, "-c", script])
    await launch.start()
    with pytest.raises(StartupError) as info:
        await launch.wait_ready(f"http://127.0.0.1:{free_port()}", 30)
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        "server exited with status 1 before answering /health: ValueError: Free memory on device cuda:0 "
        "(3.21/112.06 GiB) on startup is less than desired"
    )
    await launch.stop()


def test_failure_reason_of_a_log_tail() -> None:
    from mtpwatch.core.launch.logparse import REASON_MAX, failure_reason

    assert failure_reason([]) is None
    assert failure_reason(["INFO 12-01 10:47:17 [x.py:1] starting", "killed by the OOM killer"]) == (
        "killed by the OOM killer"
    )
    assert failure_reason(["RuntimeError: Engine core initialization failed. See root cause above."]) == (
        "RuntimeError: Engine core initialization failed. See root cause above."
    )
    long = failure_reason(["ValueError: " + "x" * 1000])
    assert long is not None and len(long) == REASON_MAX and long.endswith("…")


def test_a_leading_mtpwatch_is_the_running_one(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from mtpwatch.core.launch.launcher import resolve_self

    assert resolve_self(["mtpwatch", "sim", "--speed", "10"]) == [sys.executable, "-m", "mtpwatch", "sim",
                                                                  "--speed", "10"]  # fmt: skip
    assert resolve_self(["./mtpwatch", "sim"]) == ["./mtpwatch", "sim"]
    assert resolve_self(["vllm", "serve", "mtpwatch"]) == ["vllm", "serve", "mtpwatch"]
    assert Launch(["mtpwatch", "sim"]).argv[:3] == (sys.executable, "-m", "mtpwatch")


async def test_a_commands_simulators_share_its_own_gpu_and_nobody_elses(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two simulators at vLLM's default 0.9 from one command collide on its GPU, with vLLM's reason in
    the error; a third with another command's ledger (another user's sweep) does not see them."""
    from pathlib import Path

    from mtpwatch.core.launch.simledger import SIM_LEDGER_ENV, command_ledger_dir

    monkeypatch.delenv(SIM_LEDGER_ENV, raising=False)
    sim = [sys.executable, "-m", "mtpwatch", "sim", "--speed", "40", "serve", "google/gemma-4-E4B-it"]
    ports = [free_port() for _ in range(3)]
    first = Launch([*sim, "--port", str(ports[0])])
    second = Launch([*sim, "--port", str(ports[1])])
    other = Launch([*sim, "--port", str(ports[2])], env={SIM_LEDGER_ENV: str(Path(str(tmp_path)))})
    assert first.env[SIM_LEDGER_ENV] == second.env[SIM_LEDGER_ENV] == str(command_ledger_dir())
    try:
        await first.start()
        await first.wait_ready(f"http://127.0.0.1:{ports[0]}", 120)
        await other.start()
        await other.wait_ready(f"http://127.0.0.1:{ports[2]}", 120)
        await second.start()
        with pytest.raises(StartupError) as info:
            await second.wait_ready(f"http://127.0.0.1:{ports[1]}", 120)
        assert str(info.value).startswith(
            "server exited with status 1 before answering /health: ValueError: "
        )
        assert "Free memory on device cuda:0 (" in str(info.value)
    finally:
        for launch in (first, second, other):
            await launch.stop()


def test_a_kept_server_shares_the_per_user_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`start --keep` outlives the command, whose ledger folder goes at exit: a kept simulator must
    use the per-user ledger (a bare `mtpwatch sim`'s), so the next command sees what it holds."""
    from mtpwatch.core.launch.simledger import SIM_LEDGER_ENV

    monkeypatch.delenv(SIM_LEDGER_ENV, raising=False)
    sim = [sys.executable, "-m", "mtpwatch", "sim", "serve", "google/gemma-4-E4B-it", "--port", "1"]
    kept = Launch(sim, keep=True, log_path=tmp_path / "kept.log")
    assert SIM_LEDGER_ENV not in kept.env
    assert SIM_LEDGER_ENV in Launch(sim).env
