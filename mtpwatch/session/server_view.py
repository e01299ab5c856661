"""`build_server_view`: the panel's numbers from a `ServerWatch` and its `PromptWindow`, pure.

`Collector.window/since` over the window shown → `core.metrics.rates.Rates` (vLLM's formulas,
`core.metrics.formulas`) → the acceptance `core.metrics.attribution.prompt_acceptance` picks
(`PromptWindow.acceptance` for the 'prompt' window, as the summary line) → the roofline
(`BandwidthModel.view`), the verdict (`session.diagnosis.make_verdict`) → one frozen
`session.views.ServerView`.
"""

from __future__ import annotations

import bisect
import time
from typing import Any

from mtpwatch.core.http import engines
from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.metrics.attribution import prompt_acceptance
from mtpwatch.core.metrics.engines import ENGINE_NOTES
from mtpwatch.core.metrics.rates import Rates
from mtpwatch.session.advice import engine_mode_of
from mtpwatch.session.diagnosis import make_verdict
from mtpwatch.session.prompts import PromptWindow
from mtpwatch.session.server_watch import ServerWatch
from mtpwatch.session.views import ServerView, stale_age

WINDOW_SECONDS = {"10 s": 10.0, "60 s": 60.0}
CHART_POINTS = 60
"""Seconds of history the tok/s chart shows."""


def window_rates(watch: ServerWatch, prompts: PromptWindow, window: str, now: float) -> Rates | None:
    """Rates over `window` ('10 s', '60 s' or 'prompt') at `now`."""
    if window == "prompt":
        return prompts.rates(watch.collector, now)
    return watch.collector.window(WINDOW_SECONDS[window], now)


def build_server_view(watch: ServerWatch, prompts: PromptWindow, window: str) -> ServerView:
    """The panel's numbers now, over `window` (what the screen shows). Pure: reads state only."""
    now = watch.clock()
    snap = watch.collector.latest
    r, window = _shown_rates(watch, prompts, window, now)
    k_listed = snap.num_speculative_tokens if snap is not None else 0  # the `position` labels
    k = k_listed if snap is not None and snap.speculative else 0
    bw = watch.bandwidth.view(r, k, snap, prompts.request_tokens, hardware=watch.hardware_line())
    # llama-server says it drafts (/slots) before its first request fills the spec counters
    props = watch.engine_info is not None and bool(watch.engine_info.speculative)
    speculative = None if snap is None else (snap.speculative or props)
    if speculative is False and snap is not None:  # an OpenMetrics page may not tell yet
        log = watch.launch_facts
        speculative = snap.speculating(bool(log and log.spec_method))
    if window == "prompt":  # this prompt's own numbers (see the module)
        acc = prompts.acceptance(watch.collector, r)
    else:
        acc = prompt_acceptance(counters=r, scope="engine-wide")
    verdict, level = make_verdict(
        method=watch.method,
        speculative=speculative,
        acceptance_rate=acc.acceptance_rate,
        mean_acceptance_length=acc.mean_acceptance_length,
        drafts=acc.drafts,
        bandwidth=bw,
        window=window,
        k=k,
        per_position=acc.per_position,
    )
    return ServerView(
        label=watch.spec.label,
        url=watch.spec.url,
        status=watch.status,
        status_detail=status_detail(watch),
        model=watch.model,
        models=watch.models,
        version=watch.version,
        method=watch.method,
        speculative=speculative,
        k=k_listed or None,
        facts=watch.facts,
        window=window,
        scope=acc.scope,
        acceptance_rate=acc.acceptance_rate,
        mean_acceptance_length=acc.mean_acceptance_length,
        per_position=acc.per_position,
        per_position_conditional=acc.per_position_conditional,
        restarts=watch.collector.restarts,
        scrape=watch.scrape_via,
        drafts=acc.drafts if speculative else None,
        bandwidth=bw,
        verdict=verdict,
        verdict_level=level,
        k_schedule=_k_schedule(watch),
        as_of_s=stale_age(watch.status, watch.collector.latest_t, now, 2 * watch.display.idle_interval_s),
        kv_cache_usage=snap.kv_cache_usage if snap else None,
        acceptance_since_start=F.acceptance_rate(snap.accepted, snap.draft_tokens) if snap else None,
        running=snap.requests_running if snap else None,
        waiting=snap.requests_waiting if snap else None,
        server_series=_per_second(watch.collector.tok_s_series(since=now - CHART_POINTS, smooth_s=1.0), now),
        client_series=tuple(v for t, v in prompts.client_points if t >= now - CHART_POINTS),
        engine=watch.engine,
        draft_note=engines.draft_note(
            watch.engine, k_listed, r.draft_tokens if r else 0.0, r.drafts if r else 0.0
        ),
        notes=ENGINE_NOTES.get(watch.engine, {}),
        **rate_fields(r),
    )


RATE_FIELDS = ("server_tok_s", "steps_per_s", "mean_step_s", "mean_ttft_s", "mean_tpot_s", "drafted_share")


def rate_fields(r: Rates | None) -> dict[str, Any]:
    """`ServerView` fields read from the window's rates (None: all unknown)."""
    fields = {name: getattr(r, name) if r is not None else None for name in RATE_FIELDS}
    return {**fields, "mean_draft_len": F.ratio(r.draft_tokens, r.drafts) if r is not None else None}


def _shown_rates(
    watch: ServerWatch, prompts: PromptWindow, window: str, now: float
) -> tuple[Rates | None, str]:
    """The rates shown for `window`, and the window they are over.

    A time window with no tokens (the server idle since the last prompt) would show only
    dashes: the last prompt's numbers stand in, labelled as such ("this prompt").
    """
    r = window_rates(watch, prompts, window, now)
    if window != "prompt" and (r is None or not r.generation_tokens):
        prompt_rates = window_rates(watch, prompts, "prompt", now)
        if prompt_rates is not None and prompt_rates.generation_tokens:
            return prompt_rates, "prompt"
    return r, window


def status_detail(watch: ServerWatch) -> str:
    """One line on why the server is not up ('disconnected since 12:00:01 (…), retrying in 2.0 s')."""
    if watch.status == "down" or (watch.status == "connecting" and watch.reason):
        down_since = watch.down_since
        since = time.strftime("%H:%M:%S", time.localtime(down_since)) if down_since is not None else "?"
        retry = f", retrying in {watch.retry_in:.1f} s" if watch.retry_in is not None else ""
        verb = "disconnected" if watch.status == "down" else "not reachable"
        return f"{verb} since {since} ({watch.reason}){retry}"
    return watch.reason if watch.status == "failed" else ""


def _k_schedule(watch: ServerWatch) -> tuple[tuple[int, int, int], ...] | None:
    """The batch-size schedule the command line set (servers mtpwatch started), else None.
    vLLM's start-up init line does not carry it (`SpeculativeConfig.__repr__` prints method, model
    and num_spec_tokens only: vllm/config/speculative.py:1829-1843 in 0.34.0)."""
    if watch.spec.launch is None:
        return None
    return engine_mode_of(watch.spec, watch.engine_info, watch.spec_method, watch.version).schedule


def _per_second(series: list[tuple[float, float]], now: float) -> tuple[float, ...]:
    """Resample (t, tok/s) points to one per second for the last CHART_POINTS seconds: each second
    takes the last point at or before it."""
    if not series:
        return ()
    times = [t for t, _ in series]
    out: list[float] = []
    t = max(times[0], now - CHART_POINTS)
    while t <= now:
        out.append(series[bisect.bisect_right(times, t) - 1][1])
        t += 1.0
    return tuple(out)
