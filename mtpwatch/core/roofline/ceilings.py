"""The memory-bandwidth roofline of a (speculative) decode: ceilings, efficiency and the binding term.

`compute_roofline` combines the analytic bytes per step (`core.roofline.bytemodel`), a peak
bandwidth (`core.roofline.gpus` or NVML) and, when a server is watched, plain floats from the
metrics core (`Rates.steps_per_s`, `Rates.mean_acceptance_length`, `Rates.server_tok_s`). Nothing
here reads hardware counters: every figure is analytic.

Definitions (bytes_0 = bytes of a plain step, k = 0; bytes_k = bytes of a speculative step with
k drafts; τ = mean acceptance length = 1 + α·k tokens per verify step; BW = peak GB/s):

* ceiling_tok_s_baseline = batch · BW / bytes_0
* ceiling_tok_s_spec     = τ · batch · BW / bytes_k
* effective GB/s         = steps/s × bytes_k (what the step model says was read), % of peak
* break-even τ           = bytes_k / bytes_0 (speculation beats plain decoding at equal efficiency
  only above it)

The rule of thumb "speed-up ≈ min(1 + α·k, bandwidth ratio, compute efficiency)" is implemented
with each term made precise as an upper bound on S = tok/s(spec) / tok/s(plain):

* acceptance term  A  = τ = 1 + α·k: the speed-up if a speculative step cost a plain step's.
* bandwidth term   B  = ceiling_tok_s_spec / ceiling_tok_s_baseline = τ · bytes_0 / bytes_k: the
  speed-up the memory roof allows when both runs reach the same fraction of it. bytes_k counts the
  k drafter passes, the drafter's KV reads and, for MoE targets, the union of experts the k+1
  verified tokens touch (bandwidth.md §6). The *naive* form prices the verify step like a plain
  step (dense weights once, drafter free), so B_naive = τ = A: it can never bind, which is why the
  naive rule misses drafter cost and the MoE union.
* compute term     C  = τ · (peak FLOP/s / FLOPs_k) / (BW / bytes_0): the speed-up the arithmetic
  roof allows, FLOPs_k = 2 · active params per token · batch·(k+1) + attention + the drafter
  passes. None when the GPU's FLOP rate is unknown. At batch 1 it is 20-200× above A and B.

The corrected bound is min(A, B, C); the naive bound min(A, B_naive, C_naive). The binding term is
the argmin; B within 2 % of A counts as acceptance-bound (the drafter is then effectively free).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mtpwatch.core.roofline.bytemodel import StepBytes, active_params, bytes_per_step, tokens_seen
from mtpwatch.core.roofline.modelconfig import GB, ModelSpec

Binding = Literal["acceptance", "bandwidth", "compute"]

BANDWIDTH_BOUND_PCT = 60.0
"""Effective bandwidth at or above this % of peak reads as "bandwidth-bound". Practical decode
reaches ~93 % on H200 (GEMV) and ~66-70 % on GB10; below 60 % per-step overhead dominates."""

_ACCEPTANCE_TOLERANCE = 0.98


@dataclass(frozen=True, slots=True)
class Roofline:
    """Analytic bandwidth ceilings for one model/drafter/GPU/k, and today's figures against them."""

    model: str
    drafter_model: str | None
    gpu: str
    peak_gbps: float
    k: int
    context: int
    batch: int
    mean_acceptance_length: float
    """τ used for the speculative ceiling (given, measured, or k+1 when unknown)."""
    acceptance_source: str
    """'given', 'measured' or 'assumed: every draft accepted (upper bound)'."""
    step: StepBytes  # one speculative step (k drafts)
    baseline_step: StepBytes  # one plain step (k = 0)
    ceiling_tok_s_baseline: float
    ceiling_tok_s_spec: float
    ceiling_steps_per_s: float
    break_even_acceptance_length: float
    acceptance_term: float
    bandwidth_term: float
    bandwidth_term_naive: float
    compute_term: float | None
    compute_term_naive: float | None
    speedup_bound: float
    speedup_bound_naive: float
    binding: Binding
    steps_per_s: float | None = None
    tok_s: float | None = None
    effective_gbps: float | None = None
    pct_of_peak: float | None = None
    pct_of_ceiling: float | None = None
    peak_tflops: float | None = None

    @property
    def regime(self) -> str:
        """Where today's figures sit: `summary`'s head without its numbers ('' with none: idle)."""
        if self.pct_of_peak is None:
            return ""
        bound = self.pct_of_peak >= BANDWIDTH_BOUND_PCT
        return "bandwidth-bound" if bound else "overhead-bound (below the roof)"

    @property
    def summary(self) -> str:
        """One sentence in words, e.g. 'bandwidth-bound at 84 % of GB10's peak (229 of 273 GB/s)':
        the measured state first when there is one, else the binding term."""
        gpu, k, tau, bound = self.gpu, self.k, self.mean_acceptance_length, self.speedup_bound
        step, base, binding = self.step, self.baseline_step, self.binding
        if self.effective_gbps is not None and self.pct_of_peak is not None:
            where = (
                f"{self.pct_of_peak:.0f} % of {gpu}'s peak ({self.effective_gbps:.0f} of "
                f"{self.peak_gbps:.0f} GB/s, analytic)"
            )
            if self.pct_of_peak >= BANDWIDTH_BOUND_PCT:
                head = f"bandwidth-bound at {where}"
            else:
                head = f"below the roof at {where}: per-step overhead, not bandwidth, limits it"
            return head if k == 0 else f"{head}; speed-up bound {bound:.2f}× ({binding} term)"
        if k == 0:
            return f"plain decoding reads {base.total / GB:.2f} GB per token step on {gpu}"
        ratio = step.total / base.total
        if binding == "acceptance":
            return (
                f"acceptance-bound: τ = {tau:.2f} tokens per step; drafting adds only "
                f"{100 * (ratio - 1):.1f} % bytes per step"
            )
        if binding == "bandwidth":
            return (
                f"bandwidth-bound: a k={k} step reads {ratio:.2f}× the bytes of a plain step "
                f"(drafter {step.drafter / GB:.2f} GB), so the bound is {bound:.2f}×, not τ = {tau:.2f}×"
            )
        return (
            f"compute-bound: {step.tokens_per_pass} tokens per pass exceed {gpu}'s arithmetic roof "
            f"({bound:.2f}×)"
        )

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able dict; byte figures in bytes, rates per second, every figure analytic."""

        def fields(names: str) -> dict[str, Any]:
            return {name: getattr(self, name) for name in names.split()}

        step, base = self.step, self.baseline_step
        return {
            "source": "analytic",
            **fields("model drafter_model gpu peak_gbps peak_tflops k context batch mean_acceptance_length"),
            "acceptance_source": self.acceptance_source,
            "bytes_per_step": step.target,
            "drafter_bytes_per_step": step.drafter,
            "kv_bytes_per_step": step.kv,
            "total_bytes_per_step": step.total,
            "baseline_bytes_per_step": base.total,
            "step": step.to_json(),
            "baseline_step": base.to_json(),
            **fields(
                "ceiling_tok_s_baseline ceiling_tok_s_spec ceiling_steps_per_s break_even_acceptance_length"
            ),
            "terms": {
                "acceptance": self.acceptance_term,
                "bandwidth": self.bandwidth_term,
                "bandwidth_naive": self.bandwidth_term_naive,
                "compute": self.compute_term,
                "compute_naive": self.compute_term_naive,
            },
            **fields("speedup_bound speedup_bound_naive binding summary steps_per_s tok_s effective_gbps"),
            **fields("pct_of_peak pct_of_ceiling"),
        }


def step_flops(
    spec: ModelSpec, k: int, context: int, batch: int, drafter: ModelSpec | None = None, draft_passes: int = 0
) -> float:
    """FLOPs of one step: 2 per active parameter per token, plus attention over the context, plus the
    drafter's `draft_passes` (`StepBytes.draft_passes`)."""
    n = batch * (k + 1)
    flops = 2.0 * active_params(spec, 1) * n
    for lt in spec.layer_types:
        hd = spec.global_head_dim if lt == "full" else spec.head_dim
        flops += 4.0 * tokens_seen(spec, lt, context) * spec.num_heads * hd * n  # QK^T and PV
    if drafter is not None:
        flops += draft_passes * 2.0 * active_params(drafter, 1) * batch
    return flops


