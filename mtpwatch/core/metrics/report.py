"""`mtpwatch snapshot --json`: cumulative totals of one page, or deltas between two."""

from __future__ import annotations

from typing import Any

from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.metrics.engines import ENGINE_NOTES, engine_of_schema
from mtpwatch.core.metrics.rates import delta_rates
from mtpwatch.core.metrics.snapshot import MetricsSnapshot, finite_or_none


def snapshot_report(after: MetricsSnapshot, before: MetricsSnapshot | None = None) -> dict[str, Any]:
    """The `mtpwatch snapshot --json` object: cumulative totals, or deltas between two pages.

    Counts and rates cover the window ("since server start" or "between pages"); gauges
    (requests_running, requests_waiting, kv_cache_usage) are read from `after`. restart_signal: how a
    restart is seen (`_created` or only counters going down, as on vLLM's Rust frontend);
    mean_draft_length: draft_tokens / drafts (k on vLLM, up to k on llama.cpp); missing: why the
    engine's n/a numbers are n/a; per_position: the marginal rates."""
    base = before if before is not None else MetricsSnapshot(schema=after.schema, model=after.model)
    r = delta_rates(base, after, None, "between pages" if before is not None else "since server start")
    return {
        "model": after.model,
        "models": list(after.models),
        "schema": after.schema,
        "engines": list(after.engines),
        "window": r.window_label,
        "restarted": r.restarted,
        "restart_signal": after.restart_signal,
        "exposition": after.exposition,
        "speculative": after.speculating(),
        "num_speculative_tokens": after.num_speculative_tokens,
        "drafts": r.drafts,
        "draft_tokens": r.draft_tokens,
        "accepted": r.accepted,
        "acceptance_rate": finite_or_none(r.acceptance_rate),
        "mean_acceptance_length": finite_or_none(r.mean_acceptance_length),
        "per_position": [finite_or_none(x) for x in r.per_position],
        "per_position_conditional": [finite_or_none(x) for x in r.per_position_conditional],
        "self_check_residual": finite_or_none(r.self_check_residual),
        "output_from_drafts": finite_or_none(r.output_from_drafts),
        "generation_tokens": r.generation_tokens,
        "prompt_tokens": r.prompt_tokens,
        "requests_running": finite_or_none(after.requests_running),
        "requests_waiting": finite_or_none(after.requests_waiting),
        "kv_cache_usage": finite_or_none(after.kv_cache_usage),
        "mean_step_s": finite_or_none(r.mean_step_s),
        "mean_ttft_s": finite_or_none(r.mean_ttft_s),
        "mean_tpot_s": finite_or_none(r.mean_tpot_s),
        "tokens_per_step": finite_or_none(r.tokens_per_step),
        "engine": engine_of_schema(after.schema),
        "mean_draft_length": finite_or_none(F.ratio(r.draft_tokens, r.drafts)),
        "missing": dict(ENGINE_NOTES.get(engine_of_schema(after.schema), {})),
    }
