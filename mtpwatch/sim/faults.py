"""The simulator's fault switches (`Faults`), set from CLI flags or POST /sim/fault (`SimServer`'s route)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Faults:
    cut_stream_after: int | None = None
    """Drop the connection of each stream after this many tokens."""
    metrics_status: int | None = None
    """Answer /metrics with this HTTP status (e.g. 500)."""
    metrics_delay_s: float = 0.0
    """Delay every /metrics answer (seconds)."""
    metrics_truncate: bool = False
    """Send half of the /metrics page (cut mid-line), then drop the connection."""
    metrics_no_spec: bool = False
    """Leave the `vllm:spec_decode_*` families out of /metrics (as a server without speculation)."""
    metrics_filter: str = "honour"
    """How `/metrics/?name[]=…` answers (`METRICS_FILTER_MODES`): 'honour' (vLLM 0.32: prometheus_client's
    restricted registry), 'ignore' (the whole page), 'empty' (an empty 200, as vLLM with several API
    servers), '404' (no such route) or 'redirect' (307 to /metrics, which ignores the query)."""
    cut_mid_chunk: bool = False
    """With `cut_stream_after`: drop the connection in the middle of an SSE event, not between two."""
    hang: bool = False
    """Accept connections and never answer any request (a wedged server)."""
