"""Counter deltas are computed in one place: `mtpwatch/core/metrics` (`rates.delta_rates`, the `Collector`).

A delta written elsewhere brings its own restart rule with it (the bench's old `_same_session` looked
at drafts and accepted only). This scans every module outside `core/metrics` for a subtraction of a
counter from the same counter: `after.drafts - before.drafts`, `a["accepted"] - b["accepted"]`,
`after.accepted_per_pos[i] - before.accepted_per_pos[i]`, or `x - y for x, y in zip(after.c, before.c)`.
Subtractions between different quantities (`sum(per_pos) - accepted`, a consistency check) are not deltas.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mtpwatch

PACKAGE = Path(mtpwatch.__file__).parent
ALLOWED = PACKAGE / "core" / "metrics"

#: The cumulative counters of a `MetricsSnapshot` (and their Prometheus spellings, `*_total`).
COUNTERS = frozenset(
    {
        "drafts",
        "draft_tokens",
        "accepted",
        "accepted_per_pos",
        "generation_tokens",
        "prompt_tokens",
        "num_drafts",
        "num_draft_tokens",
        "num_accepted_tokens",
        "num_accepted_tokens_per_pos",
        "estimated_read_bytes",
    }
)


def _is_counter(name: str) -> bool:
    return name in COUNTERS or name.endswith("_total")


def _counter_of(node: ast.expr) -> str | None:
    """The counter an operand reads: `x.drafts`, `x.accepted_per_pos[i]`, `x["drafts"]`; else None."""
    if isinstance(node, ast.Subscript):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and _is_counter(key.value):
            return key.value
        return _counter_of(node.value)
    if isinstance(node, ast.Attribute) and _is_counter(node.attr):
        return node.attr
    return None


def _zipped_counters(tree: ast.AST) -> set[tuple[str, str]]:
    """(x, y) for `for x, y in zip(a.c, b.c)` where both arguments read the same counter c."""
    pairs: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.comprehension, ast.For)):
            continue
        it, target = node.iter, node.target
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "zip"):
            continue
        if len(it.args) != 2 or not isinstance(target, ast.Tuple) or len(target.elts) != 2:
            continue
        left, right = (_counter_of(a) for a in it.args)
        names = [e.id for e in target.elts if isinstance(e, ast.Name)]
        if left is not None and left == right and len(names) == 2:
            pairs.add((names[0], names[1]))
    return pairs


def counter_subtractions(source: str) -> list[tuple[int, str]]:
    """(line, expression) of each subtraction of a counter from the same counter in `source`."""
    tree = ast.parse(source)
    zipped = _zipped_counters(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            left, right = _counter_of(node.left), _counter_of(node.right)
            same = left is not None and left == right
            names = (
                (node.left.id, node.right.id)
                if isinstance(node.left, ast.Name) and isinstance(node.right, ast.Name)
                else None
            )
            if same or (names is not None and names in zipped):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Sub):
            target, value = _counter_of(node.target), _counter_of(node.value)
            if target is not None and target == value:
                found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_nothing_outside_core_metrics_subtracts_counters() -> None:
    scanned = 0
    offenders: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.is_relative_to(ALLOWED):
            continue
        scanned += 1
        for line, expr in counter_subtractions(path.read_text(encoding="utf-8")):
            offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {expr}")
    assert scanned > 50
    why = "counter deltas belong in core/metrics (rates.delta_rates):\n"
    assert offenders == [], why + "\n".join(offenders)


def test_core_metrics_is_where_the_deltas_are() -> None:
    """The scan finds the real delta code, so an empty result elsewhere means something."""
    found = counter_subtractions((ALLOWED / "rates.py").read_text(encoding="utf-8"))
    exprs = {expr for _, expr in found}
    assert "after.drafts - base.drafts" in exprs
    assert "after.accepted - base.accepted" in exprs
    assert "snapshot.generation_tokens - prev.generation_tokens" in exprs


# The bench runner's delta code before it used delta_rates, verbatim.
OLD_RUNNER = """
def _record(before, after):
    spec = {
        "drafts": after.drafts - before.drafts,
        "draft_tokens": after.draft_tokens - before.draft_tokens,
        "accepted": after.accepted - before.accepted,
        "accepted_per_pos": tuple(
            x - y for x, y in zip(after.accepted_per_pos, before.accepted_per_pos, strict=False)
        ),
        "k": after.k,
    }
"""


def test_the_old_runner_deltas_are_found() -> None:
    found = [expr for _, expr in counter_subtractions(OLD_RUNNER)]
    assert found == [
        "after.drafts - before.drafts",
        "after.draft_tokens - before.draft_tokens",
        "after.accepted - before.accepted",
        "x - y",
    ]


def test_other_subtractions_are_not_deltas() -> None:
    source = """
residual = sum(acc.accepted_per_pos) - acc.accepted
left = max_len - prompt_tokens
n = stats.generation_tokens - 1
gap = t_end - t_start
diffs = [a - b for a, b in zip(xs, ys)]
d = rows["drafts"] - rows["accepted"]
"""
    assert counter_subtractions(source) == []


def test_dict_and_augmented_deltas_are_found() -> None:
    source = """
d = after["vllm:spec_decode_num_drafts_total"] - before["vllm:spec_decode_num_drafts_total"]
e = cur["drafts"] - prev["drafts"]
total.accepted -= base.accepted
"""
    assert [line for line, _ in counter_subtractions(source)] == [2, 3, 4]
