"""Counter deltas → rates: vLLM's own formulas over sliding windows, restart handling, attribution.

`delta_rates` turns two snapshots into a `Rates` (never negative: a counter that went down or a changed
`_created` means the server restarted, and the delta then counts from the restart). `Collector` owns
the scrape history (timestamps are injected by the caller, from a monotonic clock; nothing here reads a
clock), answers windows (1 s, 10 s, 60 s, "since this prompt started"), keeps a tok/s series for
charts, counts restarts, and says whether a prompt's deltas are "this request" or "engine-wide".
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.metrics.snapshot import COUNTER_FIELDS, HISTOGRAM_FIELDS, Histogram, MetricsSnapshot

Scope = Literal["this request", "engine-wide"]


@dataclass(frozen=True, slots=True)
class Rates:
    """Deltas between two snapshots and the numbers vLLM's formulas derive from them. The counts
    (`drafts` … `prompt_tokens`, `itl_count`) are deltas over the window, named as the `MetricsSnapshot`
    counters they come from; a ratio named as a `formulas` function is that function of them, None
    when its denominator is zero (nothing happened)."""

    window_label: str
    """What the window is: "1 s", "10 s", "60 s", "prompt", "between pages", "since server start"."""
    dt_s: float | None
    """Seconds between the two snapshots (None when unknown, e.g. two saved pages)."""
    restarted: bool = False
    """The server restarted inside the window; the deltas count from the restart."""
    drafts: float = 0.0
    """Verify steps with drafts (one per request per step)."""
    draft_tokens: float = 0.0
    accepted: float = 0.0
    accepted_per_pos: tuple[float, ...] = ()
    generation_tokens: float = 0.0
    prompt_tokens: float = 0.0
    num_speculative_tokens: int = 0
    """k (number of `position` labels) of the later snapshot."""
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    per_position: tuple[float, ...] = ()
    """Marginal (`formulas.per_position_marginal`)."""
    per_position_conditional: tuple[float | None, ...] = ()
    self_check_residual: float | None = None
    output_from_drafts: float | None = None
    """Share of emitted tokens that were accepted drafts: Δaccepted / Δgeneration_tokens."""
    server_tok_s: float | None = None
    """Δgeneration_tokens / Δt (all requests on the engine)."""
    steps_per_s: float | None = None
    """Engine steps per second, from the counter that counts them at the window's batch size."""
    mean_step_s: float | None = None
    """Mean time between a request's outputs (engine step): ITL Δsum / Δcount."""
    tokens_per_step: float | None = None
    """Δgeneration_tokens / Δ ITL count: tokens per output chunk (slightly high: first tokens count)."""
    mean_ttft_s: float | None = None
    """Mean time to first token of requests that got one in the window."""
    mean_tpot_s: float | None = None
    """Mean per-token time of requests that finished in the window."""
    itl_count: float = 0.0
    """Δ ITL observations (outputs after the first, per request)."""
    drafted_share: float | None = None
    max_running: float | None = None
    """Most requests running at any scrape in the window (None when unknown)."""


def is_restart(before: MetricsSnapshot, after: MetricsSnapshot) -> bool:
    """True when `after` cannot continue `before`: a counter went down, `_created` or the model changed."""
    if before.schema != after.schema or before.model != after.model:
        return True  # another server (or stats switched off/on) behind the same URL: no common baseline
    if before.created is not None and after.created is not None and before.created != after.created:
        return True
    prev = before.counters()
    return any(value < prev[key] for key, value in after.counters().items() if key in prev)


def _pos(x: float) -> float:
    # Float sums over engines can leave -0.0 or -1e-12 where nothing changed.
    return x if x > 0 else 0.0


def _hist_delta(before: Histogram | None, after: Histogram | None) -> tuple[float, float]:
    """(Δsum, Δcount), the order `formulas.histogram_mean` takes them in."""
    if after is None:
        return 0.0, 0.0
    if before is None:
        return after.sum, after.count
    return _pos(after.sum - before.sum), _pos(after.count - before.count)


