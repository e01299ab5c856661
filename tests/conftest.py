"""Fixtures every test folder shares: the recorded data under tests/data, and the repository root.

- `data` (session): `data.path("metrics-ngram-k4-after.txt")`, `data.text(name)`, `data.glob("sse-*.txt")`;
  model configs are `data.path("configs/dense-bf16.json")`.
- Parametrised by data file: a test that takes `metrics_page` runs once per tests/data/metrics-*.txt,
  one that takes `sse_transcript` once per vLLM transcript tests/data/sse-*.txt (llama-server's,
  `sse-llamacpp-*`, have their own tests) — the argument is the file's Path, the test id its name.
- `repo_root` (session): the checkout's root, for subprocesses that import mtpwatch from source.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mtpwatch.cli import COMMANDS
from mtpwatch.userconfig import ENV_KEYS
from tests.datadir import REPO_ROOT, DataDir

DATA = DataDir()

# Fixture name → the data files a test asking for it runs over.
DATA_PARAMETERS = {
    "metrics_page": "metrics-*.txt",
    "sse_transcript": "sse-*.txt",
}


@pytest.fixture(scope="session")
def data() -> DataDir:
    """The files under tests/data."""
    return DATA


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (where `python -m mtpwatch` finds the package from source)."""
    return REPO_ROOT


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for name, pattern in DATA_PARAMETERS.items():
        if name in metafunc.fixturenames:
            files = [p for p in DATA.glob(pattern) if "llamacpp" not in p.name]
            metafunc.parametrize(name, files, ids=[p.name for p in files])


# --- no user config ------------------------------------------------------------------------------
# Every test runs without the developer's own mtpwatch config file or MTPWATCH_* option defaults.
# Only the variables that set option defaults are cleared (MTPWATCH_URL, MTPWATCH_API_KEY, ..., and
# click's MTPWATCH_<COMMAND>_<OPTION>); the test setup's own (MTPWATCH_VLLM_VENV, ...) stay.

_DEFAULT_PREFIXES = tuple(f"MTPWATCH_{name.upper()}_" for name in COMMANDS)


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name in ENV_KEYS or name.startswith(_DEFAULT_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MTPWATCH_CONFIG", os.devnull)  # no config file (a missing one is an error)
