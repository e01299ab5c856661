"""`ServerView` fields read from core's numbers: pure functions that `ServerFeed.view` assembles.

The window's `Rates` (vLLM's formulas, `core.metrics.formulas`, applied by `core.metrics.rates`) and
the newest page's gauges become the view's fields here, so what a field means is written once.
"""

from __future__ import annotations

from typing import Any

from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.metrics.rates import Rates
from mtpwatch.core.metrics.snapshot import MetricsSnapshot


def rate_fields(r: Rates | None) -> dict[str, Any]:
    """ServerView fields read from the window's rates (None: all unknown), the dynamic-k ones among
    them: the drafted share and the mean number of drafts a drafting step verified (Δdraft_tokens /
    Δdrafts, below k when lengths mix)."""
    if r is None:
        keys = ("server_tok_s", "steps_per_s", "mean_step_s", "mean_ttft_s", "mean_tpot_s")
        return dict.fromkeys((*keys, "drafted_share", "mean_draft_len"))
    return {
        "server_tok_s": r.server_tok_s,
        "steps_per_s": r.steps_per_s,
        "mean_step_s": r.mean_step_s,
        "mean_ttft_s": r.mean_ttft_s,
        "mean_tpot_s": r.mean_tpot_s,
        "drafted_share": r.drafted_share,
        "mean_draft_len": F.ratio(r.draft_tokens, r.drafts),
    }


def snapshot_fields(snap: MetricsSnapshot | None) -> dict[str, Any]:
    """ServerView fields read from the newest page's gauges (what the server has now)."""
    return {
        "kv_cache_usage": snap.kv_cache_usage if snap else None,
        "acceptance_since_start": F.acceptance_rate(snap.accepted, snap.draft_tokens) if snap else None,
        "running": snap.requests_running if snap else None,
        "waiting": snap.requests_waiting if snap else None,
    }
