"""Server URLs as users type them (`host:port`, `…/v1`, `…/metrics`) → one canonical base URL."""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

import httpx

_HOST = re.compile(r"[a-z0-9_]([a-z0-9._-]*[a-z0-9_])?\Z")
# A host of digits and dots is an IPv4 address to httpx (httpx/_urlparse.py `IPv4_STYLE_HOSTNAME`),
# which raises `InvalidURL` at the first request when it is not a valid one (256.1.1.1).
_IPV4_STYLE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+\Z")
_STRIP_SUFFIXES = ("/v1/chat/completions", "/v1/completions", "/v1/models", "/v1", "/metrics", "/health")


def normalize_url(url: str) -> str:
    """`host:port`, `http://host:port/`, `…/v1`, `…/metrics` → `http://host:port` (scheme://host[:port][/prefix]).
    Raises ValueError: one line saying what is wrong (bad scheme, no host, bad port, …)."""
    raw = url.strip()
    if not raw:
        raise ValueError("empty server URL: give host:port or http://host:port, e.g. 127.0.0.1:8000")
    candidate = raw if "://" in raw else "http://" + raw
    try:
        parts = urlsplit(candidate)
    except ValueError:
        # urlsplit only fails on an unbalanced '[' or ']' (an IPv6 literal).
        raise ValueError(f"bad server URL {url!r}: unbalanced [ ] around an IPv6 address") from None
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad server URL {url!r}: the port must be a number from 1 to 65535") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"bad server URL {url!r}: the scheme must be http:// or https://, not {scheme}://")
    host = (parts.hostname or "").lower()
    if not host or (host.isdigit() and "." not in host):
        raise ValueError(f"bad server URL {url!r}: no host name; expected host:port, e.g. 127.0.0.1:8000")
    if ":" in host or _IPV4_STYLE.match(host):
        family = "IPv6" if ":" in host else "IPv4"
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(f"bad server URL {url!r}: {host!r} is not a valid {family} address") from None
    elif not _HOST.match(host):
        raise ValueError(f"bad server URL {url!r}: {host!r} is not a valid host name")
    netloc = f"[{host}]" if ":" in host else host
    if port == 0:
        raise ValueError(f"bad server URL {url!r}: the port must be a number from 1 to 65535")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"bad server URL {url!r}: credentials in the URL are not supported; use --api-key")
    if parts.query or parts.fragment:
        raise ValueError(f"bad server URL {url!r}: remove the ?query or #fragment part")
    if port is not None:
        netloc += f":{port}"
    path = parts.path.rstrip("/")
    suffix = next((s for s in _STRIP_SUFFIXES if path.endswith(s)), "")
    path = path.removesuffix(suffix).rstrip("/")
    base = f"{scheme}://{netloc}{path}"
    try:
        # httpx parses every request's URL again; what it refuses is refused here, as one line.
        httpx.URL(base)
    except httpx.InvalidURL as exc:
        raise ValueError(f"bad server URL {url!r}: {exc}") from None
    return base


_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]", "0.0.0.0"})


def same_server(a: str, b: str) -> bool:
    """True when two URLs name one server: equal once normalised, localhost = 127.0.0.1 = [::1].
    Unparseable URLs never are (their own check says what is wrong with them)."""
    try:
        ua, ub = urlsplit(normalize_url(a)), urlsplit(normalize_url(b))
    except ValueError:
        return False

    def key(u: Any) -> tuple[str, str, int, str]:
        host = u.netloc.rsplit(":", 1)[0] if u.port is not None else u.netloc
        port = u.port if u.port is not None else (443 if u.scheme == "https" else 80)
        return (u.scheme, "127.0.0.1" if host in _LOOPBACK_NAMES else host, port, u.path)

    return key(ua) == key(ub)
