"""The simulator's fault switches (`Faults`, set from CLI flags or POST /sim/fault) and the /sim/fault routes.

GET /sim/fault shows the switches; POST sets them, clears them, or asks for a restart or an exit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from aiohttp import web

from mtpwatch.sim import METRICS_FILTER_MODES
from mtpwatch.sim.replies import error_response, json_response


@dataclass
class Faults:
    """Fault switches; set from CLI flags or POST /sim/fault."""

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


class FaultRoutes:
    """GET and POST /sim/fault (a mixin of `SimServer`)."""

    faults: Faults

    if TYPE_CHECKING:

        def _spawn(self, coro: Awaitable[Any]) -> None: ...

        async def restart(self, down_s: float = 0.0) -> None: ...

        async def exit(self, code: int = 1) -> None: ...

    async def _fault_get(self, request: web.Request) -> web.Response:
        return json_response(asdict(self.faults))

    async def _fault(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            if body.get("clear"):
                for spec in fields(Faults):
                    setattr(self.faults, spec.name, spec.default)
            for count in ("cut_stream_after", "metrics_status"):
                if count in body:
                    setattr(self.faults, count, None if body[count] is None else int(body[count]))
            if "metrics_500" in body:
                self.faults.metrics_status = 500 if body["metrics_500"] else None
            if "metrics_delay_s" in body:
                self.faults.metrics_delay_s = max(0.0, float(body["metrics_delay_s"] or 0.0))
            if "metrics_filter" in body:
                v = str(body["metrics_filter"] or "honour")
                if v not in METRICS_FILTER_MODES:
                    raise ValueError(f"metrics_filter must be one of {', '.join(METRICS_FILTER_MODES)}")
                self.faults.metrics_filter = v
            for flag in ("metrics_truncate", "metrics_no_spec", "cut_mid_chunk", "hang"):
                if flag in body:
                    setattr(self.faults, flag, bool(body[flag]))
            restart = bool(body.get("restart"))
            down_s = float(body.get("down_s", 0.0))
            do_exit = bool(body.get("exit"))
            exit_code = int(body.get("exit_code", 1))
        except (ValueError, TypeError) as exc:
            return error_response(400, f"bad fault request: {exc}", "BadRequestError")
        if restart:
            self._spawn(self.restart(down_s))
        if do_exit:
            # answer first, then die
            asyncio.get_running_loop().call_later(0.05, lambda: self._spawn(self.exit(exit_code)))
        return json_response({**asdict(self.faults), "restart": restart, "exit": do_exit})
