"""`vllm bench forward --output-json` as a step-time table for the k advisor (`bench --step-times`).

vLLM 0.33+ times exact batch shapes without serving: `vllm bench forward --model M
--speculative-config … --case base=1@4096 --case k2=1*3@4096:2 --output-json FILE`. What it writes
(read in the released vLLM 0.34.0 wheel; 0.33 not checked here):

- `vllm/benchmarks/forward/main.py:259-296`: a JSON **list**, one object per case:
  `{"case": NAME, "requests": [asdict(BenchRequest) …], "median_us": rank 0's median replay time
  (each replay the max over ranks), "ranks": [each rank's result]}`;
- `vllm/benchmarks/forward/shapes.py:14-53`: a request is `{"query_len", "kv_len",
  "num_draft_tokens", "chunked"}`; a decode or verify step has a prefix (`kv_len > query_len`) and
  `query_len == 1 + num_draft_tokens`;
- `vllm/benchmarks/forward/capture.py:272-303`: a rank's `latency_us` has `median`,
  `sample_spread_pct`, `mean`, `std`, `min`, `p90`, `count`, `samples_us`;
- what is timed (main.py:3-11, `--exclude-drafter` :76-82): the target forward plus the configured
  drafter (MTP, EAGLE, DSpark, DFlash; every draft accepted) as one CUDA graph. Target sampling,
  rejection sampling and the CPU's step overhead are not: a serving step costs more, so the ratio
  t(k)/t(0) read here leaves out the fixed costs a sweep's serving runs include.

A case is one step of batch size b at k when all its b requests are decode/verify requests drafting
the same k; other cases (prefills, mixed batches) are skipped and named. ρ(k) = t(k) / t(0) is
taken at one batch size (the median time of a shape timed more than once) and needs a k = 0 case
there.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ForwardError(ValueError):
    """The file is not `vllm bench forward` output, or holds no usable step at the batch asked."""


@dataclass(frozen=True, slots=True)
class StepTime:
    """One timed decode/verify step: `batch` requests, each verifying `k` drafts."""

    batch: int
    k: int
    median_s: float


@dataclass(frozen=True, slots=True)
class ForwardTable:
    """The usable steps of one file, and the cases it skipped."""

    source: str
    steps: tuple[StepTime, ...]
    skipped: tuple[str, ...] = ()

    def ratios(self, batch: int) -> dict[int, float]:
        """ρ(k) = t(k) / t(0) at `batch` for every k ≥ 1 the file timed there."""
        times: dict[int, list[float]] = {}
        for s in self.steps:
            if s.batch == batch:
                times.setdefault(s.k, []).append(s.median_s)
        if 0 not in times:
            raise ForwardError(f"{self.source}: no k=0 case at batch {batch}")
        t0 = statistics.median(times[0])
        return {k: statistics.median(v) / t0 for k, v in sorted(times.items()) if k > 0}


def _step(obj: Mapping[str, Any]) -> StepTime | None:
    requests = obj.get("requests")
    median = obj.get("median_us")
    if not isinstance(requests, list) or not requests or not isinstance(median, int | float) or median <= 0:
        return None
    ks: set[int] = set()
    for req in requests:
        if not isinstance(req, Mapping):
            return None
        q, kv, d = req.get("query_len"), req.get("kv_len"), req.get("num_draft_tokens", 0)
        if not (isinstance(q, int) and isinstance(kv, int) and isinstance(d, int)):
            return None
        if not (kv > q and q == 1 + d):  # a decode/verify step (shapes.BenchRequest.is_decode)
            return None
        ks.add(d)
    return StepTime(len(requests), ks.pop(), median / 1e6) if len(ks) == 1 else None


def parse_forward(doc: Any, source: str = "step times") -> ForwardTable:
    """The steps of a parsed `--output-json` document; ForwardError: not a list of cases, or no
    decode/verify case in it."""
    if not isinstance(doc, list) or not all(isinstance(x, Mapping) and "case" in x for x in doc):
        raise ForwardError(f"{source}: not `vllm bench forward --output-json` output (a list of cases)")
    parsed = [(obj, _step(obj)) for obj in doc]
    steps = [step for _, step in parsed if step is not None]
    if not steps:
        raise ForwardError(f"{source}: no decode/verify case (every request q = 1 + drafts, with a prefix)")
    return ForwardTable(
        source, tuple(steps), tuple(str(obj.get("case")) for obj, step in parsed if step is None)
    )


def load_forward(path: Path) -> ForwardTable:
    """Read and parse a file (ForwardError on unreadable JSON too)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ForwardError(f"{path}: {exc}") from None
    return parse_forward(doc, path.name)


def steps_at(table: ForwardTable, concurrency: Sequence[int]) -> tuple[int, dict[int, float]]:
    """The batch the advisor uses (the sweep's smallest concurrency, or the nearest batch timed with
    k = 0, ties: smaller) and its ratios."""
    wanted = min(concurrency) if concurrency else 1
    with_base = {s.batch for s in table.steps if s.k == 0}
    if not with_base:
        raise ForwardError(f"{table.source}: no k=0 case (a decode step without drafts) to divide by")
    batch = min(with_base, key=lambda b: (abs(b - wanted), b))
    return batch, table.ratios(batch)
