"""mtpwatch.session runs without a terminal: importing every module of it loads no Textual and no Rich."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import mtpwatch.session


def test_session_imports_no_textual_rich_or_ui() -> None:
    modules = [f"mtpwatch.session.{m.name}" for m in pkgutil.iter_modules(mtpwatch.session.__path__)]
    assert {"mtpwatch.session.watch", "mtpwatch.session.views", "mtpwatch.session.sources"} <= set(modules)
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('textual', 'rich')"
        " or n.startswith(('mtpwatch.ui', 'mtpwatch.commands', 'mtpwatch.sim')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"mtpwatch.session imported: {out.stdout.strip()}"
