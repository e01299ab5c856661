"""The simulator's engine: one asyncio loop that batches requests into steps, like vLLM's scheduler.

Each step costs `Physics.step_cost(...)` seconds (divided by `speed`; a batch shares one weight read,
compute and KV are per request), then every running request gets that step's output as one chunk:
the first token after prefill, accepted + 1 tokens after a verify step. Counters move where vLLM
moves them (`SimMetrics`); the interval totals feed the `Engine 000:` / `SpecDecoding metrics:` lines.

With a batch-size schedule (vLLM's `num_speculative_tokens_per_batch_size`: inclusive
`(first_batch_size, last_batch_size, k)` ranges, sorted, not overlapping, from 1: `check_schedule`)
a step runs at the k of the last range starting at or below the running count, so a gap or a batch
past the last range keeps the k before it. At k = 0 no drafts, but the drafter's first forward pass
still costs its time (`Physics.step_cost`). The counters then mix steps of different k, as vLLM's do.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from mtpwatch.sim.corpus import TextSource, Token
from mtpwatch.sim.metrics import SimMetrics
from mtpwatch.sim.physics import Physics

KV_BLOCK = 16
"""Tokens per KV-cache block (vLLM's default `block_size`, as `vllm:cache_config_info` shows it)."""


def check_schedule(schedule: Sequence[tuple[int, int, int]], k: int) -> None:
    """vLLM's rules for a batch-size schedule; ValueError (one line) when one is broken."""
    ranges = sorted(schedule)
    ends = [0, *(hi for _, hi, _ in ranges)]
    if (
        any(kk < 0 or kk > k or lo > hi for lo, hi, kk in ranges)
        or any(lo <= end for (lo, _, _), end in zip(ranges, ends, strict=False))
        or (ranges and ranges[0][0] != 1)
    ):
        raise ValueError(
            "num_speculative_tokens_per_batch_size needs sorted [first, last, k] ranges from batch size 1, "
            f"first ≤ last, none overlapping, 0 ≤ k ≤ num_speculative_tokens ({k})"
        )


@dataclass(slots=True)
class Output:
    """What one engine step produced for one request (one SSE chunk)."""

    tokens: list[Token]
    finish_reason: str | None = None


@dataclass(eq=False)
class SimRequest:
    request_id: str
    prompt_tokens: int
    max_tokens: int
    source: TextSource
    rng: random.Random
    arrival: float = field(default_factory=time.monotonic)
    scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    generated: int = 0
    finish_reason: str | None = None
    outputs: asyncio.Queue[Output] = field(default_factory=asyncio.Queue)
    spec_draft_tokens: int = 0
    spec_histogram: list[int] = field(default_factory=list)
    """Index j = verify steps (with drafts) that accepted exactly j drafts."""

    def __post_init__(self) -> None:
        self._tokens = self.source.tokens()

    @property
    def context(self) -> int:
        """Tokens in the KV cache."""
        return self.prompt_tokens + self.generated

    def take(self, n: int) -> tuple[list[Token], str | None]:
        """Next up to ``n`` tokens and the finish reason if the request ends with them."""
        out: list[Token] = []
        for token in itertools.islice(self._tokens, n):
            out.append(token)
            self.generated += 1
            if token.natural_end:
                return out, "stop"
            if self.generated >= self.max_tokens:
                return out, "length"
        # fewer than n: the source ran dry (cannot happen unless it ended on a natural end)
        return out, "stop" if len(out) < n else None


@dataclass(slots=True)
class IntervalStats:
    """Totals since the last stats log line."""

    start: float = field(default_factory=time.monotonic)
    prompt_tokens: int = 0
    generation_tokens: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)


