"""A simulated GPU that several simulated vLLM servers share: a ledger of what each one holds.

The ledger is a JSON file (``<dir>/<gpu>.json``, locked with ``flock`` while read and written)
listing, per server, the pid of the process that holds the memory and the bytes it holds. An
entry counts only while that process lives, so a server that dies frees its memory as a real one
does. The holder is a separate *worker* process (as vLLM's ``VLLM::Worker``), which leaves a
moment after the API server (`WORKER_LINGER_S`, as measured on vLLM's CPU build) — so a
restart schedule that starts the next server as soon as the first one's leader exits collides.

At start-up a server asks for ``gpu_memory_utilization × total`` and is refused, with vLLM's own
message (`request_memory`, ``vllm/v1/worker/utils.py``), when that is more than is free.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpwatch.core.launch.gpumem import gpu_from_table
from mtpwatch.core.launch.memplan import GIB
from mtpwatch.core.launch.simledger import SIM_LEDGER_ENV

LINGER_ENV = "MTPWATCH_SIM_WORKER_LINGER"
"""Seconds the worker outlives its API server, overriding `WORKER_LINGER_S` (a GPU worker that frees
tens of GB takes longer)."""
WORKER_LINGER_S = 0.6
"""Seconds the worker outlives its API server (vLLM CPU build: ~0.5–0.6 s)."""

_WORKER = """
import ctypes, os, signal, sys, time
parent, linger = int(sys.argv[1]), float(sys.argv[2])
try:
    ctypes.CDLL(None).prctl(15, b"VLLM::Worker", 0, 0, 0)
except Exception:
    pass
def bye(*_):
    time.sleep(linger)
    os._exit(0)
signal.signal(signal.SIGTERM, bye)
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, bye)
while os.getppid() == parent:
    time.sleep(0.05)
bye()
"""


def default_ledger_dir() -> Path:
    """The folder `SIM_LEDGER_ENV` names: set by the mtpwatch command that launched this simulator, so
    that the simulators of one command share one GPU and nobody else's (`core.launch.simledger`); a
    bare `mtpwatch sim` uses a per-user folder in the temp dir."""
    env = os.environ.get(SIM_LEDGER_ENV)
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / f"mtpwatch-sim-gpu-{os.getuid()}"


def spawn_worker() -> subprocess.Popen[bytes]:
    """The process that holds this server's memory; it exits `WORKER_LINGER_S` (or `LINGER_ENV`'s) after
    this one."""
    try:
        linger_s = float(os.environ.get(LINGER_ENV, WORKER_LINGER_S))
    except ValueError:
        linger_s = WORKER_LINGER_S
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(os.getpid()), f"{linger_s:g}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _alive(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return False
    state = raw[raw.rfind(")") + 2 :].split()[:1]
    return bool(state) and state[0] not in ("Z", "X")


@dataclass(frozen=True, slots=True)
class SimGpu:
    """One simulated device: total memory, what the OS takes, and where its ledger lives."""

    name: str
    total_bytes: float
    reserved_bytes: float
    ledger_dir: Path

    @classmethod
    def for_gpu(cls, name: str, ledger_dir: Path | None = None) -> SimGpu:
        """The device as mtpwatch's GPU table describes it (the same figures `--gpu NAME` plans with)."""
        mem = gpu_from_table(name)
        return cls(
            mem.name, mem.total_bytes, mem.total_bytes - mem.free_bytes, ledger_dir or default_ledger_dir()
        )

    @property
    def path(self) -> Path:
        return self.ledger_dir / (re.sub(r"[^A-Za-z0-9_.-]", "_", self.name) + ".json")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.ledger_dir.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a+") as lock:  # closing it releases the lock
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            entries = data.get("servers", []) if isinstance(data, dict) else []
            data = {"servers": [e for e in entries if isinstance(e, dict) and _alive(int(e.get("pid", 0)))]}
            yield data
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
            tmp.replace(self.path)

    def claim(self, *, utilization: float, holds: float, pid: int, label: str) -> str | None:
        """Take `holds` bytes for `pid` if ``utilization × total`` is free; else vLLM's error message."""
        requested = float(int(self.total_bytes * utilization + 0.999999))
        with self._locked() as data:
            free = self.total_bytes - self.reserved_bytes - sum(e["bytes"] for e in data["servers"])
            if free < requested:
                return (
                    f"Free memory on device cuda:0 ({round(free / GIB, 2)}/"
                    f"{round(self.total_bytes / GIB, 2)} GiB) "
                    f"on startup is less than desired GPU memory utilization ({utilization}, "
                    f"{round(requested / GIB, 2)} GiB). Decrease GPU memory utilization or reduce GPU memory "
                    "used by other processes."
                )
            data["servers"].append({"pid": pid, "bytes": holds, "label": label, "since": time.time()})
        return None
