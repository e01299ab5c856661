"""Which acceptance a prompt gets: the one precedence rule, used by the panel and the summary line.

`prompt_acceptance` takes the first of three sources that applies:
1. **vLLM's per-request metrics** (`metrics.speculative_decoding` on the final chunk, with
   `--per-request-spec-decode-metrics`; `core.http.generation.RequestSpecMetrics`): counted by the
   engine for exactly this request, whatever else it was doing, with the step count and the
   per-position histogram, so every number comes from them and no attribution is guessed.
2. **llama-server's timings** (`timings.draft_n_accepted / draft_n`, on the final chunk and, with
   `timings_per_token`, on every chunk; `core.http.engines.LlamaTimings`): this request's own draft
   and accepted token counts, so the acceptance rate; the mean acceptance length, the per-position
   rates and the draft count come from the prompt window's counters only when that window is "this
   request" (nothing else ran), else they are unknown.
3. **The counter deltas over the prompt's window** (`rates.Collector.since`), scoped by
   `rates.attribute` ("this request" or "engine-wide").
Outside a prompt (a 10 s or 60 s window) only the third applies, "engine-wide". The verdict sentence
reads the same `PromptAcceptance` as the numbers it sits beside.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, Protocol

from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.metrics.rates import Rates, Scope

PER_REQUEST_SCOPE = "this request (vLLM per-request metrics)"
"""Scope of acceptance numbers taken from the response's `metrics.speculative_decoding`."""
LLAMACPP_REQUEST_SCOPE = "this request (llama.cpp timings)"
"""Scope of the acceptance rate from llama-server's `timings.draft_n_accepted / draft_n`."""

AcceptanceSource = Literal["vllm per-request", "llama.cpp timings", "counters", "none"]


class PerRequestSpec(Protocol):
    """vLLM's per-request spec-decode numbers (`core.http.generation.RequestSpecMetrics`)."""

    @property
    def num_spec_steps(self) -> int: ...
    @property
    def acceptance_rate(self) -> float | None: ...
    @property
    def mean_acceptance_length(self) -> float | None: ...
    @property
    def per_position(self) -> tuple[float, ...]: ...


class DraftTimings(Protocol):
    """llama-server's `timings` of this request (`core.http.engines.LlamaTimings`)."""

    @property
    def acceptance_rate(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class PromptAcceptance:
    """The acceptance numbers shown for a prompt (or a window), all from `source`."""

    source: AcceptanceSource
    scope: str
    """What the numbers cover: `PER_REQUEST_SCOPE`, `LLAMACPP_REQUEST_SCOPE`, "this request" or
    "engine-wide" (counters)."""
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position: tuple[float, ...] = ()
    per_position_conditional: tuple[float | None, ...] = ()
    drafts: float | None = None
    """Verify steps with drafts the numbers rest on (None when the source does not say)."""


def prompt_acceptance(
    *,
    counters: Rates | None,
    scope: Scope,
    per_request: PerRequestSpec | None = None,
    timings: DraftTimings | None = None,
) -> PromptAcceptance:
    """The acceptance that applies, in the order of the module docstring (pure). `counters`: the
    window's counter rates (the prompt's, or a time window's; None when unknown), `scope`
    `rates.attribute`'s verdict for it ("engine-wide" for a time window); `per_request`, `timings`:
    the prompt's, from its stream."""
    if per_request is not None:
        positions = tuple(per_request.per_position)
        return PromptAcceptance(
            source="vllm per-request",
            scope=PER_REQUEST_SCOPE,
            acceptance_rate=per_request.acceptance_rate,
            mean_acceptance_length=per_request.mean_acceptance_length,
            per_position=positions,
            # the panel's bars take 0 for "no step reached the position before" here
            per_position_conditional=tuple(
                0.0 if c is None else c for c in F.conditional_from_marginal(positions)
            ),
            drafts=float(per_request.num_spec_steps),
        )
    from_counters = PromptAcceptance(source="none", scope=scope)
    if counters is not None:
        from_counters = PromptAcceptance(
            source="counters",
            scope=scope,
            acceptance_rate=counters.acceptance_rate,
            mean_acceptance_length=counters.mean_acceptance_length,
            per_position=counters.per_position,
            per_position_conditional=counters.per_position_conditional,
            drafts=counters.drafts,
        )
    if timings is not None and timings.acceptance_rate is not None:
        # the rate from the timings; the rest from the counters only when the window was this request
        kept = from_counters if scope == "this request" else PromptAcceptance(source="none", scope=scope)
        return replace(
            kept,
            source="llama.cpp timings",
            scope=LLAMACPP_REQUEST_SCOPE,
            acceptance_rate=timings.acceptance_rate,
        )
    return from_counters
