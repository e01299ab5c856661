"""The processes a test started, found by a marker variable they inherit (read from /proc)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    pid: int
    comm: str
    argv: tuple[str, ...]

    def line(self, width: int = 160) -> str:
        """'pid comm: command line', the command line cut at `width` characters."""
        return f"{self.pid} {self.comm}: {' '.join(self.argv)[:width]}"


def carrying(name: str, value: str) -> list[Proc]:
    """Live (not zombie) processes other than this one whose environment holds ``name=value``."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if needle not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                continue
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if state != "Z":
            found.append(Proc(int(entry), comm, tuple(arg for arg in argv if arg)))
    return found
