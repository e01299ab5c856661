"""Run an mtpwatch command in a real pseudo-terminal (80×24), as a user would, and type keys into it."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Sequence


def run_tty(
    args: Sequence[str],
    *,
    ready: Callable[[bytes], bool],
    keys: Sequence[bytes] = (b"\x11",),
    size: tuple[int, int] = (80, 24),
    limit_s: float = 60.0,
    cwd: str | None = None,
) -> tuple[int, bytes]:
    """Start `mtpwatch ARGS` on a pty of `size`, wait until `ready(output)`, type `keys` (0.5 s apart;
    the default is Ctrl+Q), and return (exit status, everything it wrote). Killed at `limit_s`."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(size[0]), "LINES": str(size[1])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtpwatch", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=cwd,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + limit_s

    def pump(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                out.extend(chunk)

    try:
        while time.monotonic() < deadline and proc.poll() is None and not ready(bytes(out)):
            pump(0.2)
        for key in keys:
            os.write(master, key)
            pump(0.5)
        while time.monotonic() < deadline and proc.poll() is None:
            pump(0.2)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait(timeout=10)
        pump(0.2)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        os.close(master)
    return code, bytes(out)
