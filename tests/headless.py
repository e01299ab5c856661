"""Helpers for tests that run `mtpwatch start --headless` (or another mtpwatch) as a child process."""

from __future__ import annotations

import re
import signal
import subprocess
from typing import Protocol

_PGID = re.compile(r"process group (\d+)")


class HeadlessRun(Protocol):
    mtpwatch: subprocess.Popen[str]
    output: list[str]
    pgid: int | None


def follow_output(run: HeadlessRun) -> None:
    """Read the child's output into `run.output`; note the server's process group when it says it."""
    assert run.mtpwatch.stdout is not None
    for line in run.mtpwatch.stdout:
        run.output.append(line.rstrip("\n"))
        if run.pgid is None:
            match = _PGID.search(line)
            if match:
                run.pgid = int(match.group(1))


def terminal_signals() -> None:
    """`preexec_fn`: a terminal's default dispositions (a runner under nohup passes SIGHUP ignored)."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
