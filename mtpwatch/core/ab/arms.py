"""What an arm is: one side of the A/B comparison, as the runner sees it.

Arm A is the baseline (MTP off), arm B the treatment (MTP on); every speed-up is B / A.
An arm generates (`ArmRequest` → `ArmResult`, measured on the client) and can be scraped (a
`MetricsSnapshot`, differenced by the runner with `core.metrics.rates.delta_rates`); a `ManagedArm`
can also start and stop its server (the restart schedule).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from mtpwatch.core.metrics.snapshot import MetricsSnapshot

ArmName = Literal["a", "b"]

ARM_ROLES: dict[str, str] = {"a": "baseline (MTP off)", "b": "treatment (MTP on)"}


@dataclass(frozen=True, slots=True)
class ArmRequest:
    """One generation request, independent of the HTTP client."""

    prompt: str
    max_tokens: int
    temperature: float = 0.0
    min_tokens: int | None = None
    """Force at least this many tokens (vLLM's `min_tokens`), for the break-even sweep."""
    ignore_eos: bool = False
    """vLLM's `ignore_eos`: keep generating past end-of-sequence so the length is what was asked."""


@dataclass(frozen=True, slots=True)
class ArmResult:
    """What one generation produced, measured on the client (the latencies: `core.ab.latency`)."""

    tokens: int
    ttft_s: float | None
    decode_tok_s: float | None
    """(tokens − 1) / (t_last − t_first); None with fewer than two tokens."""
    text: str = ""
    token_ids: tuple[int, ...] | None = None
    """Output token ids when the server returned them (vLLM's `return_token_ids`)."""
    error: str | None = None
    e2el_s: float | None = None
    itl_s: tuple[float, ...] = ()


@runtime_checkable
class Arm(Protocol):
    """One side of the comparison: something that generates and can be scraped."""

    label: str

    async def generate(self, request: ArmRequest) -> ArmResult:
        """Failures come back as `ArmResult.error`, not exceptions."""

    async def counters(self) -> MetricsSnapshot | None:
        """One scrape; None when the server has no spec-decode counters."""


@runtime_checkable
class ManagedArm(Arm, Protocol):
    """An arm whose server the bench starts and stops (the restart schedule)."""

    async def start(self) -> None:
        """Start the server and wait until it answers."""

    async def stop(self) -> None:
        """Stop the server and free its memory."""
