"""Which simulated GPU the simulators one mtpwatch command launches share: the command's own.

A simulator standing in for vLLM (``mtpwatch sim serve ...``) checks its memory share against a
ledger of what the other simulators on "its" GPU hold (`mtpwatch.sim.gpu`). The ledger's folder
comes from `SIM_LEDGER_ENV`; every server mtpwatch launches (`launcher.Launch`) gets a folder of
this process's own in the temp dir, so the simulators of one `ab --start` or `bench --sweep-k` share
a GPU with each other and with nobody else's (another user's sweep, a test run beside it). A folder
you set yourself in the environment wins; a bare `mtpwatch sim` uses a per-user ledger."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

SIM_LEDGER_ENV = "MTPWATCH_SIM_GPU_DIR"


@functools.cache
def command_ledger_dir() -> Path:
    """This process's ledger folder (made on first use, removed when the process exits)."""
    folder = Path(tempfile.mkdtemp(prefix=f"mtpwatch-sim-gpu-{os.getpid()}-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def scoped_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` (variables added for a launched server) with this command's ledger, unless `env` or
    mtpwatch's own environment already names one."""
    out = dict(env)
    if SIM_LEDGER_ENV not in out and SIM_LEDGER_ENV not in os.environ:
        out[SIM_LEDGER_ENV] = str(command_ledger_dir())
    return out
