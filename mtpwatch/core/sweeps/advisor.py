"""The k advisor: from one run at k, predict tokens per step and decode tok/s for every k' ≤ k.

Inputs, all measured: the marginal per-position acceptance a_1 … a_k at the running k (vLLM's
``num_accepted_tokens_per_pos[i] / num_drafts``: the share of steps whose first i drafts were all
accepted); the step time t_k (seconds per engine step) and the baseline's t_0 (seconds per token
without speculation). In the app t_k is the ITL histogram's mean (vLLM counts one ITL per engine
step); in a sweep t_k = mean acceptance length / decode tok/s, the same quantity from the client's
clock.

Model (`advise`):

- tokens per step τ(k') = 1 + Σ_{i ≤ k'} a_i (vLLM's mean acceptance length, `formulas`).
  Truncating the chain at k' keeps the first k' positions' acceptance: position i is accepted only
  when every earlier one is, whatever comes after it;
- step time t(k') = t_0 + k' · c, c = (t_k − t_0) / k the measured cost of one more draft position
  (one drafter pass plus one more token to verify), the same for every position: exact for a dense
  target whose drafter runs once per position (MTP, EAGLE, draft models); a MoE target's verify
  pass grows less than linearly (its experts overlap), so the model under-predicts step time
  between 0 and k slightly; ngram drafts cost ~nothing, so c is the verify cost alone;
- decode tok/s at k' = τ(k') / t(k'); the advisor names the k' with the highest one.

A sweep (`advise_sweep`) measures several k, each against its own baseline run (the restart
schedule: pairs k=0, k, k=0 of the same prompt); its step model comes from every measured k:

- ρ(k) = t(k)/t0 = τ_k / S_k, S_k the median paired speed-up and τ_k the measured mean acceptance
  length. A paired speed-up cancels the drift between restarts (one server start of the same k=0
  runs ~10 % off another on a loaded CPU), so ρ does not carry one pair's baseline;
- least squares ρ(k) = 1 + σ + γ·k over k ≥ 1: t(k) = t0 + s + c·k, s = σ·t0 the fixed cost of
  speculating at all (the drafter's launch, the rejection sampler, the bigger batch's bookkeeping),
  c = γ·t0 the cost of one more position. One measured k cannot separate s from c: then s = 0, the
  two-point model above. When the line misses a measured ρ by more than `LINEAR_TOLERANCE` and,
  where ρ's 95 % interval is known, lies outside it (on a loaded CPU a dozen pairs spread ρ by
  ±10 % or more: a table would fit that noise), the model is the measured table (linear between
  measured ks, from the two nearest beyond them; k=0 is no point of it, having no fixed cost), and
  the residual says why;
- t0 is the baseline the sweep's table prints (the median of each k's median k=0 rate), so
  predicted tok/s = that k=0 rate × predicted speed-up;
- τ(k') is the measured acceptance carried to k' as `core.sweeps.acceptance` says (above the
  largest measured k: marked extrapolated); the 95 % intervals, and which k not run is worth a
  run, are `core.sweeps.certainty`'s.

A measured k predicted from a fit that includes it is partly in-sample, so each measured k below
the largest is also predicted from the fit over the other ks (`SweepAdvice.held_out`,
leave-one-out): how well the advisor predicts a k it has not run (measured in
docs/measurements/2026-12-06-the-k-advisor-out-of-sample.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from mtpwatch.core.jsonout import JsonFields, key
from mtpwatch.core.sweeps.acceptance import (
    acceptance_scale,
    acceptance_source,
    chain_at,
    geometric_conditional,
    interpolate,
)


@dataclass(frozen=True, slots=True)
class KPrediction(JsonFields):
    """What the advisor expects at one k'."""

    k: int
    tokens_per_step: float = field(metadata=key(nd=4))
    step_s: float = field(metadata=key("step_ms", times=1000, nd=4))
    decode_tok_s: float = field(metadata=key(nd=3))
    speedup: float = field(metadata=key(nd=4))
    """Over the baseline (k = 0)."""
    extrapolated: bool = False
    """Above the largest measured k: acceptance from the geometric fit, step time from the line."""


