"""Pure, typed core of mtpwatch: parsing, rates, clients, models. Never imports Textual or Rich."""

import sys

# httpx/__init__ imports its own command-line tool (httpx._main: rich, pygments, click) whenever rich
# is installed, which it is next to Textual. The core must not pull a terminal library, and skipping it
# saves ~45 ms of start-up: marking that module absent sends httpx down its own `except ImportError`
# branch, which only replaces the unused `httpx.main` entry point with a stub.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
