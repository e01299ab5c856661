"""Start, watch and stop a server process (vLLM or the simulator) that mtpwatch owns.

A `ServerProcess` runs its argv in its own session, so the server and every child it forks
(vLLM's EngineCore and workers) share one process group that mtpwatch can signal as a whole.
Its merged stdout/stderr is pumped continuously (a full pipe would block the server), kept in a
ring buffer and offered to any number of readers through `lines()`.

A module-level registry holds every live group that mtpwatch must not leave behind. It is
emptied on normal exit (atexit), on SIGTERM/SIGHUP once `install_signal_handlers()` ran, and on
an unhandled exception (atexit still runs). If mtpwatch itself is SIGKILLed, the kernel sends the
server SIGTERM (``PR_SET_PDEATHSIG``), and vLLM then stops its own engine processes.
Children that leave the group (``setsid``) are found two ways: by walking ``/proc`` by parent pid
(recorded while the parent lives, as an orphan's parent becomes init) and by the marker variable
``MTPWATCH_OWNER`` that every process of the server inherits."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import itertools
import os
import signal
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO

DEFAULT_RING_LINES = 2000
OWNER_ENV = "MTPWATCH_OWNER"
_PR_SET_PDEATHSIG = 1


class StartupError(RuntimeError):
    """The server died, or did not answer /health in time. `str()` is one line."""

    def __init__(self, message: str, returncode: int | None, tail: Sequence[str]) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.tail = list(tail)


def _read_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of a process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(")") + 2 :].split()
    if len(fields) < 3:
        return None
    return fields[0], int(fields[1]), int(fields[2])


def _all_stats() -> dict[int, tuple[str, int, int]]:
    stats = {int(entry): _read_stat(int(entry)) for entry in os.listdir("/proc") if entry.isdigit()}
    return {pid: stat for pid, stat in stats.items() if stat is not None}


def group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) processes whose process group is `pgid`."""
    return sorted(pid for pid, (state, _, pgrp) in _all_stats().items() if pgrp == pgid and state != "Z")


def descendants(pid: int) -> list[int]:
    """Pids of every live descendant of `pid` (children, grandchildren, ...), by parent pid."""
    children: dict[int, list[int]] = {}
    for child, (state, ppid, _) in _all_stats().items():
        if state != "Z":
            children.setdefault(ppid, []).append(child)
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return sorted(found)


def marked_processes(token: str) -> list[int]:
    """Pids of live processes whose environment holds ``MTPWATCH_OWNER=token``: inherited, it finds
    descendants that left the group *and* lost their parent, which neither killpg nor the ppid walk see."""
    needle = f"{OWNER_ENV}={token}".encode()
    found: set[int] = set()
    for pid in (int(entry) for entry in os.listdir("/proc") if entry.isdigit()):
        with contextlib.suppress(OSError), open(f"/proc/{pid}/environ", "rb") as fh:
            if needle in fh.read().split(b"\0"):
                found.add(pid)
    return sorted(_alive(found))


def _alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if (stat := _read_stat(pid)) is not None and stat[0] != "Z"}


