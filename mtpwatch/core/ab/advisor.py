"""The k advisor: from one run at k, predict tokens per step and decode tok/s for every k' ≤ k.

Inputs, all measured:

- the marginal per-position acceptance a_1 … a_k at the running k (vLLM's
  ``num_accepted_tokens_per_pos[i] / num_drafts``: the share of steps whose first i drafts were
  all accepted);
- the step time at k, t_k (seconds per engine step), and the baseline's step time t_0 (seconds
  per token without speculation). In the app t_k is the ITL histogram's mean (vLLM counts one
  ITL per engine step); in a sweep t_k = mean acceptance length / decode tok/s, which is the same
  quantity from the client's clock.

Model:

- tokens per step at k' (vLLM's mean acceptance length, `formulas`):  τ(k') = 1 + Σ_{i ≤ k'} a_i.
  Truncating the chain at k' keeps the first k' positions' acceptance: position i is accepted only
  when every earlier one is, whatever comes after it.
- step time at k': t(k') = t_0 + k' · c, with c = (t_k − t_0) / k, the measured cost of one more
  draft position (one drafter pass plus one more token for the target to verify), assumed the
  same for every position. This is exact for a dense target whose drafter runs once per
  position (MTP, EAGLE, draft models); a MoE target's verify pass grows less than linearly (its
  experts overlap), so the model under-predicts step time between 0 and k slightly; ngram drafts
  cost ~nothing, so c is the verify cost alone.
- decode tok/s at k' = τ(k') / t(k'); the advisor names the k' with the highest one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["STEP_MODEL", "Advice", "KPrediction", "advise", "step_time_from_rate"]

STEP_MODEL = (
    "t(k') = t0 + k'·(tk − t0)/k: each draft position costs the same, measured from the step time at k "
    "against the baseline's; tokens per step τ(k') = 1 + Σ_{i≤k'} marginal_i"
)


@dataclass(frozen=True, slots=True)
class KPrediction:
    """What the advisor expects at one k'."""

    k: int
    tokens_per_step: float
    step_s: float
    decode_tok_s: float
    speedup: float
    """Over the baseline (k = 0)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "tokens_per_step": round(self.tokens_per_step, 4),
            "step_ms": round(self.step_s * 1000, 4),
            "decode_tok_s": round(self.decode_tok_s, 3),
            "speedup": round(self.speedup, 4),
        }


@dataclass(frozen=True, slots=True)
class Advice:
    """Predictions for k' = 0 … k and the k the advisor would choose."""

    from_k: int
    per_position_cost_s: float
    predictions: tuple[KPrediction, ...]
    best_k: int

    def at(self, k: int) -> KPrediction | None:
        return next((p for p in self.predictions if p.k == k), None)

    def line(self) -> str:
        """One line for a terminal: the choice and the predicted speed for each k'."""
        parts = " ".join(f"k={p.k}:{p.decode_tok_s:.1f}" for p in self.predictions)
        best = self.at(self.best_k)
        gain = f" ({best.speedup:.2f}× baseline)" if best else ""
        return f"k advisor (from k={self.from_k}): best k={self.best_k}{gain} · predicted tok/s {parts}"

    def to_json(self) -> dict[str, Any]:
        return {
            "from_k": self.from_k,
            "per_position_cost_ms": round(self.per_position_cost_s * 1000, 4),
            "step_model": STEP_MODEL,
            "best_k": self.best_k,
            "predictions": [p.to_json() for p in self.predictions],
        }


def step_time_from_rate(decode_tok_s: float, mean_acceptance_length: float = 1.0) -> float:
    """Seconds per engine step from a decode rate and the tokens each step yields."""
    if decode_tok_s <= 0:
        raise ValueError("decode tok/s must be positive")
    return mean_acceptance_length / decode_tok_s


def advise(
    marginal: Sequence[float],
    step_s: float,
    baseline_step_s: float,
    ks: Sequence[int] | None = None,
) -> Advice:
    """Predict every k' in `ks` (default 0 … k) from a run at k = len(marginal).

    Args:
        marginal: per-position marginal acceptance at the running k, position 1 first.
        step_s: measured seconds per engine step at k.
        baseline_step_s: measured seconds per token (= per step) without speculation.
        ks: the k' to predict, each ≤ k.

    Raises:
        ValueError: no positions, a non-positive step time, or a k' above k.
    """
    k = len(marginal)
    if k < 1:
        raise ValueError("the running k must be at least 1 (per-position acceptance needed)")
    if step_s <= 0 or baseline_step_s <= 0:
        raise ValueError("step times must be positive")
    wanted = list(range(k + 1)) if ks is None else sorted(set(ks))
    if any(kk < 0 or kk > k for kk in wanted):
        raise ValueError(f"can only predict k' between 0 and the running k={k}")
    cost = (step_s - baseline_step_s) / k
    predictions = []
    for kk in wanted:
        tau = 1.0 + sum(marginal[:kk])
        t = baseline_step_s + kk * cost
        rate = tau / t if t > 0 else 0.0
        predictions.append(KPrediction(kk, tau, t, rate, rate * baseline_step_s))
    best = max(predictions, key=lambda p: p.decode_tok_s)
    return Advice(from_k=k, per_position_cost_s=cost, predictions=tuple(predictions), best_k=best.k)
