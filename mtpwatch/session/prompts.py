"""The console prompt's window on one server: when it opened and closed, its stream, its own numbers.

A prompt's window opens at the scrape before it (`begin`), its generation ends at its last token
(`end`), and it closes at the scrape after that (`close`): the 'prompt' window of the panel and the
summary line are counted between those scrapes. `core.metrics.attribution.prompt_acceptance`
decides which acceptance the prompt gets.
"""

from __future__ import annotations

from collections.abc import Callable

from mtpwatch.core.http.engines import LlamaTimings
from mtpwatch.core.http.generation import GenerationResult, GenerationStats, RequestSpecMetrics
from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.metrics.attribution import PER_REQUEST_SCOPE, PromptAcceptance, prompt_acceptance
from mtpwatch.core.metrics.rates import Collector, Rates
from mtpwatch.session.views import Answer, PromptSummary


class PromptWindow:
    """The last console prompt on one server (one at a time)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.t0: float | None = None  # `begin`, `end`, `close`: see the module
        self.t1: float | None = None
        self.t_end: float | None = None
        self.stats: GenerationStats | None = None
        """The running prompt's stream (None once its generation call returned)."""
        self._cancellable: GenerationStats | None = None
        self.client_points: list[tuple[float, float]] = []
        """(time, client decode tok/s) of the running prompt, one point per second."""
        self.request_tokens: int | None = None
        """Prompt + generated tokens of the last console prompt (KV context when the engine says 0)."""
        self.request_spec: RequestSpecMetrics | None = None
        """vLLM's per-request spec-decode metrics of the last console prompt, when the server sent them."""
        self.request_timings: LlamaTimings | None = None
        """llama-server's timings of the last finished console prompt (its draft counts)."""

    def begin(self) -> GenerationStats:
        """A prompt starts now: its window opens; its stream goes into the returned stats."""
        stats = GenerationStats(clock=self.clock)
        self.stats = self._cancellable = stats
        self.client_points = []
        self.t0 = self.clock()
        self.t1 = self.t_end = None
        self.request_spec = self.request_timings = None
        stats.start(self.t0)
        return stats

    def end(self, t1: float) -> None:
        """The prompt's generation call returned (or was cancelled) at `t1`."""
        self.t1 = t1
        self.stats = None

    def close(self, result: GenerationResult, t_end: float) -> None:
        """The prompt's window closes at `t_end`; keep what `result` says about this request alone."""
        self.t_end = t_end
        if result.completion_tokens:
            self.request_tokens = (result.prompt_tokens or 0) + result.completion_tokens
        self.request_spec = result.spec_metrics
        self.request_timings = result.timings

    def cancelled_result(self) -> GenerationResult:
        """The result of a generation the user cancelled (what arrived so far)."""
        stats = self._cancellable or GenerationStats(clock=self.clock)
        self._cancellable = None
        return stats.finish(cancelled=True)

    def sample_client(self, now: float) -> None:
        """One point per second of the running prompt's client decode tok/s."""
        stats = self.stats
        if stats is None or stats.t_first is None or stats.t_last is None:
            return
        if self.client_points and now - self.client_points[-1][0] < 1.0:
            return
        span = stats.t_last - stats.t_first
        if span > 0 and stats.completion_tokens >= 2:
            self.client_points.append((now, (stats.completion_tokens - 1) / span))

    def rates(self, collector: Collector, now: float) -> Rates | None:
        """Counter rates over the prompt's window (None before the first prompt): a running one's
        ends at the newest scrape, a finished one's at `t_end` (later idle time would dilute it)."""
        if self.t0 is None:
            return None
        return collector.since(self.t0, now, until=self.t_end)

    def acceptance(self, collector: Collector, counters: Rates | None) -> PromptAcceptance:
        """The prompt's acceptance by `core.metrics.attribution`'s rule over its numbers: vLLM's
        per-request metrics once its final chunk came, llama-server's timings (the latest chunk's
        while it streams), the window's `counters` (this request or engine-wide)."""
        return prompt_acceptance(
            counters=counters,
            scope=collector.attribution(self.t0, self.t1) if self.t0 is not None else "engine-wide",
            per_request=self.request_spec if self.t_end is not None else None,
            timings=self.stats.timings if self.stats is not None else self.request_timings,
        )

    def answer(self, result: GenerationResult, acc: PromptAcceptance) -> Answer:
        """The answer of `result`, its summary line with the prompt's acceptance `acc`."""
        client = (
            F.client_tokens_per_step(result.completion_tokens, result.chunks) if result.tokens_exact else None
        )
        alone = acc.scope in ("this request", PER_REQUEST_SCOPE)  # vLLM's counts of this request only
        summary = PromptSummary(
            client_tokens_per_step=client,
            eos_overcount=F.eos_overcount(acc.mean_acceptance_length, client) if alone else None,
            tokens=result.completion_tokens,
            ttft_s=result.ttft_s,
            decode_tok_s=result.decode_tok_s,
            acceptance_rate=acc.acceptance_rate,
            mean_acceptance_length=acc.mean_acceptance_length,
            scope=acc.scope,
            approximate=not result.tokens_exact,
            cancelled=result.cancelled,
            error=result.error,
        )
        return Answer(summary=summary, text=result.text, token_ids=result.token_ids)