class Engine:
    """Batches requests into steps on the running event loop."""

    def __init__(
        self,
        physics: Physics,
        metrics: SimMetrics,
        *,
        speed: float = 1.0,
        max_num_seqs: int = 256,
        kv_cache_tokens: int = 500_000,
        mfu_metrics: bool = False,
        k_schedule: Sequence[tuple[int, int, int]] | None = None,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.physics = physics
        self.k_schedule = tuple(sorted(k_schedule or ()))
        check_schedule(self.k_schedule, physics.k)
        self._by_k: dict[int, Physics] = {physics.k: physics}
        self.metrics = metrics
        self.speed = speed
        self.max_num_seqs = max_num_seqs
        self.kv_cache_tokens = kv_cache_tokens
        self.mfu_metrics = mfu_metrics
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.interval = IntervalStats(per_pos=[0] * physics.k)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._deadline = 0.0

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mtpwatch-sim-engine")

    async def stop(self) -> None:
        """Stop the loop and abort every request."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for req in [*self.waiting, *self.running]:  # uncounted: the server is going away
            req.finish_reason = "abort"
            req.outputs.put_nowait(Output([], "abort"))
        self.waiting.clear()
        self.running.clear()

    def add(self, req: SimRequest) -> None:
        """Queue a request; it is prefilled in the next step with room."""
        self.waiting.append(req)
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        """The client went away: drop the request at the next step boundary."""
        if req.finish_reason is None:
            req.finish_reason = "abort"
            for queue in (self.waiting, self.running):
                if req in queue:
                    queue.remove(req)
                    self._count_finished(req, "abort", time.monotonic())

    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks in use."""
        blocks = sum(-(-r.context // KV_BLOCK) for r in self.running)
        return min(1.0, blocks * KV_BLOCK / self.kv_cache_tokens)

    def physics_for(self, batch: int) -> Physics:
        """The step physics at this many running requests (the schedule's k: module docstring)."""
        if not self.physics.spec or not self.k_schedule:
            return self.physics
        k = [kk for lo, _, kk in self.k_schedule if lo <= max(batch, 1)][-1]
        if k not in self._by_k:
            p = self.physics
            self._by_k[k] = Physics(
                p.preset, spec=k > 0, k=k or None, acceptance_scale=p.acceptance_scale, idle_drafter=k == 0
            )
        return self._by_k[k]

    # -- the step loop -----------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.waiting and not self.running:
                self.metrics.observe_scheduler(running=0, waiting=0, kv_usage=0.0)
                self._wake.clear()
                await self._wake.wait()
                self._deadline = loop.time()
            prefill: list[SimRequest] = []
            now = time.monotonic()
            while self.waiting and len(self.running) + len(prefill) < self.max_num_seqs:
                req = self.waiting.popleft()
                req.scheduled = now
                prefill.append(req)
            decode = list(self.running)
            self.running.extend(prefill)
            self.metrics.observe_scheduler(
                running=len(self.running), waiting=len(self.waiting), kv_usage=self.kv_usage
            )
            physics = self.physics_for(len(self.running))
            cost = physics.step_cost(
                prefill=[r.prompt_tokens for r in prefill], decode=[r.context for r in decode]
            )
            # deadline-based sleeping keeps the average step rate right despite timer jitter
            self._deadline = max(self._deadline, loop.time() - 0.05) + cost.seconds / self.speed
            await asyncio.sleep(max(0.0, self._deadline - loop.time()))
            self._apply(prefill, decode, cost.target_bytes + cost.kv_bytes + cost.drafter_bytes, physics)

    def _apply(
        self, prefill: list[SimRequest], decode: list[SimRequest], read_bytes: float, physics: Physics
    ) -> None:
        now = time.monotonic()
        prompt_tokens = generation_tokens = 0
        ttfts: list[float] = []
        itls: list[float] = []
        for req in prefill:
            if req.finish_reason is not None:  # aborted while its prefill ran
                continue
            tokens, reason = req.take(1)
            prompt_tokens += req.prompt_tokens
            generation_tokens += len(tokens)
            req.first_token = req.last_token = now
            ttfts.append(now - req.arrival)
            self._emit(req, tokens, reason, now)
        for req in decode:
            if req.finish_reason is not None:
                continue
            want = 1
            if physics.spec:
                accepted = physics.sample_accepted(req.rng, req.generated, req.source.acceptance_factor)
                # Counted before `take` stops at the answer's end, as vLLM 0.34 counts them before
                # its stop check trims (vllm/v1/core/sched/scheduler.py:2400, 2892–2898): drafts
                # accepted past the end are counted too (vllm#56101), on the page and per request.
                self.metrics.observe_draft(physics.k, accepted)
                iv = self.interval
                iv.drafts += 1
                iv.draft_tokens += physics.k
                iv.accepted += accepted
                for i in range(accepted):
                    iv.per_pos[i] += 1
                req.spec_draft_tokens += physics.k
                if not req.spec_histogram:
                    req.spec_histogram = [0] * (self.physics.k + 1)
                req.spec_histogram[accepted] += 1
                want = accepted + 1
            tokens, reason = req.take(want)
            generation_tokens += len(tokens)
            if req.last_token is not None:
                itls.append(now - req.last_token)
            req.last_token = now
            self._emit(req, tokens, reason, now)
        self.interval.prompt_tokens += prompt_tokens
        self.interval.generation_tokens += generation_tokens
        if prompt_tokens or generation_tokens:
            self.metrics.observe_step(
                prompt_tokens=prompt_tokens,
                generation_tokens=generation_tokens,
                itls=itls,
                ttfts=ttfts,
                read_bytes=read_bytes if self.mfu_metrics else None,
            )
        self.metrics.observe_scheduler(
            running=len(self.running), waiting=len(self.waiting), kv_usage=self.kv_usage
        )

    def _emit(self, req: SimRequest, tokens: list[Token], reason: str | None, now: float) -> None:
        if reason is not None:
            req.finish_reason = reason
            self.running.remove(req)
            self._count_finished(req, reason, now)
        req.outputs.put_nowait(Output(tokens, reason))

    def _count_finished(self, req: SimRequest, reason: str, now: float) -> None:
        scheduled, first, last = (
            now if t is None else t for t in (req.scheduled, req.first_token, req.last_token)
        )
        self.metrics.observe_finished(
            reason=reason,
            prompt_tokens=req.prompt_tokens,
            generation_tokens=req.generated,
            max_tokens=req.max_tokens,
            e2e=now - req.arrival,
            queue=scheduled - req.arrival,
            prefill=first - scheduled,
            decode=last - first,
            inference=last - scheduled,
        )

    def take_interval(self) -> IntervalStats:
        """Totals since the previous call (for the periodic log lines)."""
        stats = self.interval
        self.interval = IntervalStats(per_pos=[0] * self.physics.k)
        return stats