def _max_opt(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def delta_rates(
    before: MetricsSnapshot,
    after: MetricsSnapshot,
    dt_s: float | None,
    label: str,
    *,
    max_running: float | None = None,
) -> Rates:
    """Rates from `before` to `after` over `dt_s` seconds (None: counts only, no per-second rates);
    after a restart (`is_restart`) the deltas are `after`'s totals. `max_running`: the most requests
    running at any scrape in between, by default the larger of the two snapshots' gauges."""
    restarted = is_restart(before, after)
    base = MetricsSnapshot(schema=after.schema, model=after.model) if restarted else before
    if max_running is None:
        max_running = _max_opt((before.requests_running, after.requests_running))

    drafts = _pos(after.drafts - base.drafts)
    draft_tokens = _pos(after.draft_tokens - base.draft_tokens)
    accepted = _pos(after.accepted - base.accepted)
    gen = _pos(after.generation_tokens - base.generation_tokens)
    prompt = _pos(after.prompt_tokens - base.prompt_tokens)
    old_pos = base.accepted_per_pos  # a position new on `after` counts from 0
    per_pos_delta = tuple(
        _pos(x - (old_pos[i] if i < len(old_pos) else 0.0)) for i, x in enumerate(after.accepted_per_pos)
    )

    mal = F.mean_acceptance_length(accepted, drafts)
    per_position = F.per_position_marginal(per_pos_delta, drafts)

    hist = {name: _hist_delta(getattr(base, name), getattr(after, name)) for name in HISTOGRAM_FIELDS}
    itl_count, iter_count = hist["itl"][1], hist["iteration_tokens"][1]

    # Engine steps: with one request running, drafts (speculating) or ITL observations; with several,
    # iteration_tokens (drafts and ITL count once per request per step, iteration_tokens once per
    # engine step, per API server), else ITL.
    single = max_running is not None and max_running <= 1
    if single and after.speculative and drafts > 0:
        steps = drafts
    elif (single and itl_count > 0) or not iter_count:
        steps = itl_count
    else:
        steps = iter_count
    rate_dt = dt_s if dt_s is not None and dt_s > 0 else None

    return Rates(
        window_label=label,
        dt_s=dt_s,
        restarted=restarted,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted=accepted,
        accepted_per_pos=per_pos_delta,
        generation_tokens=gen,
        prompt_tokens=prompt,
        num_speculative_tokens=after.num_speculative_tokens,
        acceptance_rate=F.acceptance_rate(accepted, draft_tokens),
        mean_acceptance_length=mal,
        per_position=per_position,
        per_position_conditional=F.per_position_conditional(per_pos_delta, drafts),
        self_check_residual=F.self_check_residual(per_position, mal),
        output_from_drafts=F.ratio(accepted, gen) if after.speculative else None,
        server_tok_s=gen / rate_dt if rate_dt is not None else None,
        steps_per_s=steps / rate_dt if rate_dt is not None and steps > 0 else None,
        mean_step_s=F.histogram_mean(*hist["itl"]),
        tokens_per_step=F.ratio(gen, itl_count),
        mean_ttft_s=F.histogram_mean(*hist["ttft"]),
        mean_tpot_s=F.histogram_mean(*hist["tpot"]),
        itl_count=itl_count,
        drafted_share=F.drafted_share(drafts, itl_count) if after.speculative else None,
        max_running=max_running,
    )


def attribute(running: Iterable[float | None]) -> Scope:
    """The scope: "this request" when every scrape saw at most one request running, else
    "engine-wide" (also with no scrape or a scrape without the gauge: nothing proves it was alone)."""
    values = list(running)
    alone = bool(values) and all(v is not None and v <= 1 for v in values)
    return "this request" if alone else "engine-wide"


def idle_between(prev: MetricsSnapshot, last: MetricsSnapshot) -> bool:
    """`last` shows an idle server: no request running or waiting, and no prompt or generated token
    counted since `prev` (`Collector.idle`: the monitor scrapes such a server less often). A page
    without a running gauge is never idle here (nothing says it is)."""
    return (
        last.requests_running == 0
        and not last.requests_waiting
        and last.generation_tokens == prev.generation_tokens
        and last.prompt_tokens == prev.prompt_tokens
    )


class Collector:
    """Scrape history of one server (module docstring); its timestamps must not go backwards."""

    def __init__(self, horizon_s: float = 600.0) -> None:
        """Keep `horizon_s` seconds of history (the longest window asked for should fit)."""
        self.horizon_s = horizon_s
        self._history: deque[tuple[float, MetricsSnapshot]] = deque()
        # (t, dt, Δgeneration_tokens) per scrape interval; survives restarts so charts stay continuous.
        self._series: deque[tuple[float, float, float]] = deque()
        self.restarts = 0
        """Restarts detected since the collector was created."""
        self.last_restart_at: float | None = None
        """Timestamp of the scrape that detected the latest restart."""

    @property
    def latest(self) -> MetricsSnapshot | None:
        """The newest snapshot, or None before the first."""
        return self._history[-1][1] if self._history else None

    @property
    def latest_t(self) -> float | None:
        """When the newest snapshot was added."""
        return self._history[-1][0] if self._history else None

    @property
    def idle(self) -> bool:
        """The two newest scrapes show an idle server (`idle_between`)."""
        if len(self._history) < 2:
            return False
        return idle_between(self._history[-2][1], self._history[-1][1])

    def __len__(self) -> int:
        return len(self._history)

    def add(self, snapshot: MetricsSnapshot, now: float) -> bool:
        """Record a scrape taken at `now`; True when it shows a restart (a new baseline starts).
        Raises ValueError when `now` is earlier than the previous scrape."""
        restarted = False
        if self._history:
            t_prev, prev = self._history[-1]
            if now < t_prev:
                raise ValueError(f"scrape time went backwards ({now} < {t_prev})")
            restarted = is_restart(prev, snapshot)
            if restarted:
                self.restarts += 1
                self.last_restart_at = now
                self._history.clear()
                # The new counters started from zero somewhere between the last scrape and this one:
                # a zero baseline at the last scrape keeps the tokens counted before this scrape
                # (ratios stay exact; a rate over the gap is at worst an underestimate).
                prev = _zeroed(snapshot)
                self._history.append((t_prev, prev))
            if now > t_prev:
                gen = _pos(snapshot.generation_tokens - prev.generation_tokens)
                self._series.append((now, now - t_prev, gen))
        self._history.append((now, snapshot))
        cutoff = now - self.horizon_s
        # Keep the newest entry older than the cutoff: it is the base of a full-horizon window.
        while len(self._history) >= 2 and self._history[1][0] <= cutoff:
            self._history.popleft()
        while self._series and self._series[0][0] < cutoff:
            self._series.popleft()
        return restarted

    def _rates_from(self, t: float, label: str, until: float | None = None) -> Rates | None:
        # End: the newest entry at or before `until` (the newest of all without it). Base: the newest
        # entry at or before t (the oldest when history starts after t). Walk from the newest end:
        # windows are short compared with the history.
        if len(self._history) < 2:
            return None
        entries = reversed(self._history)
        t1, end = self._history[-1]
        if until is not None:
            for ts, snap in entries:
                if ts <= until:
                    t1, end = ts, snap
                    break
            else:
                return None
            entries = itertools.chain([(t1, end)], entries)
        running: list[float | None] = []
        t0, base = t1, end
        for ts, snap in entries:
            t0, base = ts, snap
            running.append(snap.requests_running)
            if ts <= t:
                break
        if t0 >= t1:
            return None
        return delta_rates(base, end, t1 - t0, label, max_running=_max_opt(running))

    def window(self, seconds: float, now: float, label: str | None = None) -> Rates | None:
        """Rates over the last `seconds` (from the newest scrape at or before `now − seconds`); a
        shorter history gives a shorter window (`Rates.dt_s`). None with fewer than two scrapes in
        reach, e.g. when the newest scrape is older than the window."""
        return self._rates_from(now - seconds, label or f"{seconds:g} s")

    def since(self, t0: float, now: float, label: str = "prompt", until: float | None = None) -> Rates | None:
        """Rates from the scrape at or before `t0` (e.g. when a prompt was sent) to the newest one,
        or to the newest one at or before `until` (e.g. the scrape after a prompt's last token, so
        later idle time does not dilute the prompt's rates). After a restart the window starts at the
        restart and `Rates.restarted` is True."""
        rates = self._rates_from(t0, label, until)
        restart = self.last_restart_at
        if rates is not None and restart is not None and restart > t0 and (until is None or restart <= until):
            rates = replace(rates, restarted=True)
        return rates

    def tok_s_series(self, since: float | None = None, smooth_s: float = 0.0) -> list[tuple[float, float]]:
        """(t, server tok/s) per scrape interval, or averaged over the trailing `smooth_s` seconds;
        intervals that span a restart are left out."""
        pts = [p for p in self._series if since is None or p[0] >= since]
        if smooth_s <= 0:
            return [(t, tok / dt) for t, dt, tok in pts]
        out: list[tuple[float, float]] = []
        lo, sum_dt, sum_tok = 0, 0.0, 0.0
        for i, (t, dt, tok) in enumerate(pts):
            sum_dt += dt
            sum_tok += tok
            # Drop intervals that ended before the smoothing window; always keep the current one.
            while lo < i and pts[lo][0] <= t - smooth_s:
                sum_dt -= pts[lo][1]
                sum_tok -= pts[lo][2]
                lo += 1
            out.append((t, sum_tok / sum_dt if sum_dt > 0 else 0.0))
        return out

    def attribution(self, t_start: float, t_end: float | None = None) -> Scope:
        """Whether a prompt sent at `t_start` (finished at `t_end`, None = still running) ran alone:
        `attribute` of `requests_running` at each scrape from `t_start` through the first at or after
        `t_end`; "engine-wide" when a restart fell inside."""
        if self.last_restart_at is not None and self.last_restart_at > t_start:
            return "engine-wide"
        running: list[float | None] = []
        for t, s in self._history:
            if t >= t_start:
                running.append(s.requests_running)
                if t_end is not None and t >= t_end:
                    break
        return attribute(running)


def _zeroed(snap: MetricsSnapshot) -> MetricsSnapshot:
    """`snap` with every counter and histogram at zero: the state of a freshly restarted server."""
    zeros: dict[str, Any] = {h: Histogram(0.0, 0.0) for h in HISTOGRAM_FIELDS if getattr(snap, h) is not None}
    return replace(
        snap,
        **zeros | dict.fromkeys(COUNTER_FIELDS, 0.0),
        accepted_per_pos=tuple(0.0 for _ in snap.accepted_per_pos),
        request_success={reason: 0.0 for reason in snap.request_success},
        estimated_read_bytes=None if snap.estimated_read_bytes is None else 0.0,
    )
