"""mtpwatch.core is a library you can drive from a script: it must never pull in a terminal UI."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import mtpwatch.core


def test_core_imports_no_textual_or_rich() -> None:
    modules = [f"mtpwatch.core.{m.name}" for m in pkgutil.iter_modules(mtpwatch.core.__path__)]
    assert len(modules) >= 5, modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('textual', 'rich', 'textual_plotext')"
        " or n.startswith('mtpwatch.ui'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"mtpwatch.core imported: {out.stdout.strip()}"


def test_cli_help_lists_every_command_and_rejects_unknown() -> None:
    ok = subprocess.run([sys.executable, "-m", "mtpwatch", "--help"], capture_output=True, text=True)
    assert ok.returncode == 0
    for name in ("demo", "attach", "start", "ab", "bench", "snapshot", "roofline", "sim", "screenshots"):
        assert f"  {name}" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "mtpwatch", "frobnicate"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "No such command" in bad.stderr
    assert "Traceback" not in bad.stderr