def compute_roofline(
    spec: ModelSpec,
    *,
    peak_gbps: float,
    gpu: str,
    k: int = 0,
    drafter: ModelSpec | None = None,
    context: int = 0,
    batch: int = 1,
    mean_acceptance_length: float | None = None,
    acceptance_rate: float | None = None,
    steps_per_s: float | None = None,
    tok_s: float | None = None,
    peak_tflops: float | None = None,
    draft_passes: int | None = None,
) -> Roofline:
    """Ceilings, speed-up terms and (when rates are given) today's efficiency; ValueError: a negative
    or impossible input. `drafter`: None for ngram or drafting off; `peak_gbps`: peak DRAM GB/s, `gpu`
    its display name; k = 0: plain decoding. τ is `mean_acceptance_length` (e.g.
    `Rates.mean_acceptance_length`), else 1 + α·k from `acceptance_rate` α, else k + 1, labelled an
    upper bound (`_tau`). `steps_per_s`: verify steps per second (`Rates.steps_per_s`; None with
    `tok_s` given: tok_s / (τ · batch)); `tok_s`: generated tokens per second (`Rates.server_tok_s`);
    `peak_tflops`: the GPU's dense tensor FLOP/s in the weights' compute dtype (compute term)."""
    step = bytes_per_step(spec, k, context, drafter, batch, draft_passes)  # which checks k, context, batch
    if peak_gbps <= 0:
        raise ValueError("peak bandwidth must be > 0 GB/s")
    tau, tau_source = _tau(k, mean_acceptance_length, acceptance_rate)
    base = bytes_per_step(spec, 0, context, None, batch)
    ceiling_base = batch * peak_gbps * GB / base.total
    ceiling_steps = peak_gbps * GB / step.total
    ceiling_spec = tau * batch * ceiling_steps  # τ tokens per verify step
    bandwidth_term = ceiling_spec / ceiling_base  # the naive rule prices a verify step like a plain one: τ
    compute_term: float | None = None
    compute_naive: float | None = None
    if peak_tflops:  # C (module docstring), with the drafter's FLOPs and without them (naive)
        scale = tau * peak_tflops * 1e12 * batch / ceiling_base  # each term is scale / the step's FLOPs
        compute_term = scale / step_flops(spec, k, context, batch, drafter, step.draft_passes)
        compute_naive = scale / step_flops(spec, k, context, batch)
    binding, bound, bound_naive = _binding(tau, bandwidth_term, compute_term, compute_naive)
    steps_per_s = tok_s / (tau * batch) if steps_per_s is None and tok_s is not None else steps_per_s
    effective = None if steps_per_s is None else steps_per_s * step.total / GB
    pct_peak = None if effective is None else 100.0 * effective / peak_gbps
    pct_ceiling = None if tok_s is None else 100.0 * tok_s / (ceiling_spec if k else ceiling_base)
    return Roofline(
        model=spec.name,
        drafter_model=drafter.name if drafter else None,
        gpu=gpu,
        peak_gbps=peak_gbps,
        k=k,
        context=context,
        batch=batch,
        mean_acceptance_length=tau,
        acceptance_source=tau_source,
        step=step,
        baseline_step=base,
        ceiling_tok_s_baseline=ceiling_base,
        ceiling_tok_s_spec=ceiling_spec,
        ceiling_steps_per_s=ceiling_steps,
        break_even_acceptance_length=step.total / base.total,
        acceptance_term=tau,
        bandwidth_term=bandwidth_term,
        bandwidth_term_naive=tau,
        compute_term=compute_term,
        compute_term_naive=compute_naive,
        speedup_bound=bound,
        speedup_bound_naive=bound_naive,
        binding=binding,
        steps_per_s=steps_per_s,
        tok_s=tok_s,
        effective_gbps=effective,
        pct_of_peak=pct_peak,
        pct_of_ceiling=pct_ceiling,
        peak_tflops=peak_tflops,
    )


