"""The bench report: per-arm summaries, paired speed-ups, break-even and sanity gates; `to_json()`.

Acceptance numbers use vLLM's formulas from `mtpwatch.core.metrics.formulas`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any

from mtpwatch.core.ab import stats
from mtpwatch.core.ab.latency import LatencySummary, summarize_latency
from mtpwatch.core.ab.lossless import LosslessReport, lossless_check
from mtpwatch.core.ab.plan import CONTENDED, BenchConfig, Point, RunUnits, build_plan
from mtpwatch.core.ab.records import RunRecord, match_pairs, pair_ratio
from mtpwatch.core.jsonout import JsonFields, round_or_none
from mtpwatch.core.metrics import formulas as F


@dataclass(frozen=True, slots=True)
class Acceptance:
    """Server-counter acceptance summed over a set of measured runs (vLLM's formulas)."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_pos: tuple[float, ...]
    k: int | None
    decode_steps: float = 0.0
    """Δ ITL count of the runs that had it (0: none did)."""
    drafts_with_steps: float = 0.0
    """Δdrafts of those same runs (the drafted share's numerator)."""

    @property
    def drafted_share(self) -> float | None:
        """Share of decode steps that drafted (`formulas.drafted_share`); None without ITL counts."""
        return F.drafted_share(self.drafts_with_steps, self.decode_steps)

    @property
    def acceptance_rate(self) -> float | None:
        return F.acceptance_rate(self.accepted, self.draft_tokens)

    @property
    def mean_acceptance_length(self) -> float | None:
        return F.mean_acceptance_length(self.accepted, self.drafts)

    @property
    def per_position(self) -> tuple[float, ...] | None:
        """Δper_pos[i] / Δdrafts, marginal (P(first i+1 drafts all accepted))."""
        if self.drafts <= 0:
            return None
        return F.per_position_marginal(self.accepted_per_pos, self.drafts)


def _acceptance(records: Sequence[RunRecord]) -> Acceptance | None:
    with_spec = [r for r in records if r.drafts is not None and r.k]
    if not with_spec:
        return None
    per_pos = [sum(xs) for xs in zip_longest(*(r.accepted_per_pos or () for r in with_spec), fillvalue=0.0)]
    return Acceptance(
        drafts=sum(r.drafts or 0.0 for r in with_spec),
        draft_tokens=sum(r.draft_tokens or 0.0 for r in with_spec),
        accepted=sum(r.accepted or 0.0 for r in with_spec),
        accepted_per_pos=tuple(per_pos),
        k=with_spec[-1].k,
        decode_steps=sum(r.decode_steps or 0.0 for r in with_spec),
        drafts_with_steps=sum(r.drafts or 0.0 for r in with_spec if r.decode_steps),
    )


@dataclass(frozen=True, slots=True)
class ArmSummary:
    """One arm's measured runs in one group (a point, or a category within it)."""

    runs: int
    failed: int
    rate: stats.Summary | None
    """Decode tok/s (concurrency 1) or aggregate output tok/s (above), per measured run."""
    ttft_s: stats.Summary | None
    tokens: stats.Summary | None
    acceptance: Acceptance | None
    prompt_cv: dict[str, float] = field(default_factory=dict)
    """CV of the repeated runs of each prompt: the run-to-run noise (pooled CV also mixes prompts)."""
    latency: LatencySummary | None = None
    """Per-request TTFT/TPOT/ITL percentiles and request throughput (`vllm bench serve`'s figures)."""

    @property
    def max_prompt_cv(self) -> float | None:
        """The noisiest prompt's CV; None with fewer than two runs per prompt."""
        return max(self.prompt_cv.values()) if self.prompt_cv else None

    @property
    def noisy_prompts(self) -> list[str]:
        """Prompts whose repeated runs vary by more than `stats.CV_FLAG` (10 %)."""
        return [p for p, cv in self.prompt_cv.items() if cv > stats.CV_FLAG]

    def to_json(self) -> dict[str, Any]:
        """JSON object for `arms.a` / `arms.b`."""
        acc = self.acceptance
        rate = _summary_json(self.rate)
        if rate is not None:
            rate["cv_within_prompt_max"] = round_or_none(self.max_prompt_cv, 4)
            rate["noisy"] = bool(self.noisy_prompts)
            rate["noisy_prompts"] = self.noisy_prompts
        return {
            "runs": self.runs,
            "failed": self.failed,
            "decode_tok_s": rate,
            "ttft_s": _summary_json(self.ttft_s, 5),
            "tokens": _summary_json(self.tokens, 1),
            "acceptance_rate": round_or_none(acc.acceptance_rate, 4) if acc else None,
            "mean_acceptance_length": round_or_none(acc.mean_acceptance_length, 4) if acc else None,
            "per_position": [round(x, 4) for x in acc.per_position] if acc and acc.per_position else None,
            "num_speculative_tokens": acc.k if acc else None,
            "drafts": acc.drafts if acc else None,
            "drafted_share": round_or_none(acc.drafted_share, 4) if acc else None,
            "latency": self.latency.to_json() if self.latency is not None else None,
        }


def _summary_json(s: stats.Summary | None, nd: int = 3) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "median": round(s.median, nd),
        "mean": round(s.mean, nd),
        "cv": round(s.cv, 4),
        "n": s.n,
        "min": round(s.min, nd),
        "max": round(s.max, nd),
    }


