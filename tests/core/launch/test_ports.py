"""`core.launch.ports`: is a port free before `mtpwatch start` launches a server there, and the URL a
client on this machine uses. (The whole command's one error line: tests/faults/test_start_faults.py.)"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from mtpwatch.core.launch.ports import connect_url, port_in_use_message


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A socket listening on 127.0.0.1 at a port of the system's choice (closed after the test)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def test_a_taken_port_is_one_line_naming_the_server_to_attach_to(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    message = port_in_use_message("127.0.0.1", port)
    assert message == (
        f"port {port} on 127.0.0.1 is already in use (another server listens there): pick another "
        f"--port, or watch that one with: mtpwatch attach http://127.0.0.1:{port}"
    )


def test_a_wildcard_bind_is_refused_and_attached_through_loopback(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    for host in ("0.0.0.0", ""):  # '' is how a bind to every address is also spelled
        message = port_in_use_message(host, port)
        assert message is not None and f"port {port} on 0.0.0.0 is already in use" in message
        assert message.endswith(f"mtpwatch attach http://127.0.0.1:{port}")


def test_a_free_port_and_a_just_closed_one_are_free() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
    # closed: free again (bound with SO_REUSEADDR, as uvicorn binds)
    assert port_in_use_message("127.0.0.1", port) is None


def test_what_the_server_reports_itself_is_not_called_taken() -> None:
    # a name that does not resolve, an address of another machine (TEST-NET-1, RFC 5737)
    assert port_in_use_message("no-such-host.invalid", 8000) is None
    assert port_in_use_message("192.0.2.1", 8000) is None


def test_ipv6_is_named_and_attached_in_brackets() -> None:
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with sock:
        sock.listen()
        port = sock.getsockname()[1]
        for host in ("::1", "[::1]"):
            message = port_in_use_message(host, port)
            assert message is not None and f"port {port} on [::1] is already in use" in message
            assert message.endswith(f"mtpwatch attach http://[::1]:{port}")


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("0.0.0.0", "http://127.0.0.1:8000"),
        ("::", "http://127.0.0.1:8000"),
        ("[::]", "http://127.0.0.1:8000"),
        ("", "http://127.0.0.1:8000"),
        ("::1", "http://[::1]:8000"),
        ("[::1]", "http://[::1]:8000"),
        ("spark.local", "http://spark.local:8000"),
    ],
)
def test_connect_url(host: str, url: str) -> None:
    assert connect_url(host, 8000) == url
