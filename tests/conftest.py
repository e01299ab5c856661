"""Every test runs without the developer's own mtpwatch config file or MTPWATCH_* variables."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in list(os.environ):
        if name.startswith("MTPWATCH_") and name != "MTPWATCH_FAST":
            monkeypatch.delenv(name)
    monkeypatch.setenv("MTPWATCH_CONFIG", str(Path(tmp_path_factory.getbasetemp()) / "no-config.toml"))