@dataclass(frozen=True, slots=True)
class Advice:
    """Predictions for k' = 0 … k and the k the advisor would choose (the A/B view's advice line)."""

    from_k: int
    per_position_cost_s: float
    predictions: tuple[KPrediction, ...]
    best_k: int
    caveat: str | None = None
    """What the engine runs that limits the advice (`core.sweeps.engine`), one short phrase."""
    withheld: bool = False
    """The engine's mode makes the predictions meaningless (`EngineMode.advice_withheld`)."""

    def at(self, k: int) -> KPrediction | None:
        return next((p for p in self.predictions if p.k == k), None)


def advise(
    marginal: Sequence[float],
    step_s: float,
    baseline_step_s: float,
    ks: Sequence[int] | None = None,
) -> Advice:
    """Predict every k' ≤ k in `ks` (default 0 … k) from a run at k = len(marginal): `marginal` its
    per-position acceptance (position 1 first), `step_s` and `baseline_step_s` the module's t_k and t_0.
    ValueError: no positions, a non-positive step time, or a k' above k."""
    k = len(marginal)
    if k < 1:
        raise ValueError("the running k must be at least 1 (per-position acceptance needed)")
    if step_s <= 0 or baseline_step_s <= 0:
        raise ValueError("step times must be positive")
    wanted = list(range(k + 1)) if ks is None else sorted(set(ks))
    if any(kk < 0 or kk > k for kk in wanted):
        raise ValueError(f"can only predict k' between 0 and the running k={k}")
    fit = fit_ratios({k: step_s / baseline_step_s}, 1.0 / baseline_step_s)  # two points: k=0 and k
    predictions = [fit.predict(kk, 1.0 + sum(marginal[:kk]), 1.0 / baseline_step_s) for kk in wanted]
    best = max(predictions, key=lambda p: p.decode_tok_s)
    return Advice(k, fit.per_position_s, tuple(predictions), best.k)


# --- a sweep: every measured k -------------------------------------------------------------------

#: Largest |ρ_fit − ρ_measured| / ρ_measured the line may leave before the measured table is used.
LINEAR_TOLERANCE = 0.05

SWEEP_STEP_MODEL = (
    "ρ(k) = t(k)/t0 = τ_k / paired speed-up_k; least squares ρ = 1 + σ + γ·k over measured k ≥ 1 "
    "(s = σ·t0 fixed cost of speculating, c = γ·t0 per position), the measured table when the line misses "
    f"a measured ρ by > {LINEAR_TOLERANCE:.0%} and lies outside its 95% interval (where one is known); "
    "τ(k') = 1 + Σ_(i≤k') marginal_i of the smallest measured k ≥ k' (the largest k's, "
    "continued geometrically, above it)"
)


@dataclass(frozen=True, slots=True)
class KMeasure:
    """What a sweep measured at one k ≥ 1 against its own baseline runs."""

    k: int
    speedup: float
    """Median paired speed-up (k over its k=0 runs, same prompt and run number)."""
    tokens_per_step: float
    """Mean acceptance length τ_k from the server's counters."""

    @property
    def step_ratio(self) -> float:
        """ρ(k) = t(k)/t0 = τ_k / S_k."""
        return self.tokens_per_step / self.speedup


