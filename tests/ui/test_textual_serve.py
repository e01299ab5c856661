"""`textual serve -c "mtpwatch demo --loop"` (README): the demo in a browser on loopback.

The test is the browser (tests/readme/browser.py): it loads the page, opens the websocket
textual-serve serves the app through, and reads the frames until the self-running demo shows its
numbers; closing the socket must stop the app and its two simulators, and nothing the app writes on
its way out may be a traceback (textual-serve prints the app's stderr). The README's line itself,
exactly as written, runs in tests/readme/test_readme_commands.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from mtpwatch.commands.options import free_port
from tests.readme.browser import browse_demo, clean_exit


def test_textual_serve_runs_the_self_running_demo_and_stops_it(tmp_path: Path) -> None:
    textual = shutil.which("textual", path=os.path.dirname(sys.executable))
    assert textual is not None, "textual-dev is a dev dependency (pyproject)"
    mtpwatch = os.path.join(os.path.dirname(sys.executable), "mtpwatch")
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [textual, "serve", "-c", "--host", "127.0.0.1", "--port", str(port), f"{mtpwatch} demo --loop"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        browse_demo(port, server.pid)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
    clean_exit(log.read_text(encoding="utf-8", errors="replace"))