def _tau(k: int, mean_acceptance_length: float | None, acceptance_rate: float | None) -> tuple[float, str]:
    if acceptance_rate is not None and not 0.0 <= acceptance_rate <= 1.0:
        raise ValueError("acceptance rate must be within 0..1")
    if mean_acceptance_length is not None and not 1.0 <= mean_acceptance_length <= k + 1 + 1e-9:
        raise ValueError(f"mean acceptance length must be within 1..k+1 = {k + 1}")
    if k == 0:
        return 1.0, "baseline (k = 0)"
    if mean_acceptance_length is not None:
        return mean_acceptance_length, "given"
    if acceptance_rate is not None:
        return 1.0 + acceptance_rate * k, "given"
    return float(k + 1), "assumed: every draft accepted (upper bound)"


def _binding(
    acceptance_term: float, bandwidth_term: float, compute_term: float | None, compute_naive: float | None
) -> tuple[Binding, float, float]:
    """The binding term (the module's argmin), the bound min(A, B, C) and the naive min(A, C_naive)."""
    terms: dict[Binding, float] = {"acceptance": acceptance_term, "bandwidth": bandwidth_term}
    if compute_term is not None:
        terms["compute"] = compute_term
    binding: Binding = min(terms, key=lambda t: terms[t])
    if binding == "bandwidth" and bandwidth_term >= _ACCEPTANCE_TOLERANCE * acceptance_term:
        binding = "acceptance"
    naive_terms = [acceptance_term] + ([compute_naive] if compute_naive is not None else [])
    return binding, min(terms.values()), min(naive_terms)