@dataclass
class _Group:
    """What the registry needs to stop one server without its asyncio objects."""

    pgid: int  # the leader's pid: start_new_session makes it the group's id
    token: str
    known: set[int] = field(default_factory=set)  # descendants seen so far, also those that left the group

    def refresh(self) -> None:
        if _alive({self.pgid}):  # a new set, not updated in place: a stop's thread may be reading it
            self.known = self.known | set(descendants(self.pgid))

    def remaining(self) -> set[int]:
        return set(group_members(self.pgid)) | _alive(self.known) | set(marked_processes(self.token))

    def send(self, sig: int, pids: set[int]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


_REGISTRY: dict[int, _Group] = {}
_KEPT: list[str] = []


def kept_lines() -> list[str]:
    """The lines of every server left running since the last call (`ServerProcess.detach`), for the
    command to print once the terminal is its own again."""
    lines = _KEPT[:]
    _KEPT.clear()
    return lines


_TOKENS = itertools.count()


def stop_all() -> None:
    """Stop every owned group (`_stop_groups`, 10 s before the SIGKILL)."""
    groups = list(_REGISTRY.values())
    _REGISTRY.clear()
    _stop_groups(groups, 10.0)


def _stop_groups(groups: Sequence[_Group], timeout: float) -> None:
    """SIGTERM every group, with every descendant seen so far (also those that left it), at once; wait
    up to `timeout` s for all to go, SIGKILL what is left, wait up to 5 s for that. Synchronous. Gone
    means every process of the group, not only the leader (a GPU worker frees its memory last, and the
    next server on this device may start only then): /proc says."""
    for group in groups:
        group.refresh()
        group.send(signal.SIGTERM, group.known)
    _wait_gone(groups, timeout)
    for group in groups:
        if left := group.remaining():
            group.send(signal.SIGKILL, left)
    _wait_gone(groups, 5.0)


def _wait_gone(groups: Sequence[_Group], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while any(g.remaining() for g in groups) and time.monotonic() < deadline:
        time.sleep(0.05)


def _register(group: _Group) -> None:
    _REGISTRY[group.pgid] = group
    atexit.unregister(stop_all)  # registered once, and last: it runs before the handlers registered before it
    atexit.register(stop_all)


_Handler = Callable[[int, FrameType | None], Any] | int | None


@dataclass
class _ChainedHandler:
    """Stops owned servers, then does what the previous handler (or `on_signal`) would do."""

    previous: _Handler
    on_signal: Callable[[int], None] | None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        stop_all()
        if self.on_signal is not None:
            self.on_signal(signum)
        elif callable(self.previous):
            self.previous(signum, frame)
        else:
            # Default action of SIGTERM/SIGHUP is to die; exiting this way still runs atexit
            # and `finally` blocks (e.g. a terminal UI restoring the screen).
            raise SystemExit(128 + signum)


def install_signal_handlers(
    on_signal: Callable[[int], None] | None = None, signals: Sequence[int] = (signal.SIGTERM, signal.SIGHUP)
) -> None:
    """Make SIGTERM and SIGHUP (a dropped SSH connection) stop every owned server first, then chain to
    the handler installed before (call it again after a framework installs its own: a second call
    wraps the new one and is otherwise a no-op), or run `on_signal(signum)` instead, e.g. to ask a
    Textual app to exit cleanly. A signal that is ignored (``nohup``) stays ignored. Main thread only."""
    for signum in signals:
        current = signal.getsignal(signum)
        if current is signal.SIG_IGN:
            continue
        if isinstance(current, _ChainedHandler):
            if on_signal is not None:
                current.on_signal = on_signal
            continue
        signal.signal(signum, _ChainedHandler(current, on_signal))


# libc's ``prctl``, looked up in the parent (a ``dlopen`` after fork in a threaded process can hang).
try:
    _PRCTL: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


def _set_pdeathsig() -> None:
    """In the child, before exec: get SIGTERM if mtpwatch dies without cleaning up (SIGKILL). Only
    calls the function resolved at import (no loading, no allocation in the forked child)."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class ServerProcess:
    """One server process group that mtpwatch started (`await ServerProcess.start(argv, env)`): log
    lines, health, stop. With ``keep=True`` the server is not registered for clean-up and its output
    goes to `log_path` (it must outlive mtpwatch, and a pipe with no reader would kill it); `lines()`
    then follows that file."""

    def __init__(self, argv: Sequence[str], ring_lines: int = DEFAULT_RING_LINES) -> None:
        self.argv = tuple(argv)
        self._ring: deque[str] = deque(maxlen=ring_lines)
        self._seq = 0  # number of lines ever received; line i lives at ring[i - (seq - len(ring))]
        self._new_line = asyncio.Event()
        self._eof = False
        self._proc: asyncio.subprocess.Process | None = None
        self._group: _Group | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.keep = False
        self._stopping = False
        self.log_path: Path | None = None
        self.started_at = 0.0

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        keep: bool = False,
        log_path: str | os.PathLike[str] | None = None,
        ring_lines: int = DEFAULT_RING_LINES,
    ) -> ServerProcess:
        """Start `argv` in a new session with `env` added to mtpwatch's environment; raises
        `StartupError` (one line) when the program cannot be executed."""
        if not argv:
            raise StartupError("empty command line", None, [])
        if keep and log_path is None:
            raise ValueError("keep=True needs a log_path: the server must outlive mtpwatch's pipe")
        self = cls(argv, ring_lines)
        self.keep = keep
        full_env = dict(os.environ)
        full_env.setdefault("PYTHONUNBUFFERED", "1")  # Python servers: log lines as they happen
        full_env.update(env or {})
        token = f"{os.getpid()}-{next(_TOKENS)}-{time.time_ns()}"
        full_env[OWNER_ENV] = token
        log_fh: BinaryIO | None = None
        log_offset = 0
        if log_path is not None:
            self.log_path = Path(log_path)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            # Handed to the child and closed below; opening a local file does not block the loop.
            log_fh = open(self.log_path, "ab")  # noqa: SIM115, ASYNC230
            log_offset = os.fstat(log_fh.fileno()).st_size
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE if log_fh is None else log_fh,
                stderr=asyncio.subprocess.STDOUT,
                env=full_env,
                start_new_session=True,
                preexec_fn=None if keep else _set_pdeathsig,
            )
        except OSError as exc:
            raise StartupError(f"cannot run {argv[0]!r}: {exc.strerror or exc}", None, []) from exc
        finally:
            if log_fh is not None:
                log_fh.close()
        self.started_at = time.monotonic()
        self._group = _Group(self._proc.pid, token)
        if not keep:
            _register(self._group)
        chunks = (
            self._pipe_chunks() if self.log_path is None else self._file_chunks(self.log_path, log_offset)
        )
        self._tasks += [asyncio.create_task(self._pump(chunks)), asyncio.create_task(self._reap_leftovers())]
        return self

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    @property
    def pgid(self) -> int:
        """Process group (= session) id: `kill -TERM -- -PGID` stops the whole server."""
        return self.pid

    @property
    def returncode(self) -> int | None:
        """Exit status of the leader (negative: killed by that signal); None while it runs."""
        return None if self._proc is None else self._proc.returncode

    def tail(self, n: int | None = None) -> list[str]:
        """The last `n` lines received (all retained lines when None)."""
        lines = list(self._ring)
        return lines if n is None else lines[-n:]

    def _push(self, raw: bytes) -> None:
        text = raw.decode(errors="replace").rstrip("\r\n")
        # Progress bars redraw with '\r': keep the last state only.
        if "\r" in text:
            parts = [p for p in text.split("\r") if p.strip()]
            text = parts[-1] if parts else ""
        self._ring.append(text)
        self._seq += 1
        self._new_line.set()
        self._new_line = asyncio.Event()

    def _finish(self) -> None:
        self._eof = True
        self._new_line.set()

    async def _pump(self, chunks: AsyncIterator[bytes]) -> None:
        """Split the server's output into lines as it comes; mark the end however it ends."""
        pending = b""
        try:
            async for chunk in chunks:
                *complete, pending = (pending + chunk).split(b"\n")
                for raw in complete:
                    self._push(raw)
            if pending:
                self._push(pending)
        finally:
            self._finish()

    async def _pipe_chunks(self) -> AsyncIterator[bytes]:
        assert self._proc is not None and self._proc.stdout is not None
        while chunk := await self._proc.stdout.read(65536):
            yield chunk

    async def _file_chunks(self, path: Path, offset: int) -> AsyncIterator[bytes]:
        """Follow the appended-to `path` from `offset`, its size before the child started, until the
        child exits: not from its end at the pump's first run, which would lose the lines the child
        wrote before this task was first scheduled (vLLM's first lines under `start --keep`)."""
        assert self._proc is not None
        with open(path, "rb") as fh:  # noqa: ASYNC230 - a local log file
            fh.seek(offset)
            while (chunk := fh.read(65536)) or self._proc.returncode is None:
                if chunk:
                    yield chunk
                else:
                    await asyncio.sleep(0.1)

    async def lines(self, replay: bool = True) -> AsyncIterator[str]:
        """Yield log lines as they arrive, ending when the server's output closes; with `replay`, from the
        oldest retained line. A reader more than the ring size behind skips the lines it lost."""
        next_seq = self._seq - len(self._ring) if replay else self._seq
        while True:
            while next_seq < self._seq:
                oldest = self._seq - len(self._ring)
                next_seq = max(next_seq, oldest)
                yield self._ring[next_seq - oldest]
                next_seq += 1
            if self._eof:
                return
            await self._new_line.wait()

    async def wait(self) -> int:
        """Wait for the leader (not its group) to exit; returns its exit status."""
        assert self._proc is not None
        return await self._proc.wait()

    async def _reap_leftovers(self) -> None:
        """When the leader exits on its own, its engine children must not outlive it."""
        assert self._proc is not None and self._group is not None
        group = self._group
        while self._proc.returncode is None:
            group.refresh()  # remember children before an exit reparents them
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._proc.wait()), timeout=2.0)
        if self.keep or self._stopping:
            return
        if group.remaining():
            await asyncio.to_thread(_stop_groups, [group], 5.0)
        _REGISTRY.pop(group.pgid, None)

    async def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the whole group, SIGKILL it after `timeout` s, reap; returns the exit status."""
        if self._proc is None or self._group is None:
            return None
        self._stopping = True
        await asyncio.to_thread(_stop_groups, [self._group], timeout)
        returncode = await self._proc.wait()
        _REGISTRY.pop(self._group.pgid, None)
        # The pipe closes once every writer is gone: let the pump keep the last lines.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*self._tasks, return_exceptions=True), 2.0)
        for task in self._tasks:
            task.cancel()
        self._finish()
        return returncode

    def detach(self, url: str) -> None:
        """Leave the server running when mtpwatch exits (``--keep``): forget it in the registry, and
        add what a user needs to find it again to `kept_lines`."""
        if self._group is not None:
            _REGISTRY.pop(self._group.pgid, None)
        self.keep = True
        _KEPT.extend(
            (
                f"left running (--keep): process group {self.pgid}, log {self.log_path}",
                f"attach: mtpwatch attach {url}",
                f"stop:   kill -TERM -- -{self.pgid}",
            )
        )

    async def wait_healthy(
        self, url: str, timeout: float = 900.0, poll: float = 0.5, headers: Mapping[str, str] | None = None
    ) -> float:
        """Poll ``GET {url}/health`` until it answers 200; returns the seconds since start. Raises
        `StartupError` as soon as the process exits (with its exit status and last log lines) or when
        `timeout` passes, leaving it running: the caller decides whether to stop it."""
        import httpx  # here, not at the top: the app installs this module's handlers before its first frame

        assert self._proc is not None
        health = url.rstrip("/")
        if not health.endswith("/health"):
            health += "/health"
        exited = asyncio.ensure_future(asyncio.shield(self._proc.wait()))
        deadline = time.monotonic() + timeout
        try:
            async with httpx.AsyncClient(timeout=max(poll, 2.0), headers=dict(headers or {})) as http:
                while not exited.done():
                    with contextlib.suppress(httpx.HTTPError):
                        response = await http.get(health)
                        if response.status_code == 200:
                            return time.monotonic() - self.started_at
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise StartupError(
                            f"no answer from {health} after {timeout:.0f} s", None, self.tail(40)
                        )
                    await asyncio.wait({exited}, timeout=min(poll, remaining))
        finally:
            exited.cancel()
        # Let the pump drain the last lines (the traceback) before reporting them.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._drained(), timeout=2.0)
        code = self._proc.returncode
        raise StartupError(f"server {describe_exit(code)} before answering /health", code, self.tail(40))

    async def _drained(self) -> None:
        while not self._eof:
            await self._new_line.wait()


_SIGNAL_HINTS = {
    signal.SIGILL: "the binary uses an instruction this CPU does not have: it was built for another CPU",
    signal.SIGKILL: "often the kernel's out-of-memory killer: see dmesg",
    signal.SIGSEGV: "a crash in the server itself",
}


def describe_exit(code: int | None) -> str:
    """How a server process ended, for one line: "exited with status 2", or for a signal (Popen's
    negative return code) its name and, for the common ones, what usually sends it."""
    if code is None or code >= 0:
        return f"exited with status {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"was killed by signal {-code}"
    hint = _SIGNAL_HINTS.get(sig)
    return f"was killed by {sig.name}" + (f" ({hint})" if hint else "")
