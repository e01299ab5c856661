"""Every test runs without the developer's own mtpwatch config file or MTPWATCH_* option defaults.

Only the variables that set option defaults are cleared (MTPWATCH_URL, MTPWATCH_API_KEY, ...,
and click's MTPWATCH_<COMMAND>_<OPTION>); the test setup's own (MTPWATCH_VLLM_VENV, ...) stay.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mtpwatch.cli import COMMANDS
from mtpwatch.core.userconfig import ENV_KEYS

_PREFIXES = tuple(f"MTPWATCH_{name.upper()}_" for name in COMMANDS)


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in list(os.environ):
        if name in ENV_KEYS or name.startswith(_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MTPWATCH_CONFIG", str(Path(tmp_path_factory.getbasetemp()) / "no-config.toml"))
