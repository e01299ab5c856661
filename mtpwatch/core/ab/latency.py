"""Per-request latency percentiles and request throughput, as `vllm bench serve` reports them.

From vllm/benchmarks/serve.py (`calculate_metrics`), over the completed requests of one arm:

- TTFT: request sent → first chunk with output, one value per request;
- TPOT: (e2e latency − TTFT) / (output tokens − 1), one value per request with more than one token;
- ITL: every gap between successive chunks with output, all requests pooled (under speculative
  decoding one chunk carries up to k+1 tokens, so ITL is per verify step, not per token);
- E2EL: request sent → last chunk with output;
- percentiles: `numpy.percentile`'s default (linear interpolation between closest ranks);
- request throughput: completed requests / benchmark duration. mtpwatch's arms take turns, so an
  arm's duration is the wall time of its own measured runs (Σ `wall_s`), not the whole bench's;
- output token throughput: output tokens / that duration (`formulas.output_throughput`).

Warm-up runs are left out, as everywhere in the report.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mtpwatch.core.ab.records import RunRecord
from mtpwatch.core.jsonout import JsonFields, key
from mtpwatch.core.metrics import formulas as F

PERCENTILES: tuple[int, ...] = (50, 90, 99)
"""The percentiles shown (`vllm bench serve --metric-percentiles 50,90,99`)."""


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0–100) with `numpy.percentile`'s default, linear interpolation."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile must be in 0..100, got {p}")
    xs = sorted(values)
    rank = (len(xs) - 1) * p / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Mean and percentiles of one latency, in seconds."""

    n: int
    mean: float
    percentiles: tuple[tuple[int, float], ...]

    def at(self, p: int) -> float | None:
        """The p-th percentile, when it is one of `PERCENTILES`."""
        return dict(self.percentiles).get(p)

    def to_json(self) -> dict[str, Any]:
        """Milliseconds, named as `vllm bench serve` names them (mean, p50, p90, p99)."""
        out: dict[str, Any] = {"n": self.n, "mean": round(1000 * self.mean, 3)}
        out.update({f"p{p}": round(1000 * v, 3) for p, v in self.percentiles})
        return out


def distribution(values: Iterable[float]) -> Distribution | None:
    """The mean and `PERCENTILES` of `values`; None when there are none."""
    xs = list(values)
    if not xs:
        return None
    return Distribution(len(xs), statistics.fmean(xs), tuple((p, percentile(xs, p)) for p in PERCENTILES))


@dataclass(frozen=True, slots=True)
class LatencySummary(JsonFields):
    """One arm's per-request latencies and request throughput over its measured runs; `to_json()` is
    the `arms.<a|b>.latency` object (milliseconds; request throughput in requests/s)."""

    JSON_KEYS = "source completed duration_s request_throughput output_throughput ttft tpot itl e2el"
    JSON_PROPS = {"request_throughput": key(nd=4), "output_throughput": key(nd=4)}
    source: ClassVar[str] = (
        "client, per request, as vllm bench serve (TPOT excludes the first token; ITL is per streamed chunk)"
    )

    completed: int
    """Requests that finished without an error."""
    duration_s: float = field(metadata=key(nd=4))
    """Σ wall time of the arm's measured runs."""
    ttft: Distribution | None = field(metadata=key("ttft_ms"))
    tpot: Distribution | None = field(metadata=key("tpot_ms"))
    itl: Distribution | None = field(metadata=key("itl_ms"))
    e2el: Distribution | None = field(metadata=key("e2el_ms"))
    output_tokens: int = 0
    """Σ completion tokens of the arm's measured runs (server usage)."""

    @property
    def request_throughput(self) -> float | None:
        return self.completed / self.duration_s if self.duration_s > 0 else None

    @property
    def output_throughput(self) -> float | None:
        return F.output_throughput(self.output_tokens, self.duration_s)


def summarize_latency(records: Sequence[RunRecord]) -> LatencySummary | None:
    """The latencies of the measured (non-warm-up) runs in `records`; None when there are none.
    Runs from a log without per-request timings count towards the request throughput only."""
    measured = [r for r in records if not r.warmup]
    if not measured:
        return None
    requests = [q for r in measured for q in r.requests]
    return LatencySummary(
        completed=sum(max(r.point.concurrency - r.errors, 0) for r in measured),
        duration_s=sum(r.wall_s for r in measured),
        ttft=distribution(q.ttft_s for q in requests if q.ttft_s is not None),
        tpot=distribution(t for t in (q.tpot_s for q in requests) if t is not None),
        itl=distribution(gap for q in requests for gap in q.itl_s),
        e2el=distribution(q.e2el_s for q in requests if q.e2el_s is not None),
        output_tokens=sum(r.tokens for r in measured),
    )
