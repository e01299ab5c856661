"""One finished run of the plan (`RunRecord`), its flat row for JSON and CSV, and how runs pair up.

Speed per run is the client-measured decode tok/s = (tokens − 1) / (t_last − t_first) at
concurrency 1, and aggregate output tok/s (tokens of all concurrent requests / wall time) above 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mtpwatch.core.ab.arms import ArmName
from mtpwatch.core.ab.plan import OnPoint, Point
from mtpwatch.core.jsonout import JsonFields, key, round_or_none
from mtpwatch.core.metrics import formulas as F


@dataclass(frozen=True, slots=True)
class RequestTiming(JsonFields):
    """One completed request's client-side latencies (`ArmResult`'s; `core.ab.latency` makes percentiles
    of them and says what each is)."""

    tokens: int
    ttft_s: float | None
    e2el_s: float | None
    itl_s: tuple[float, ...] = field(default=(), metadata=key(nd=6))

    @property
    def tpot_s(self) -> float | None:
        """`vllm bench serve`'s TPOT of this request."""
        return F.tpot_s(self.tokens, self.ttft_s, self.e2el_s)


@dataclass(frozen=True, slots=True)
class RunRecord(JsonFields, OnPoint):
    """One finished unit: client numbers and the server-counter deltas around it; `to_json()` is
    all of it (the run log's line, `core.ab.runlog`), `row()` the report's summary."""

    JSON_KEYS = (
        "arm prompt prompt_index category concurrency length run warmup pair tokens ttft_s decode_tok_s "
        "output_tok_s wall_s errors error contended drafts draft_tokens accepted accepted_per_pos k "
        "decode_steps text token_ids requests"
    )

    arm: ArmName
    prompt: str
    category: str
    point: Point
    run: int
    warmup: bool
    pair: int | None
    tokens: int
    """Completion tokens (summed over concurrent requests)."""
    ttft_s: float | None
    """Time to first token (mean over concurrent requests)."""
    decode_tok_s: float | None
    """Client decode tok/s (mean over concurrent requests)."""
    output_tok_s: float | None
    """All tokens / wall time of the unit: the aggregate rate at concurrency > 1."""
    wall_s: float
    errors: int
    error: str | None
    contended: bool
    prompt_index: int = 0
    """Position of the prompt in the workload (ids in user files need not be unique)."""
    text: str = field(default="", repr=False)
    token_ids: tuple[int, ...] | None = field(default=None, repr=False)
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted: float | None = None
    accepted_per_pos: tuple[float, ...] | None = None
    k: int | None = None
    decode_steps: float | None = None
    """Δ `inter_token_latency_seconds_count` around the unit: decode steps per request, the
    denominator of the drafted share (`formulas.drafted_share`)."""
    requests: tuple[RequestTiming, ...] = field(default=(), repr=False)
    """Each completed request of the unit (one at concurrency 1), for the latency percentiles."""

    @property
    def rate(self) -> float | None:
        """The speed used for pairing: decode tok/s at concurrency 1, aggregate output tok/s above."""
        return self.decode_tok_s if self.point.concurrency == 1 else self.output_tok_s

    @property
    def acceptance_rate(self) -> float | None:
        if self.accepted is None or self.draft_tokens is None:
            return None
        return F.acceptance_rate(self.accepted, self.draft_tokens)

    def row(self) -> dict[str, Any]:
        """Flat per-run row for JSON `runs` and the CSV: `CSV_FIELDS`, rounded as `ROW_DIGITS` says."""
        return {
            name: round_or_none(getattr(self, name), ROW_DIGITS[name])
            if name in ROW_DIGITS
            else getattr(self, name)
            for name in CSV_FIELDS
        }


CSV_FIELDS: tuple[str, ...] = (
    "arm", "prompt", "category", "concurrency", "length", "run", "warmup", "pair", "tokens", "ttft_s",
    "decode_tok_s", "output_tok_s", "wall_s", "acceptance_rate", "drafts", "accepted", "contended", "error",
)  # fmt: skip
ROW_DIGITS = {"ttft_s": 5, "decode_tok_s": 3, "output_tok_s": 3, "wall_s": 4, "acceptance_rate": 4}
"""Digits each rounded column of `row()` keeps."""


def pair_ratio(a: RunRecord, b: RunRecord) -> float | None:
    """B / A of one pair's speeds; None when either run failed or has no speed."""
    ra, rb = a.rate, b.rate
    if a.error or b.error or ra is None or rb is None or ra <= 0:
        return None
    return rb / ra


def match_pairs(records: Sequence[RunRecord]) -> list[tuple[RunRecord, RunRecord]]:
    """Every measured pair (A's record, B's record), matched by prompt, point and pair index."""
    a = {(r.prompt_index, r.point, r.pair): r for r in records if r.arm == "a" and r.pair is not None}
    return [
        (mate, r)
        for r in records
        if r.arm == "b" and r.pair is not None and (mate := a.get((r.prompt_index, r.point, r.pair)))
    ]
