"""ServerProcess: output, health, stop of the whole tree, and no orphans however mtpwatch ends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.core.launch import process
from mtpwatch.core.launch.process import ServerProcess, StartupError, descendants, group_members


def live_groups() -> list[int]:
    """Process-group ids that mtpwatch still owns (and would stop on exit)."""
    return sorted(process._REGISTRY)


# A server stand-in: a leader with a child in its group and a grandchild that left it (setsid).
TREE = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    child = subprocess.Popen(sleep)
    escaped = subprocess.Popen(sleep, start_new_session=True)
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stderr.buffer.write(b"to stderr \\xff\\xfe\\n")
    sys.stderr.flush()
    print(f"ready {os.getpid()} {child.pid} {escaped.pid}", flush=True)
    if mode == "exit-early":
        sys.exit(7)
    if mode == "many":
        for i in range(50):
            print(f"line {i}", flush=True)
    time.sleep(600)
    """
)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(cond: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


async def async_wait_until(cond: Callable[[], bool], limit_s: float = 30.0) -> bool:
    """Like wait_until, without blocking the event loop that does the work being waited for."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.05)
    return cond()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    path = tmp_path / "tree.py"
    path.write_text(TREE)
    return path


async def start_tree(tree: Path, mode: str = "") -> tuple[ServerProcess, list[int]]:
    proc = await ServerProcess.start([sys.executable, str(tree), mode])
    async for line in proc.lines():
        if line.startswith("ready "):
            return proc, [int(x) for x in line.split()[1:]]
    raise AssertionError(f"tree did not start: {proc.tail()}")


async def test_lines_merge_stderr_and_replace_bad_bytes(tree: Path) -> None:
    proc = await ServerProcess.start([sys.executable, str(tree), "many"])
    try:
        seen = []
        async for line in proc.lines():
            seen.append(line)
            if line == "line 49":
                break
        assert "to stderr \ufffd\ufffd" in seen
        assert seen[-50:] == [f"line {i}" for i in range(50)]
        assert proc.pgid in live_groups()
    finally:
        await proc.stop(timeout=5)
    assert proc.pgid not in live_groups()


async def test_ring_keeps_the_last_lines_and_slow_readers_skip(tree: Path) -> None:
    proc = await ServerProcess.start([sys.executable, str(tree), "many"], ring_lines=10)
    try:
        seen = []
        async for line in proc.lines():
            seen.append(line)
            if line == "line 49":
                break
        assert proc.tail() == [f"line {i}" for i in range(40, 50)]
        assert proc.tail(2) == ["line 48", "line 49"]
        # A reader that fell behind the 10-line ring skipped lines, one that kept up read them all:
        # either way each line at most once, in order (how many were skipped depends on the machine).
        numbered = [int(s.split()[1]) for s in seen if s.startswith("line ")]
        assert numbered == sorted(set(numbered)) and numbered[-1] == 49
    finally:
        await proc.stop(timeout=5)


async def test_stop_terminates_group_and_setsid_descendants(tree: Path) -> None:
    proc, (leader, child, escaped) = await start_tree(tree)
    assert leader == proc.pid
    assert set(group_members(proc.pgid)) == {leader, child}
    assert escaped in descendants(leader)
    code = await proc.stop(timeout=10)
    assert code == -signal.SIGTERM
    assert proc.returncode == -signal.SIGTERM
    assert await async_wait_until(lambda: not any(alive(p) for p in (leader, child, escaped)))
    assert group_members(proc.pgid) == []


async def test_stop_escalates_to_sigkill(tree: Path) -> None:
    proc, pids = await start_tree(tree, "ignore-term")
    code = await proc.stop(timeout=0.5)
    assert code == -signal.SIGKILL
    assert await async_wait_until(lambda: not any(alive(p) for p in pids))


async def test_leader_exiting_alone_takes_its_children_along(tree: Path) -> None:
    proc, (_, child, escaped) = await start_tree(tree, "exit-early")
    assert await proc.wait() == 7
    assert await async_wait_until(lambda: not alive(child) and not alive(escaped))
    assert await async_wait_until(lambda: proc.pgid not in live_groups())


async def test_wait_healthy_fails_early_with_exit_status_and_tail() -> None:
    code = "import sys; print('boom: Address already in use', flush=True); sys.exit(3)"
    proc = await ServerProcess.start([sys.executable, "-c", code])
    with pytest.raises(StartupError) as info:
        await proc.wait_healthy("http://127.0.0.1:9", timeout=60, poll=0.2)
    assert info.value.returncode == 3
    assert "status 3" in str(info.value)
    assert "boom: Address already in use" in info.value.tail


async def test_wait_healthy_returns_when_health_answers_200() -> None:
    port = free_port()
    server = textwrap.dedent(
        f"""
        import http.server, time
        time.sleep(0.3)  # a server that is not up at once
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200 if self.path == "/health" else 404)
                self.end_headers()
            def log_message(self, *a):
                pass
        http.server.HTTPServer(("127.0.0.1", {port}), H).serve_forever()
        """
    )
    proc = await ServerProcess.start([sys.executable, "-c", server])
    try:
        elapsed = await proc.wait_healthy(f"http://127.0.0.1:{port}", timeout=60, poll=0.1)
        assert elapsed > 0
        assert proc.returncode is None
    finally:
        await proc.stop(timeout=5)


async def test_wait_healthy_timeout_leaves_process_running() -> None:
    proc = await ServerProcess.start([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with pytest.raises(StartupError, match="no answer"):
            await proc.wait_healthy(f"http://127.0.0.1:{free_port()}", timeout=0.3, poll=0.1)
        assert proc.returncode is None
    finally:
        await proc.stop(timeout=5)


async def test_missing_program_is_one_clear_error() -> None:
    with pytest.raises(StartupError) as info:
        await ServerProcess.start(["/nonexistent/vllm", "serve"])
    assert "cannot run '/nonexistent/vllm'" in str(info.value)
    assert "\n" not in str(info.value)


async def test_keep_writes_log_file_and_detach_forgets(tmp_path: Path) -> None:
    """Every line the child writes comes back, also those it wrote before the pump first ran.

    The pump used to open the log and seek to its end when it first ran: on a loaded machine the
    child had written its first lines by then, and they were lost (`start --keep` missed vLLM's
    first lines; this test hung). Here the pump starts late on purpose: `start()` returns without
    letting its task run, and the test holds the event loop (no await) until the child has written
    everything. Lines of an earlier run in the same (appended) log do not come back.
    """
    log = tmp_path / "server.log"
    log.write_text("a line of an earlier run\n")
    expected = [f"kept line {i}" for i in range(200)] + ["done"]
    child = (
        "import time\n"
        "for i in range(200): print(f'kept line {i}')\n"
        "print('done', flush=True)\ntime.sleep(600)"
    )
    proc = await ServerProcess.start([sys.executable, "-c", child], keep=True, log_path=log)
    try:
        assert proc.pgid not in live_groups()
        assert proc.tail() == []  # the pump has not run yet
        # The synchronous wait blocks the loop: the pump first reads after the child wrote it all.
        assert wait_until(lambda: log.read_text().endswith("done\n"), timeout=120), log.read_text()[-200:]

        async def read_until_done() -> list[str]:
            got = []
            async for line in proc.lines():
                got.append(line)
                if line == "done":
                    break
            return got

        assert await asyncio.wait_for(read_until_done(), timeout=120) == expected
        assert log.read_text().splitlines() == ["a line of an earlier run", *expected]
    finally:
        await proc.stop(timeout=5)


# --- whole-program behaviour: drivers run in their own interpreter ------------------------------

DRIVER_PLAIN = textwrap.dedent(
    """
    import asyncio, json, sys
    from mtpwatch.core.launch.process import ServerProcess, install_signal_handlers
    mode, tree = sys.argv[1], sys.argv[2]

    async def main():
        proc = await ServerProcess.start([sys.executable, tree])
        async for line in proc.lines():
            if line.startswith("ready "):
                print(json.dumps([int(x) for x in line.split()[1:]]), flush=True)
                break
        if mode == "exit":
            return
        if mode == "crash":
            raise RuntimeError("mtpwatch bug")
        await asyncio.sleep(600)

    if mode != "nohandlers":
        install_signal_handlers()
    asyncio.run(main())
    """
)

DRIVER_TEXTUAL = textwrap.dedent(
    """
    import json, sys
    from textual.app import App
    from mtpwatch.core.launch.process import ServerProcess, install_signal_handlers
    tree = sys.argv[1]

    class Driver(App[None]):
        async def on_mount(self) -> None:
            # After Textual set up its own signal handling: chain to it, and exit the app cleanly.
            install_signal_handlers(on_signal=lambda signum: self.exit(return_code=128 + signum))
            self.proc = await ServerProcess.start([sys.executable, tree])
            async for line in self.proc.lines():
                if line.startswith("ready "):
                    print(json.dumps([int(x) for x in line.split()[1:]]), file=sys.__stdout__, flush=True)
                    break

    app = Driver()
    app.run(headless=True)
    print("app exited cleanly", app.return_code, file=sys.__stdout__, flush=True)
    sys.exit(app.return_code or 0)
    """
)


def run_driver(
    tmp_path: Path, repo_root: Path, script: str, args: list[str]
) -> tuple[subprocess.Popen[str], list[int]]:
    driver = tmp_path / "driver.py"
    driver.write_text(script)
    env = dict(os.environ, PYTHONPATH=str(repo_root))
    proc = subprocess.Popen(
        [sys.executable, str(driver), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=30)
        raise AssertionError(f"driver failed: {proc.stderr.read() if proc.stderr else ''}")
    return proc, json.loads(line)


@pytest.mark.parametrize(
    ("mode", "sig", "expected_rc"),
    [
        ("exit", None, 0),
        ("crash", None, 1),
        ("wait", signal.SIGTERM, 128 + signal.SIGTERM),
        ("wait", signal.SIGHUP, 128 + signal.SIGHUP),
    ],
)
def test_no_orphans_after_exit_crash_sigterm_sighup(
    tmp_path: Path, tree: Path, mode: str, sig: int | None, expected_rc: int, repo_root: Path
) -> None:
    driver, pids = run_driver(tmp_path, repo_root, DRIVER_PLAIN, [mode, str(tree)])
    if sig is not None:
        driver.send_signal(sig)
    assert driver.wait(timeout=60) == expected_rc
    assert wait_until(lambda: not any(alive(p) for p in pids)), [p for p in pids if alive(p)]


def test_sigkill_of_mtpwatch_still_terminates_the_server(tmp_path: Path, tree: Path, repo_root: Path) -> None:
    driver, (leader, child, escaped) = run_driver(tmp_path, repo_root, DRIVER_PLAIN, ["wait", str(tree)])
    driver.kill()
    driver.wait(timeout=30)
    # PR_SET_PDEATHSIG: the kernel sends the leader SIGTERM (vLLM then stops its engine itself).
    assert wait_until(lambda: not alive(leader))
    for pid in (child, escaped):  # the test tree's sleepers have no vLLM to stop them: do it here
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_textual_app_stops_children_on_signal_and_exits_cleanly(
    tmp_path: Path, tree: Path, sig: int, repo_root: Path
) -> None:
    driver, pids = run_driver(tmp_path, repo_root, DRIVER_TEXTUAL, [str(tree)])
    driver.send_signal(sig)
    assert driver.wait(timeout=60) == 128 + sig
    assert driver.stdout is not None
    assert "app exited cleanly" in driver.stdout.read()
    assert wait_until(lambda: not any(alive(p) for p in pids))


def test_handlers_chain_and_nohup_ignored_signal_stays_ignored() -> None:
    calls: list[int] = []
    old_usr = signal.signal(signal.SIGUSR1, lambda s, f: calls.append(s))
    old_usr2 = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        process.install_signal_handlers(signals=(signal.SIGUSR1, signal.SIGUSR2))
        process.install_signal_handlers(signals=(signal.SIGUSR1,))  # idempotent: no double wrap
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
        handler = signal.getsignal(signal.SIGUSR1)
        assert isinstance(handler, process._ChainedHandler)
        assert not isinstance(handler.previous, process._ChainedHandler)
        os.kill(os.getpid(), signal.SIGUSR1)
        assert wait_until(lambda: calls == [signal.SIGUSR1], timeout=5)
    finally:
        signal.signal(signal.SIGUSR1, old_usr)
        signal.signal(signal.SIGUSR2, old_usr2)
