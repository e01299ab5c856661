"""The package metadata agrees with itself: licence file, Python versions, the Textual pins."""

from __future__ import annotations

import re
import sys

from tests.datadir import REPO_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = REPO_ROOT
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_license_file_matches_pyproject() -> None:
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_python_versions_agree() -> None:
    assert PYPROJECT["project"]["requires-python"] == ">=3.10"
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py310"
    assert PYPROJECT["tool"]["mypy"]["python_version"] == "3.10"


def test_textual_range_at_runtime_exact_pin_for_tests() -> None:
    runtime = [d for d in PYPROJECT["project"]["dependencies"] if d.startswith("textual")]
    assert runtime == ["textual>=8.2,<9"]
    pinned = [d for d in PYPROJECT["project"]["optional-dependencies"]["test"] if d.startswith("textual")]
    assert len(pinned) == 1
    match = re.fullmatch(r"textual==(8\.\d+\.\d+)", pinned[0])
    assert match, pinned  # the snapshot SVGs are made with exactly this version, inside the range
    import textual

    assert textual.__version__ == match.group(1)