@dataclass(frozen=True, slots=True)
class StepFit(JsonFields):
    """The step-time model of a sweep, normalised by the baseline's step time t0."""

    JSON_KEYS = (
        "kind t0_s fixed_s per_position_s measured residuals max_residual linear_tolerance source spread"
    )
    JSON_PROPS = {
        "fixed_s": key("fixed_ms", times=1000, nd=4),
        "per_position_s": key("per_position_ms", times=1000, nd=4),
        "max_residual": key(nd=5),
    }
    linear_tolerance: ClassVar[float] = LINEAR_TOLERANCE

    kind: Literal["linear", "table", "two-point"]
    """linear: the least-squares line; table: the measured ρ (the line missed); two-point: one k only."""
    t0_s: float = field(metadata=key("t0_ms", times=1000, nd=4))
    fixed: float
    """σ = s / t0 (0 for two-point)."""
    per_position: float
    """γ = c / t0."""
    measured: Mapping[int, float] = field(metadata=key("measured_step_ratio", nd=5, str_keys=True))
    """ρ(k) measured at each k ≥ 1."""
    residuals: Mapping[int, float] = field(default_factory=dict, metadata=key(nd=5, str_keys=True))
    """(ρ_line − ρ_measured) / ρ_measured at each measured k."""
    source: str = "serving runs"
    """Where ρ(k) came from: the sweep's serving runs, or `vllm bench forward` (`core.sweeps.forward`)."""
    spread: Mapping[int, tuple[float, float]] = field(
        default_factory=dict, metadata=key("measured_step_ratio_ci", nd=5, str_keys=True)
    )
    """The 95 % interval of each measured ρ(k) (bootstrap over runs, `core.sweeps.certainty`)."""

    @property
    def fixed_s(self) -> float:
        return self.fixed * self.t0_s

    @property
    def per_position_s(self) -> float:
        return self.per_position * self.t0_s

    @property
    def max_residual(self) -> float:
        return max((abs(r) for r in self.residuals.values()), default=0.0)

    @property
    def top_k(self) -> int:
        return max(self.measured)

    def ratio(self, k: int) -> float:
        """Predicted t(k)/t0: the line (its slope continued above the largest measured k), or the
        table as the module says (never below a plain step's 1)."""
        if k == 0:
            return 1.0
        top = self.top_k
        if self.kind != "table":
            if k > top:
                return self.ratio(top) + self.per_position * (k - top)
            return 1.0 + self.fixed + self.per_position * k
        if k in self.measured:
            return self.measured[k]
        return max(1.0, interpolate(sorted(self.measured.items()), k))  # a table has 3+ ks (2 fit a line)

    def predict(self, k: int, tau: float, baseline_tok_s: float) -> KPrediction:
        """k's prediction from its tokens per step τ: the speed-up τ / ratio(k) over the baseline."""
        ratio = self.ratio(k)
        speedup = tau / ratio if ratio > 0 else 0.0
        return KPrediction(k, tau, ratio * self.t0_s, speedup * baseline_tok_s, speedup, k > self.top_k)

    def describe(self) -> str:
        """One line: the fit, in milliseconds, and how well it holds."""
        ms = 1000 * self.t0_s
        if self.source != "serving runs":
            ratios = " ".join(f"k={k}:{r:.3f}" for k, r in sorted(self.measured.items()))
            return f"step model from {self.source} (t(k)/t(0) {ratios}; t0 {ms:.2f} ms, the k=0 row): " + (
                self.kind if self.kind != "two-point" else "one k"
            )
        if self.kind == "two-point":
            return (
                f"step model (two points, k=0 and k={self.top_k}): t0 {ms:.2f} ms, "
                f"c {1000 * self.per_position_s:.2f} ms a position (fixed cost not separable from one k)"
            )
        res = " ".join(f"k={k}:{100 * r:+.1f}%" for k, r in sorted(self.residuals.items()))
        line = (
            f"t(k) = t0 + s + c·k fitted over k={','.join(map(str, sorted(self.measured)))}: "
            f"t0 {ms:.2f} ms (the k=0 row), s {1000 * self.fixed_s:.2f} ms, "
            f"c {1000 * self.per_position_s:.2f} ms · residual {res}"
        )
        if self.spread:
            cis = " ".join(f"k={k}:[{lo:.2f}, {hi:.2f}]" for k, (lo, hi) in sorted(self.spread.items()))
            line += f" · t(k)/t0 95% CI {cis}"
        if self.kind == "table":
            line += f" — not linear (> {LINEAR_TOLERANCE:.0%}): predictions use the measured step times"
        elif any(abs(r) > LINEAR_TOLERANCE for r in self.residuals.values()):
            line += " — the line misses by more than 5% but within the noise (inside each CI): the line"
        return line


def fit_step_model(
    measures: Sequence[KMeasure],
    baseline_tok_s: float,
    spread: Mapping[int, tuple[float, float]] | None = None,
    kind: Literal["linear", "table"] | None = None,
) -> StepFit:
    """The step model from every measured k ≥ 1 (`fit_ratios` for `spread` and `kind`); ValueError: no
    k ≥ 1, a k measured twice, a non-positive speed-up or rate."""
    if len({m.k for m in measures}) != len(measures):
        raise ValueError("each k once")
    if any(m.speedup <= 0 or m.tokens_per_step <= 0 for m in measures):
        raise ValueError("speed-ups and tokens per step must be positive")
    return fit_ratios({m.k: m.step_ratio for m in measures}, baseline_tok_s, spread=spread, kind=kind)


