"""One way to bring a server up: start it, follow its log, wait for `/health`.

`mtpwatch start`, the app (a `ServerSpec` with a launch) and the A/B bench (a launched arm) all
start servers through `Launch`, so they share one behaviour: the process group is owned
(`ServerProcess`), every log line goes through one `LogWatcher` (phases, facts, failure hints), the
log is read for as long as the server lives (a full pipe would block the server), and a server that
dies or never answers is reported the same way (`StartupError`: one line, exit status, log tail, and
the watcher's hints)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from mtpwatch.core.launch.logparse import LogEvent, LogWatcher, failure_reason
from mtpwatch.core.launch.process import ServerProcess, StartupError
from mtpwatch.core.launch.simledger import scoped_env


def resolve_self(argv: Sequence[str]) -> list[str]:
    """`argv` with a leading bare ``mtpwatch`` replaced by this interpreter's ``python -m mtpwatch``, so
    that ``--vllm "mtpwatch sim ..."`` runs the running mtpwatch's simulator even when its virtual
    environment is not on ``PATH`` (after ``.venv/bin/pip install .``). A path (``./mtpwatch``) is
    kept."""
    out = list(argv)
    if out and out[0] == "mtpwatch":
        return [sys.executable, "-m", "mtpwatch", *out[1:]]
    return out


def kept_log_path(url: str) -> Path:
    """Where a `keep` server logs (it outlives mtpwatch's pipe): `vllm-PORT-STAMP.log` under
    ``$MTPWATCH_CACHE_DIR/logs`` (default ``~/.cache/mtpwatch/logs``)."""
    cache = Path(os.environ.get("MTPWATCH_CACHE_DIR", Path.home() / ".cache" / "mtpwatch"))
    return cache / "logs" / f"vllm-{url.rsplit(':', 1)[1]}-{time.strftime('%Y%m%d-%H%M%S')}.log"


class Launch:
    """A server being started (`start`, `wait_ready`, `stop`): its process, its followed log, and the
    wait for readiness."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        keep: bool = False,
        log_path: str | os.PathLike[str] | None = None,
        on_line: Callable[[str], None] | None = None,
        on_event: Callable[[LogEvent], None] | None = None,
    ) -> None:
        """`argv`: the server's full command line (see `resolve_self`). `env`: variables added to
        mtpwatch's environment (an API key travels here, never in argv), with this command's own
        simulated-GPU ledger (`simledger.scoped_env`); a `keep` server, which may outlive mtpwatch,
        shares the per-user ledger as a bare `mtpwatch sim` does, so the next command's simulators see
        what it holds. `log_path`: the log goes there, not to a pipe (`keep` needs one). `on_line` gets
        every log line in order, `on_event` every phase, fact, hint and spec line the watcher finds."""
        self.argv = tuple(resolve_self(argv))
        self.env = dict(env or {}) if keep else scoped_env(env or {})
        self.keep = keep
        self.log_path = log_path
        self.on_line = on_line
        self.on_event = on_event
        self.watcher = LogWatcher()
        self._process: ServerProcess | None = None
        self._follow: asyncio.Task[None] | None = None

    @property
    def process(self) -> ServerProcess:
        if self._process is None:
            raise RuntimeError("Launch.start() has not run")
        return self._process

    @property
    def started(self) -> bool:
        return self._process is not None

    def drop_lines(self) -> None:
        """Stop handing log lines to `on_line`: from here on the log is read and dropped (the
        watcher still reads each line)."""
        self.on_line = None

    async def start(self) -> ServerProcess:
        """Start the process and begin following its log. Raises `StartupError` (cannot run)."""
        self._process = await ServerProcess.start(self.argv, self.env, keep=self.keep, log_path=self.log_path)
        self._follow = asyncio.create_task(self._follow_log())
        return self._process

    def _emit(self, events: list[LogEvent]) -> None:
        if self.on_event is not None:
            for event in events:
                self.on_event(event)

    async def _follow_log(self) -> None:
        async for line in self.process.lines():
            events = self.watcher.feed(line)
            if self.on_line is not None:
                self.on_line(line)
            self._emit(events)

    async def wait_ready(
        self, url: str, timeout_s: float, *, headers: Mapping[str, str] | None = None, poll_s: float = 0.25
    ) -> float:
        """Wait until `GET {url}/health` answers 200; returns the seconds since the start. Raises
        `StartupError` when the server exits first or `timeout_s` passes, and marks the watcher failed
        (its `hints` say why, when the log told). An exited server's one line carries why
        (`failure_reason`: "server exited with status 1 before answering /health: ValueError: Free
        memory on device ..."), for every report of it; one that timed out is left running (`stop`)."""
        try:
            elapsed = await self.process.wait_healthy(url, timeout=timeout_s, poll=poll_s, headers=headers)
        except StartupError as exc:
            await asyncio.sleep(0)  # let the follower hand over the lines it already has
            self.watcher.mark_failed(exc.returncode)  # the caller reports the failure itself
            reason = failure_reason(exc.tail) if exc.returncode is not None else None
            if reason:
                raise StartupError(f"{exc}: {reason}", exc.returncode, exc.tail) from None
            raise
        self._emit(self.watcher.mark_ready())
        return elapsed

    async def stop(self, timeout_s: float = 10.0) -> int | None:
        """Stop the whole process group (SIGTERM, then SIGKILL) and stop following the log; idempotent."""
        code: int | None = None
        if self._process is not None:
            code = await self._process.stop(timeout=timeout_s)
        await self.close_log()
        return code

    async def close_log(self) -> None:
        """Stop following the log (the process, if kept, goes on writing to its log file)."""
        task, self._follow = self._follow, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
