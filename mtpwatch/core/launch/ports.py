"""Is a TCP port free to listen on? Checked before launching a server on a fixed port.

A server that cannot bind dies, but only after mtpwatch has polled ``/health`` on that port, and
whatever already listens there answers: mtpwatch would report *ready* and watch the wrong server."""

from __future__ import annotations

import errno
import socket


def port_in_use_message(host: str, port: int) -> str | None:
    """One line saying that `host:port` is taken, or None when a server could listen there. Binds with
    ``SO_REUSEADDR`` as uvicorn does: a just-stopped server's connections in TIME_WAIT do not count."""
    bind_host = host.strip("[]") or "0.0.0.0"
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    try:
        infos = socket.getaddrinfo(bind_host, port, family, socket.SOCK_STREAM)
    except OSError:
        return None  # a host name that does not resolve: the server reports that itself
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(infos[0][4])
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                shown = f"[{bind_host}]" if ":" in bind_host else bind_host
                return (
                    f"port {port} on {shown} is already in use (another server listens there): "
                    "pick another --port, or watch that one with: mtpwatch attach "
                    f"{connect_url(bind_host, port)}"
                )
    return None  # free, or another error (an address of another machine): the server reports it


def connect_url(host: str, port: int) -> str:
    """The URL a client on this machine uses: a wildcard bind is reached through loopback, an IPv6
    address in brackets."""
    if host in ("0.0.0.0", "::", "[::]", ""):
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"
