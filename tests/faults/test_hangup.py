"""A TUI ends when its terminal goes away, and on SIGHUP/SIGTERM after a replay's seek (issue 40, item 4b).

Textual's writer thread died at the first write to a closed terminal (EIO), the next 30 frames filled
its queue and the 31st blocked the event loop in `Queue.put` for good: `mtpwatch replay` then outlived
tmux kill-session (SIGHUP) and SIGTERM until SIGKILL, and its input thread spun at 100 % of a core on
the terminal's EOF (as `tests/bench/floor_app.py` did after an interrupted overhead.py closed its pty).
`mtpwatch.ui.fastpaint.driver.HangupDriver` drops what it cannot write and ends the app at the hangup.

The terminal here is a real pty. "Closed" is what tmux kill-session and a dropped SSH connection do
to it: its master side is closed (then, in some tests, the signal comes).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from mtpwatch.sim.harness import SimThread
from mtpwatch.ui.fastpaint.driver import HANGUP_STATUS

from .conftest import ROOT
from .test_signals import SIGNALS, Terminal, assert_clean_exit, terminal, wait

RECORDING = ROOT / "tests" / "data" / "recordings" / "vllm-0.32-cpu-ngram-k4.mtpw.gz"
LEFT = "\x1b[D"
LIMIT_S = 60.0
"""Generous: the process ends well within it on a loaded machine."""


def replay() -> list[str]:
    # --loop: the player never stops, so frames keep coming after the terminal is gone.
    return [sys.executable, "-m", "mtpwatch", "replay", str(RECORDING), "--loop", "--speed", "4"]


def played_and_sought_back(term: Terminal) -> None:
    """The recording played a while (frames after the first), then ← four times, each one drawn."""
    wait(lambda: b"per-position acceptance" in term.output, "the replay's first frame", LIMIT_S)
    first = len(term.output)
    wait(lambda: len(term.output) > first + 20_000, "the replay playing", LIMIT_S)
    for _ in range(4):
        before = len(term.output)
        term.type(LEFT)
        wait(lambda before=before: len(term.output) > before, "a frame after ←", LIMIT_S)  # type: ignore[misc]


def close_terminal(term: Terminal) -> None:
    os.close(term.master)
    term.master = os.open(os.devnull, os.O_RDONLY)  # Terminal.close closes it again


def ended(term: Terminal) -> int:
    """The process's exit status; fails (and the fixture kills it) when it is still there at the limit."""
    wait(lambda: term.proc.poll() is not None, "the process to end", LIMIT_S)
    return int(term.proc.returncode)


@pytest.mark.parametrize("sig", SIGNALS)
def test_replay_after_a_seek_ends_on_a_signal(sig: int) -> None:
    with terminal(replay()) as term:
        played_and_sought_back(term)
        term.proc.send_signal(sig)
        assert_clean_exit(term, term.exit_status(LIMIT_S))


def test_replay_ends_when_its_terminal_closes() -> None:
    with terminal(replay()) as term:
        played_and_sought_back(term)
        close_terminal(term)
        assert ended(term) == HANGUP_STATUS


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_replay_ends_on_a_signal_after_its_terminal_closed(sig: int) -> None:
    with terminal(replay()) as term:
        played_and_sought_back(term)
        close_terminal(term)
        term.proc.send_signal(sig)
        assert ended(term) in (HANGUP_STATUS, 128 + sig)


@pytest.mark.parametrize("args", [[], ["--idle"]], ids=["streaming", "idle"])
def test_floor_app_ends_with_its_pty(args: list[str]) -> None:
    floor = Path(ROOT) / "tests" / "bench" / "floor_app.py"
    with terminal([sys.executable, str(floor), *args]) as term:
        wait(lambda: len(term.output) > 1000, "the floor app's first frame", LIMIT_S)
        close_terminal(term)
        ended(term)  # FloorApp.run's result is not its status: that it ended is the point


def test_attach_ends_when_its_terminal_closes_and_its_server_stops() -> None:
    """Once an `attach` outlived its terminal, its server stopped right after the terminal closed."""
    with contextlib.ExitStack() as server:
        url = server.enter_context(SimThread(preset="gemma4-e4b-gb10", spec=True, speed=8))
        with terminal([sys.executable, "-m", "mtpwatch", "attach", url]) as term:
            wait(lambda: b"per-position acceptance" in term.output, "the monitor", LIMIT_S)
            close_terminal(term)
            server.close()  # the server stops right after the terminal closed
            assert ended(term) == HANGUP_STATUS
