"""What every simulator reply shares: the version it claims, its headers, JSON bodies, a dropped connection.

Every response carries ``server: mtpwatch-sim`` and ``x-mtpwatch-sim: 1`` so tools can tell a simulator
from a real vLLM; JSON is written compactly, as FastAPI/pydantic do.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
VLLM_VERSIONS: dict[str, str] = {"0.32-cpu": "0.32.0", "0.34-gpu": "0.34.0"}
"""The vLLM version each start-up log flavour (`SimOptions.vllm_log`) claims (in the log, /version and
/sim/info); the default flavour's is `VLLM_VERSION` (`vllm --version`, the system fingerprint)."""
VLLM_VERSION = VLLM_VERSIONS["0.32-cpu"]
SIM_HEADERS = {"server": "mtpwatch-sim", "x-mtpwatch-sim": "1"}


def json_response(obj: Any, status: int = 200) -> web.Response:
    # FastAPI's JSONResponse is compact
    return web.Response(text=dumps(obj), status=status, content_type="application/json")


def error_response(status: int, message: str, kind: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return json_response(body, status=status)


def dumps(obj: Any) -> str:
    # pydantic's model_dump_json: compact, non-ASCII kept
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def drop_transport(request: web.Request) -> None:
    # abort the TCP connection without a clean end of stream, as a dying server does
    transport = request.transport
    if transport is not None:
        transport.abort()
