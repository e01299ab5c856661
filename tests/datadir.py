"""The recorded data of the tests (tests/data): real vLLM 0.32 pages, SSE transcripts, logs, configs.

Tests reach it through the `data` fixture of tests/conftest.py, never through their own file's path.
"""

from __future__ import annotations

from pathlib import Path

DATA_ROOT = Path(__file__).resolve().parent / "data"
REPO_ROOT = DATA_ROOT.parents[1]


class DataDir:
    """Files under one folder, by name relative to it; a missing file or empty glob fails loudly."""

    def __init__(self, root: Path = DATA_ROOT) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        """tests/data/<name> (may name a sub-folder: "configs/dense-bf16.json"); it must exist."""
        path = self.root / name
        if not path.exists():
            raise FileNotFoundError(f"no test data file {name!r} under {self.root}")
        return path

    def text(self, name: str) -> str:
        """The file's text, UTF-8."""
        return self.path(name).read_text(encoding="utf-8")

    def glob(self, pattern: str) -> list[Path]:
        """The files matching `pattern`, sorted by name; at least one."""
        found = sorted(self.root.glob(pattern))
        if not found:
            raise FileNotFoundError(f"no test data file matches {pattern!r} under {self.root}")
        return found
