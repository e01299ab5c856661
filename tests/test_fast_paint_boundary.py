"""The fast paint's boundary: every private Textual name mtpwatch uses lives in `mtpwatch/ui/fastpaint/`,
behind a gate that falls back to plain Textual when a private name is missing, and the command line
says whether it is on."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import mtpwatch
from mtpwatch.ui.fastpaint import gate as gate_module

# The names the fast paint reads or overrides (issue 39): any `textual._` module, and Textual's
# private attributes that the compositor, plain rows, narrowed refresh and frames use.
PRIVATE = re.compile(
    r"textual\._|\._(batch_count|dirty_regions|layout_required|set_dirty|compositor_refresh|border_title"
    r"|rich_style_cache)\b"
)
ROOT = Path(mtpwatch.__file__).parent
FASTPAINT = ROOT / "ui" / "fastpaint"


def test_no_textual_private_outside_ui_fastpaint() -> None:
    found = [
        f"{path.relative_to(ROOT.parent)}:{number}: {line.strip()}"
        for path in sorted(ROOT.rglob("*.py"))
        if FASTPAINT not in path.parents
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert found == []
    inside = [path for path in FASTPAINT.rglob("*.py") if PRIVATE.search(path.read_text())]
    assert inside, "the pattern finds the private names where they are (it is not a dead check)"


def test_a_textual_that_lacks_a_private_name_gets_the_plain_paint(monkeypatch: Any) -> None:
    """The gate imports the private names inside try/except: a missing one turns the fast paint off."""
    import textual._compositor

    version = next(iter(gate_module.VERIFIED_TEXTUAL))
    assert gate_module._gate.__wrapped__("", version).on
    monkeypatch.delattr(textual._compositor, "ChopsUpdate")
    monkeypatch.delitem(sys.modules, "mtpwatch.ui.fastpaint.compositor")
    off = gate_module._gate.__wrapped__("", version)
    assert not off.on
    assert off.words().startswith(f"fast paint: off (Textual {version} lacks a private name: ")
    assert "ChopsUpdate" in off.words()


def test_the_installed_textual_is_what_importlib_metadata_says(tmp_path: Path, monkeypatch: Any) -> None:
    """The gate reads Textual's dist-info itself (start-up); it must agree with the library, and ask
    the library where the dist-info is not where it looks."""
    from importlib.metadata import version

    gate_module.installed_textual.cache_clear()
    assert gate_module.installed_textual() == version("textual")
    import textual

    fake = tmp_path / "textual" / "__init__.py"
    fake.parent.mkdir()
    fake.touch()
    monkeypatch.setattr(textual, "__file__", str(fake))  # no dist-info beside it
    monkeypatch.setattr(gate_module, "_metadata_version", lambda: "from importlib.metadata")
    gate_module.installed_textual.cache_clear()
    try:
        assert gate_module.installed_textual() == "from importlib.metadata"
    finally:
        gate_module.installed_textual.cache_clear()


def _version(**env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != gate_module.ENV} | env
    command = [sys.executable, "-m", "mtpwatch", "--version"]
    out = subprocess.run(command, capture_output=True, text=True, env=environ, check=True)
    return out.stdout


def test_version_says_whether_the_fast_paint_is_on() -> None:
    textual = gate_module.installed_textual()
    assert textual in gate_module.VERIFIED_TEXTUAL  # the suite runs on the pinned release
    assert _version() == f"mtpwatch, version {mtpwatch.__version__}\nfast paint: on (Textual {textual})\n"
    off = _version(MTPWATCH_FASTPAINT="0")
    assert off == f"mtpwatch, version {mtpwatch.__version__}\nfast paint: off (MTPWATCH_FASTPAINT=0)\n"
