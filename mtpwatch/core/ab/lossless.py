"""The lossless check: are the two arms' outputs identical at temperature 0?

`compare_outputs` is the one place that compares two outputs (token ids when both have them,
else text); the bench report and the app's console both use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from mtpwatch.core.ab.plan import OnPoint, Point
from mtpwatch.core.ab.records import RunRecord, match_pairs
from mtpwatch.core.jsonout import JsonFields, key

Compared = Literal["token_ids", "text"]


@dataclass(frozen=True, slots=True)
class Divergence(JsonFields, OnPoint):
    """Where the two arms' outputs first differ; `to_json()` is the report's `first_divergence`."""

    JSON_KEYS = (
        "prompt category concurrency length pair compared token_index char_index a_tokens b_tokens "
        "a_context b_context"
    )

    prompt: str
    category: str
    point: Point
    pair: int
    compared: Compared
    token_index: int | None
    """Index of the first differing token (None when only text could be compared)."""
    char_index: int
    """Index of the first differing character of the decoded text."""
    a_tokens: tuple[int, ...] | None
    b_tokens: tuple[int, ...] | None
    a_context: str
    b_context: str


@dataclass(frozen=True, slots=True)
class LosslessReport(JsonFields):
    """Temperature-0 output equality between the arms, pair by pair; `to_json()` is the report's
    `lossless` (`first` is its `first_divergence`)."""

    checked: bool
    """False when the check does not apply (one server, temperature > 0, no successful pairs)."""
    pairs_compared: int
    pairs_differing: int
    compared_by: str
    """'token_ids', 'text' or 'token_ids+text' (mixed)."""
    first: Divergence | None = field(metadata=key(omit=True))
    note: str = ""

    @property
    def identical(self) -> bool | None:
        """True/False when checked, None otherwise."""
        return (self.pairs_differing == 0) if self.checked else None


CONTEXT_TOKENS = 8
CONTEXT_CHARS = 40


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """Index of the first element where `a` and `b` differ (a length mismatch counts); None if equal."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


class Output(Protocol):
    """One generation's output: its text and, when the server sent them, its token ids."""

    @property
    def text(self) -> str: ...

    @property
    def token_ids(self) -> tuple[int, ...] | None: ...


@dataclass(frozen=True, slots=True)
class OutputComparison:
    """How two outputs compare."""

    compared: Compared
    token_index: int | None
    """First differing token id (a length mismatch counts); None when equal or compared by text."""
    char_index: int | None
    """First differing character of the text (a length mismatch counts); None when the texts are equal."""

    @property
    def identical(self) -> bool:
        """True when what was compared is equal."""
        return (self.token_index if self.compared == "token_ids" else self.char_index) is None


def compare_outputs(a: Output, b: Output) -> OutputComparison:
    """Compare two outputs by token ids when both have them, else by text."""
    char = first_difference(a.text, b.text)
    if a.token_ids is not None and b.token_ids is not None:
        return OutputComparison("token_ids", first_difference(a.token_ids, b.token_ids), char)
    return OutputComparison("text", None, char)


def _divergence(a: RunRecord, b: RunRecord, cmp: OutputComparison) -> Divergence:
    tok = cmp.token_index
    c = cmp.char_index if cmp.char_index is not None else min(len(a.text), len(b.text))
    lo = max(0, c - CONTEXT_CHARS)
    hi = c + CONTEXT_CHARS

    def tokens(r: RunRecord) -> tuple[int, ...] | None:
        return (
            r.token_ids[max(0, tok - CONTEXT_TOKENS) : tok + CONTEXT_TOKENS]
            if tok is not None and r.token_ids
            else None
        )

    pair = a.pair if a.pair is not None else -1
    ctx = (a.text[lo:hi], b.text[lo:hi])
    return Divergence(a.prompt, a.category, a.point, pair, cmp.compared, tok, c, tokens(a), tokens(b), *ctx)


def lossless_check(records: Sequence[RunRecord], temperature: float, paired: bool) -> LosslessReport:
    """Compare every successful measured pair's outputs (meaningful at temperature 0 only)."""
    if not paired:
        return LosslessReport(False, 0, 0, "", None, "one server: nothing to compare")
    if temperature != 0:
        return LosslessReport(
            False, 0, 0, "", None, f"temperature {temperature}: outputs are not expected to match"
        )
    pairs = [(a, b) for a, b in match_pairs(records) if a.error is None and b.error is None]
    if not pairs:
        return LosslessReport(False, 0, 0, "", None, "no successful pairs to compare")
    by: set[str] = set()
    first: Divergence | None = None
    differing = 0
    for a, b in pairs:
        cmp = compare_outputs(a, b)
        by.add(cmp.compared)
        if not cmp.identical:
            differing += 1
            if first is None:
                first = _divergence(a, b, cmp)
    return LosslessReport(True, len(pairs), differing, "+".join(sorted(by)), first)