def _arm_summary(records: Sequence[RunRecord]) -> ArmSummary:
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.error is None]
    rates = [x for x in (r.rate for r in ok) if x is not None]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    per_prompt: dict[str, list[float]] = {}
    for r in ok:
        if r.rate is not None:
            per_prompt.setdefault(r.prompt, []).append(r.rate)
    return ArmSummary(
        runs=len(measured),
        failed=sum(1 for r in measured if r.error is not None),
        rate=stats.summarize(rates) if rates else None,
        ttft_s=stats.summarize(ttfts) if ttfts else None,
        tokens=stats.summarize([r.tokens for r in ok]) if ok else None,
        acceptance=_acceptance(measured),
        prompt_cv={p: stats.summarize(xs).cv for p, xs in per_prompt.items() if len(xs) > 1},
        latency=summarize_latency(measured),
    )


def _speedup(records: Sequence[RunRecord]) -> stats.SpeedupSummary | None:
    base: list[float] = []
    treat: list[float] = []
    for ra, rb in match_pairs(records):
        if pair_ratio(ra, rb) is not None:
            assert ra.rate is not None and rb.rate is not None
            base.append(ra.rate)
            treat.append(rb.rate)
    return stats.speedup(base, treat) if base else None


@dataclass(frozen=True, slots=True)
class GroupReport(JsonFields):
    """Both arms and the paired speed-up for a set of records (a point, or one category of it)."""

    JSON_KEYS = "speedup arms"

    arms: dict[str, ArmSummary]
    speedup: stats.SpeedupSummary | None


def _group(records: Sequence[RunRecord], paired: bool) -> GroupReport:
    arms = {
        name: _arm_summary([r for r in records if r.arm == name])
        for name in (("a", "b") if paired else ("a",))
    }
    return GroupReport(arms=arms, speedup=_speedup(records) if paired else None)


@dataclass(frozen=True, slots=True)
class PointReport:
    """Results at one point of the sweep, overall and per category."""

    point: Point
    overall: GroupReport
    categories: dict[str, GroupReport]

    def to_json(self) -> dict[str, Any]:
        """JSON object of one entry of `points`."""
        return {
            "concurrency": self.point.concurrency,
            "length": self.point.length,
            "speed_metric": _metric_name(self.point),
            **self.overall.to_json(),
            "categories": {k: v.to_json() for k, v in self.categories.items()},
        }


