"""How a failed request to a server becomes one line, one of `errors.py`'s `ServerError` classes, for
`VllmClient`.
"""

from __future__ import annotations

import errno
import json
import re
import socket

import httpx

from mtpwatch.core.http.errors import (
    AuthError,
    HttpStatusError,
    NotVllmError,
    ServerError,
    ServerTimeout,
    ServerUnreachable,
    causes,
    describe_transport,
    one_line,
)
from mtpwatch.core.http.generation import openai_error_message
from mtpwatch.core.metrics.parse import MetricsFormatError
from mtpwatch.core.metrics.snapshot import MetricsSnapshot, parse_snapshot


def transport_error(base: str, url: str, exc: httpx.RequestError, timeout: float) -> ServerError:
    """A request that got no answer (`httpx.RequestError`) → the one-line `ServerError` to show."""
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return ServerTimeout(
            f"cannot connect to {base}: no answer within {timeout:g} s"
            " — is the host reachable and the port right?",
            url=url,
        )
    if isinstance(exc, httpx.TimeoutException):
        return ServerTimeout(
            f"{url} did not answer within {timeout:g} s — the server may be overloaded or stuck", url=url
        )
    if isinstance(exc, httpx.ConnectError):
        chain = causes(exc)
        if any(isinstance(c, socket.gaierror) for c in chain):
            host = httpx.URL(base).host
            return ServerUnreachable(
                f"cannot connect to {base}: host {host} not found (DNS lookup failed) — check the URL",
                url=url,
            )
        if any(
            isinstance(c, ConnectionRefusedError) or getattr(c, "errno", None) == errno.ECONNREFUSED
            for c in chain
        ):
            hint = "is the server running?"
            if httpx.URL(base).port is None:
                # 'localhost' alone means port 80 (443); vLLM listens on 8000 unless told otherwise.
                hint = "no port was given, so the default port was used; vLLM listens on 8000 (host:8000)"
            return ServerUnreachable(f"cannot connect to {base}: connection refused — {hint}", url=url)
        return ServerUnreachable(f"cannot connect to {base}: {describe_transport(exc)}", url=url)
    return ServerError(f"request to {url} failed: {describe_transport(exc)}", url=url)


def status_error(api_key: str | None, url: str, status: int, reason: str, body: str) -> ServerError:
    """An answer with an error status → the one-line `ServerError` (`api_key`: whether one was sent)."""
    head = f"{url} answered {status} {reason}".rstrip()
    if status in (401, 403):
        hint = (
            "the API key was rejected; check --api-key or VLLM_API_KEY"
            if api_key
            else "the server wants an API key; pass --api-key or set VLLM_API_KEY"
        )
        return AuthError(f"{head}: {hint}", url=url)
    detail = body_message(body)
    if status >= 500:
        tail = f": {detail}" if detail else " (engine dead or still starting?)"
        return HttpStatusError(f"{head}: server error{tail}", url=url)
    return HttpStatusError(f"{head}: {detail}" if detail else head, url=url)


NOT_PROMETHEUS = re.compile(r"\s*[<{\[]")


def not_prometheus(ctype: str, text: str) -> bool:
    """An answer that is no Prometheus text: HTML or JSON by its content type or its first character."""
    return "html" in ctype or "json" in ctype or bool(NOT_PROMETHEUS.match(text))


def body_message(body: str) -> str:
    """The server's error message from a JSON error body, or the start of a text body."""
    try:
        message = openai_error_message(json.loads(body))
    except ValueError:
        message = None
    if message:
        return message
    return "" if NOT_PROMETHEUS.match(body) else one_line(body, 160)


def parse_metrics_page(text: str, model: str | None, base_url: str) -> MetricsSnapshot:
    """A /metrics page of the server at `base_url` → `MetricsSnapshot` (a recorded page too).
    Raises NotVllmError when the text is not Prometheus text."""
    try:
        return parse_snapshot(text, model)
    except MetricsFormatError as exc:
        url = base_url + "/metrics"
        raise NotVllmError(
            f"{url} did not return valid Prometheus text: {one_line(str(exc))}", url=url
        ) from exc
