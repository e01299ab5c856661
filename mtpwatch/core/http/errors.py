"""Everything that can go wrong talking to a server, as `ServerError` subclasses whose `str()` is one line."""

from __future__ import annotations


class ServerError(Exception):
    """Talking to the server failed; `str()` is one line a user can act on."""

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url
        """The URL involved (base URL or endpoint)."""


class ServerUnreachable(ServerError):
    """No connection: refused, DNS failure, network unreachable."""


class ServerTimeout(ServerError):
    """No answer in time (connect or read)."""


class AuthError(ServerError):
    """HTTP 401/403: missing or wrong API key."""


class NotVllmError(ServerError):
    """The server answers, but not like vLLM: 404 on /metrics, a page that is not Prometheus text, …"""


class HttpStatusError(ServerError):
    """Any other unexpected HTTP status (5xx, a rejected request)."""


class StreamError(ServerError):
    """A generation stream broke mid-way or the server sent an error event."""


def one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def causes(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen and len(seen) < 10:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def describe_transport(exc: BaseException) -> str:
    """The most specific one-line reason in an exception chain ('' when there is none)."""
    for cause in reversed(causes(exc)):
        text = str(cause)
        if text:
            return one_line(text, 120)
    return type(exc).__name__