def fit_ratios(
    measured: Mapping[int, float],
    baseline_tok_s: float,
    source: str = "serving runs",
    *,
    spread: Mapping[int, tuple[float, float]] | None = None,
    kind: Literal["linear", "table"] | None = None,
) -> StepFit:
    """The step model from ρ(k) = t(k)/t0 at each k ≥ 1 (a sweep's, or `vllm bench forward`'s), line or
    table as the module says; `spread`: each ρ's 95 % interval; `kind` forces the choice (the bootstrap
    keeps the point estimate's model in every resample). ValueError: no k ≥ 1, a non-positive ratio or
    baseline."""
    if baseline_tok_s <= 0 or not measured or min(measured) < 1 or min(measured.values()) <= 0:
        raise ValueError("a step model needs positive ratios at ks ≥ 1 and a positive baseline")
    t0 = 1.0 / baseline_tok_s
    ks = sorted(measured)
    spread = {k: v for k, v in (spread or {}).items() if k in measured}
    if len(ks) == 1:
        (k,) = ks
        return StepFit(
            "two-point", t0, 0.0, (measured[k] - 1.0) / k, dict(measured), source=source, spread=spread
        )
    gamma, intercept = statistics.linear_regression(ks, [measured[k] for k in ks])
    sigma = intercept - 1.0
    residuals = {k: (1.0 + sigma + gamma * k - measured[k]) / measured[k] for k in ks}

    def misses(k: int) -> bool:
        line, ci = 1.0 + sigma + gamma * k, spread.get(k)
        return abs(residuals[k]) > LINEAR_TOLERANCE and (ci is None or not ci[0] <= line <= ci[1])

    chosen = kind or ("table" if any(misses(k) for k in ks) else "linear")
    return StepFit(chosen, t0, sigma, gamma, dict(measured), residuals, source, spread)


@dataclass(frozen=True, slots=True)
class SweepAdvice:
    """The advisor over a sweep: predictions at every k asked for, from every measured k."""

    from_k: int
    """The k whose per-position acceptance gives τ(k')."""
    fit: StepFit
    predictions: tuple[KPrediction, ...]
    best_k: int
    """The fastest predicted k up to the largest measured one (`extrapolated_best` names one above)."""
    baseline_tok_s: float
    geometric: tuple[float, float] | None = None
    """(α, β) of the conditional acceptance when some k is extrapolated."""
    held_out: Mapping[int, float] = field(default_factory=dict)
    """Per measured k below the largest: its speed-up predicted from the fit over the other ks."""
    serving_fit: StepFit | None = None
    """The serving runs' step model, kept beside `fit` when `fit` came from `vllm bench forward`."""
    acceptance_from: Mapping[int, int] = field(default_factory=dict)
    """Per predicted k ≥ 1, the measured k whose per-position acceptance gave τ (`acceptance_source`)."""
    acceptance_scale: Mapping[int, float] = field(default_factory=dict)
    """Per predicted k ≥ 1, the factor its source's acceptance was scaled by (`acceptance_scale`)."""

    def at(self, k: int) -> KPrediction | None:
        return next((p for p in self.predictions if p.k == k), None)

    @property
    def extrapolated_best(self) -> KPrediction | None:
        """An extrapolated k predicted faster than the best measured-range k (worth measuring)."""
        best = self.at(self.best_k)
        top = max((p for p in self.predictions if p.extrapolated), key=lambda p: p.speedup, default=None)
        return top if top is not None and best is not None and top.speedup > best.speedup else None

    def line(self, beyond_line: bool = True) -> str:
        """One line; `beyond_line` False leaves out the extrapolated "measure it" (where intervals
        decide it: `core.sweeps.certainty.Certainty.verdicts`)."""
        parts = " ".join(
            f"k={p.k}:{p.decode_tok_s:.1f}{'*' if p.extrapolated else ''}" for p in self.predictions
        )
        best = self.at(self.best_k)
        gain = f" ({best.speedup:.2f}× baseline)" if best else ""
        beyond = self.extrapolated_best if beyond_line else None
        more = f"; k={beyond.k} predicted {beyond.speedup:.2f}× (extrapolated: measure it)" if beyond else ""
        star = " (* extrapolated)" if any(p.extrapolated for p in self.predictions) else ""
        return (
            f"k advisor (acceptance from {self._sources()}, step model from "
            f"{'every k' if self.fit.source == 'serving runs' else self.fit.source}): "
            f"best k={self.best_k}{gain}{more} · predicted tok/s {parts}{star}"
        )

    def _sources(self) -> str:
        """'k=4' (one source) or 'each measured k its own, k=3 from k=4, k=5,6 from k=4 (continued)'."""
        measured = set(self.fit.measured) if self.fit.source == "serving runs" else set()
        others = {k: s for k, s in self.acceptance_from.items() if k not in measured and k != s}
        if len(set(self.acceptance_from.values())) <= 1:
            return f"k={self.from_k}"
        parts = ["each measured k its own"]
        for src in sorted(set(others.values())):
            ks = [k for k, s in sorted(others.items()) if s == src]
            below, above = [k for k in ks if k < src], [k for k in ks if k > src]
            if below:
                parts.append(f"k={','.join(map(str, below))} from k={src}")
            if above:
                parts.append(f"k={','.join(map(str, above))} from k={src} (continued)")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "from_k": self.from_k,
            "per_position_cost_ms": round(self.fit.per_position_s * 1000, 4),
            "step_model": SWEEP_STEP_MODEL,
            "fit": self.fit.to_json(),
            "baseline_decode_tok_s": round(self.baseline_tok_s, 3),
            "geometric_conditional": (
                {"alpha": round(self.geometric[0], 5), "beta": round(self.geometric[1], 5)}
                if self.geometric
                else None
            ),
            "held_out_speedup": {str(k): round(v, 4) for k, v in sorted(self.held_out.items())},
            "step_times_from": self.fit.source,
            "serving_fit": self.serving_fit.to_json() if self.serving_fit else None,
            "acceptance_from": {str(k): v for k, v in sorted(self.acceptance_from.items())},
            "acceptance_scale": {str(k): round(v, 4) for k, v in sorted(self.acceptance_scale.items())},
            "best_k": self.best_k,
            "extrapolated_best_k": self.extrapolated_best.k if self.extrapolated_best else None,
            "predictions": [p.to_json() for p in self.predictions],
        }