def _metric_name(point: Point) -> str:
    if point.concurrency == 1:
        return "client decode tok/s = (tokens-1)/(t_last-t_first), per request"
    return f"client aggregate output tok/s = tokens of {point.concurrency} concurrent requests / wall time"


@dataclass(frozen=True, slots=True)
class BenchReport:
    """Everything a bench run found; `to_json()` is the `--json` file."""

    config: BenchConfig
    paired: bool
    labels: Mapping[str, str]
    points: list[PointReport]
    primary: PointReport
    lossless: LosslessReport
    break_even: dict[int, stats.BreakEven]
    """Per concurrency, when the sweep had lengths."""
    break_even_points: dict[int, list[tuple[int, float]]]
    records: list[RunRecord]
    problems: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per arm, trouble that makes numbers incomplete (/metrics unreadable, server restarted)."""
    interrupted: str | None = None
    """Why the bench stopped before its plan was done (Ctrl-C, SIGTERM); None when it ran to the end."""

    @property
    def contended(self) -> bool:
        """True for the race schedule: numbers are for show, not a measurement."""
        return self.config.schedule == "race"

    @property
    def failed(self) -> int:
        """Requests that failed (warm-ups included)."""
        return sum(r.errors for r in self.records)

    def eos_overcount(self, arm: str = "b") -> tuple[int, int, float] | None:
        """(runs of `arm` whose server mean acceptance length exceeds the client's tokens per decode
        step, by `core.metrics.formulas.eos_overcount` (vllm#56101), runs checked, the largest
        excess); None where none does. Checked: measured single-request runs at concurrency 1 (the
        counters then cover that one request)."""
        over = checked = 0
        worst = 0.0
        for r in self.records:
            if r.arm != arm or r.warmup or r.error or r.point.concurrency != 1 or len(r.requests) != 1:
                continue
            request = r.requests[0]
            client = F.client_tokens_per_step(request.tokens, len(request.itl_s) + 1)
            server = F.mean_acceptance_length(r.accepted or 0.0, r.drafts or 0.0)
            if client is None or server is None:
                continue
            checked += 1
            excess = F.eos_overcount(server, client)
            if excess is not None:
                over, worst = over + 1, max(worst, excess)
        return (over, checked, worst) if over else None

    def gate_failures(self, require_identical: bool = False) -> list[str]:
        """Sanity gates, one line per failure; none: the numbers can be trusted."""
        out: list[str] = []
        if self.failed:
            first = next(r.error for r in self.records if r.error)
            out.append(f"{self.failed} request(s) failed (first: {first})")
        planned = sum(len(s.units) for s in build_plan(self.config, self.paired) if isinstance(s, RunUnits))
        if len(self.records) != planned:
            out.append(f"completed {len(self.records)} of {planned} planned runs")
        for name, arm in self.primary.overall.arms.items():
            acc = arm.acceptance
            if acc is None or acc.k is None:
                continue
            if len(acc.accepted_per_pos) != acc.k:
                out.append(
                    f"arm {name.upper()}: per-position list has {len(acc.accepted_per_pos)} entries, "
                    f"but the server exports k={acc.k} positions"
                )
            elif acc.drafts > 0 and abs(sum(acc.accepted_per_pos) - acc.accepted) > max(
                acc.k, 0.01 * acc.accepted
            ):
                out.append(
                    f"arm {name.upper()}: Σ per-position accepted ({sum(acc.accepted_per_pos):.0f}) "
                    f"!= accepted ({acc.accepted:.0f}); the counters are inconsistent"
                )
        if require_identical and self.lossless.identical is False:
            d = self.lossless.first
            where = f" (first at {d.prompt}, token {d.token_index}, char {d.char_index})" if d else ""
            out.append(
                f"outputs differ in {self.lossless.pairs_differing} of "
                f"{self.lossless.pairs_compared} pairs{where}"
            )
        if require_identical and self.lossless.identical is None:
            out.append(f"--require-identical: outputs could not be compared ({self.lossless.note})")
        return out

    def to_json(self, require_identical: bool = False) -> dict[str, Any]:
        """The `--json` document."""
        p = self.primary
        cfg = self.config
        return {
            "tool": "mtpwatch bench",
            "schedule": cfg.schedule,
            "measurement": CONTENDED
            if self.contended
            else "one server, runs one after another, never concurrent"
            if not self.paired
            else "alternating ABBA, never concurrent"
            if cfg.schedule == "alternate"
            else "restart ABBA sessions, one server at a time",
            "treatment": "B/A: arm B = treatment (MTP on) over arm A = baseline (MTP off)"
            if self.paired
            else None,
            "servers": dict(self.labels),
            "runs_per_prompt": cfg.runs,
            "warmup_runs": cfg.warmup,
            "temperature": cfg.temperature,
            "prompts": len(cfg.prompts),
            "speed_metric": _metric_name(p.point),
            "acceptance_source": "server /metrics counters, deltas around each measured run, summed",
            "concurrency": p.point.concurrency,
            "length": p.point.length,
            "speedup": p.overall.speedup.to_json() if p.overall.speedup else None,
            "identical_outputs": self.lossless.identical,
            "lossless": self.lossless.to_json(),
            "first_divergence": self.lossless.first.to_json() if self.lossless.first else None,
            "arms": {k: v.to_json() for k, v in p.overall.arms.items()},
            "categories": {k: v.to_json() for k, v in p.categories.items()},
            "break_even": {
                str(c): {
                    **be.to_json(),
                    "points": [
                        {"length": length, "speedup": round(s, 4)} for length, s in self.break_even_points[c]
                    ],
                }
                for c, be in self.break_even.items()
            },
            "points": [pt.to_json() for pt in self.points],
            "failed_requests": self.failed,
            "interrupted": self.interrupted,
            "problems": {k: list(v) for k, v in self.problems.items()},
            "gates": self.gate_failures(require_identical),
            "runs": [_run_json(r) for r in self.records],
        }


def _run_json(rec: RunRecord) -> dict[str, Any]:
    """A run's row (`RunRecord.row`, the CSV's columns) and, for the sweep advisor's intervals
    (`core.sweeps.certainty` redraws runs), its per-position counter deltas."""
    return {
        **rec.row(),
        "draft_tokens": rec.draft_tokens,
        "accepted_per_pos": list(rec.accepted_per_pos) if rec.accepted_per_pos is not None else None,
    }


def build_report(
    config: BenchConfig,
    records: Sequence[RunRecord],
    *,
    paired: bool,
    labels: Mapping[str, str] | None = None,
    problems: Mapping[str, tuple[str, ...]] | None = None,
    interrupted: str | None = None,
) -> BenchReport:
    """Turn run records into a report (also usable on records loaded from elsewhere)."""
    points: list[PointReport] = []
    for point in config.points:
        recs = [r for r in records if r.point == point]
        cats: dict[str, GroupReport] = {}
        for cat in dict.fromkeys(r.category for r in recs):
            cats[cat] = _group([r for r in recs if r.category == cat], paired)
        points.append(PointReport(point, _group(recs, paired), cats))
    primary = next((pt for pt in points if pt.point == config.primary), points[0])
    be_points: dict[int, list[tuple[int, float]]] = {}
    for c in config.concurrency if paired and config.lengths else ():
        pts = [
            (pt.point.length, pt.overall.speedup.median)
            for pt in points
            if pt.point.concurrency == c and pt.point.length is not None and pt.overall.speedup is not None
        ]
        if pts:
            be_points[c] = pts
    return BenchReport(
        config=config,
        paired=paired,
        labels=dict(labels or {}),
        points=points,
        primary=primary,
        lossless=lossless_check(records, config.temperature, paired),
        break_even={c: stats.break_even(pts) for c, pts in be_points.items()},
        break_even_points=be_points,
        records=list(records),
        problems=dict(problems or {}),
        interrupted=interrupted,
    )
