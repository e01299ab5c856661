"""Every module path the docs, the README and the code's docstrings and comments name exists.

A module moved or renamed leaves its old name behind in prose ("see core.faststream"); these names
are what a reader follows, so a stale one is a bug. Checked forms: `core/metrics/formulas.py`,
`mtpwatch/ui/markup.py`, `tests/bench/soak.py` (paths) and `core.metrics.rates`,
`mtpwatch.core.http.urls.normalize_url` (dotted: the longest prefix that is a module, the rest an
attribute of it). Calls (`sim.__exit__(...)`) and file names (`core.py:1091` in a simulated log
line) are code, not references.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "session", "ui", "commands", "sim", "render")
SLASHED = re.compile(
    r"(?<![\w./-])((?:mtpwatch/)?(?:" + "|".join(PACKAGES) + r")/[\w/]+(?:\.py)?|tests/[\w/.-]+\.(?:py|sh)"
    r"|docs/[\w-]+\.md)"
)
DOTTED = re.compile(r"(?<![\w.])((?:mtpwatch\.)?(?:" + "|".join(PACKAGES) + r")(?:\.\w+)+)(?![\w(])")


def _texts() -> list[tuple[str, int, str]]:
    """(file, line number, text) of the README, docs/*.md, and every comment and docstring."""
    out = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        out += [(md.name, n, line) for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1)]
    for py in sorted((ROOT / "mtpwatch").rglob("*.py")):
        source = py.read_text(encoding="utf-8")
        rel = str(py.relative_to(ROOT))
        for n, line in enumerate(source.splitlines(), 1):
            if "#" in line:
                out.append((rel, n, line[line.index("#") :]))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    first = node.body[0].lineno
                    out += [(rel, first + i, line) for i, line in enumerate(doc.splitlines())]
    return out


def _path_exists(path: str) -> bool:
    base = path if path.startswith(("mtpwatch/", "tests/", "docs/")) else f"mtpwatch/{path}"
    return any((ROOT / c).exists() for c in (base, f"{base}.py", base.rstrip("/")))


def _module_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[-1] in ("py", "gz", "json", "jsonl", "csv", "svg"):  # a file name (core.py, session.mtpw.gz)
        return True
    if parts[0] != "mtpwatch":
        parts = ["mtpwatch", *parts]
    for i in range(len(parts), 1, -1):
        p = ROOT.joinpath(*parts[:i])
        if p.with_suffix(".py").exists() or (p / "__init__.py").exists():
            return i >= 3 or i == len(parts)  # mtpwatch.pkg.module[.attr], or a package itself
    return False


def test_every_named_module_path_exists() -> None:
    stale = []
    for where, n, text in _texts():
        stale += [f"{where}:{n}: {m}" for m in SLASHED.findall(text) if not _path_exists(m.rstrip("/."))]
        stale += [f"{where}:{n}: {m}" for m in DOTTED.findall(text) if not _module_exists(m.rstrip("."))]
    assert stale == [], "names of modules that do not exist:\n" + "\n".join(stale)


def test_the_check_catches_a_stale_name() -> None:
    assert not _module_exists("core.faststream") and _module_exists("core.http.faststream")
    assert not _module_exists("core.client.normalize_url")
    assert _module_exists("mtpwatch.core.http.urls.normalize_url")
    assert not _path_exists("core/bandwidth.py") and _path_exists("core/metrics/formulas.py")