def advise_sweep(
    measures: Sequence[KMeasure],
    marginal: Sequence[float],
    baseline_tok_s: float,
    ks: Sequence[int],
    step_fit: StepFit | None = None,
    *,
    marginals: Mapping[int, Sequence[float]] | None = None,
    spread: Mapping[int, tuple[float, float]] | None = None,
    kind: Literal["linear", "table"] | None = None,
    shift: bool = True,
) -> SweepAdvice:
    """Predict every k in `ks` (above len(marginal): extrapolated) from a sweep: the step model from
    all `measures`, or `step_fit` (`vllm bench forward`'s, the serving runs' kept beside it); τ from
    `marginal` (the largest measured k's) or, with `marginals`, each measured k's (`acceptance_source`),
    scaled by position 1's shift with k when `shift`; `spread` and `kind` as `fit_ratios` takes them."""
    serving = fit_step_model(measures, baseline_tok_s, spread, kind)
    fit = step_fit or serving
    if not marginal:
        raise ValueError("per-position acceptance needed")
    wanted = sorted(set(ks))
    if any(k < 0 for k in wanted):
        raise ValueError("ks must be ≥ 0")
    table = {m: tuple(v) for m, v in (marginals or {}).items() if 0 < m < len(marginal) and len(v) == m}
    table[len(marginal)] = tuple(marginal)
    geometric = None
    if max(wanted, default=0) > len(marginal):
        try:
            geometric = geometric_conditional(marginal)
        except ValueError:
            wanted = [k for k in wanted if k <= len(marginal)]
    predictions = [fit.predict(k, 1.0 + sum(chain_at(k, table, shift)), baseline_tok_s) for k in wanted]
    best = max((p for p in predictions if not p.extrapolated), key=lambda p: p.speedup, default=None)
    best = best or max(predictions, key=lambda p: p.speedup)
    held: dict[int, float] = {}
    for m in measures if step_fit is None else ():  # the forward table is out of sample throughout
        others = [x for x in measures if x.k != m.k]
        if m.k >= fit.top_k or not others or m.k > len(marginal):
            continue
        ratio = fit_step_model(others, baseline_tok_s, spread).ratio(m.k)
        if ratio > 0:
            others_table = {j: v for j, v in table.items() if j != m.k}
            held[m.k] = (1.0 + sum(chain_at(m.k, others_table, shift))) / ratio
    sources = {p.k: acceptance_source(p.k, table) for p in predictions if p.k > 0}
    scales = {k: acceptance_scale(k, src, table) if shift else 1.0 for k, src in sources.items()}
    return SweepAdvice(
        len(marginal), fit, tuple(predictions), best.k, baseline_tok_s, geometric, held,
        serving if step_fit is not None else None, sources, scales,
    )  # fmt: skip
