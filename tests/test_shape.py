"""Every module under mtpwatch/ reads in a sitting and every function in one screen.

No module over 600 lines, no function (or method) over 80 from its `def` line to its last line
(decorators, such as a click command's options, not counted), found with `ast`. The failure lists
every offender, largest first, so a split can be planned from one run.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.datadir import REPO_ROOT

PACKAGE = REPO_ROOT / "mtpwatch"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _functions(tree: ast.AST) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones included."""
    out: list[tuple[str, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # from `def` to the last line: a click command's option decorators are declarations
                out.append((prefix + child.name, (child.end_lineno or child.lineno) - child.lineno + 1))
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def test_no_module_over_600_lines() -> None:
    long = []
    for path in _modules():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_MODULE_LINES:
            long.append((n, str(path.relative_to(REPO_ROOT))))
    assert not long, "modules over 600 lines:\n" + "\n".join(
        f"  {p}: {n}" for n, p in sorted(long, reverse=True)
    )


def test_no_function_over_80_lines() -> None:
    long = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(REPO_ROOT)
        long += [(n, f"{rel}:{name}") for name, n in _functions(tree) if n > MAX_FUNCTION_LINES]
    assert not long, "functions over 80 lines:\n" + "\n".join(
        f"  {w}: {n}" for n, w in sorted(long, reverse=True)
    )


def test_the_count_sees_a_long_function() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(81))
    tree = ast.parse(f"class C:\n  @staticmethod\n  def f():\n{body}\n")
    assert _functions(tree) == [("C.f", 82)]
