"""Faults on the way to /metrics: what the panel says, what `snapshot` says, and recovery.

Each case: the app attached to a simulator shows one status line (no traceback, the app keeps
running), `mtpwatch snapshot` fails with one `Error:` line, and once the fault clears the panel is
up again with numbers equal to a freshly attached feed's.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.sim.harness import SimThread, running_sim
from mtpwatch.ui.app import make_app
from tests.feeds import monitor_of, server_feeds
from tests.waits import wait_for

from .conftest import (
    assert_numbers_match_fresh_attach,
    one_error_line,
    run_mtpwatch,
    sim_fault,
    status_of,
)

FAST = DisplaySettings(scrape_interval_s=0.1, max_tokens=32)

# fault switch, what the panel's status line says, what `snapshot`'s Error line says
DOWN_FAULTS = [
    pytest.param({"metrics_500": True}, "500 Internal Server Error", "answered 500", id="metrics-500"),
    pytest.param(
        {"metrics_truncate": True},
        "without sending complete message body",
        "complete message",
        id="truncated",
    ),
    pytest.param(
        {"hang": True}, "did not answer within 5 s", "did not answer within 5 s", id="never-answers"
    ),
]


@pytest.mark.parametrize(("fault", "on_screen", "_cli"), DOWN_FAULTS)
async def test_metrics_fault_shows_one_line_then_recovers(
    fault: dict[str, bool], on_screen: str, _cli: str
) -> None:
    async with running_sim(speed=20) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: status_of(app)[0] == "up", "the panel to be up")
            await sim_fault(url, fault)
            await wait_for(pilot, lambda: status_of(app)[0] == "down", "the panel to say down", 15)
            _status, line = status_of(app)
            assert line.startswith("disconnected since ") and on_screen in line and "retrying in" in line, (
                line
            )
            assert "\n" not in line and "Traceback" not in line
            assert app.is_running
            await sim_fault(url, {"clear": True})
            await wait_for(pilot, lambda: status_of(app)[0] == "up", "recovery", 20)
            assert server_feeds(app.screen)[0].watch.collector.restarts == 0  # a fault is not a restart
            await assert_numbers_match_fresh_attach(pilot, app, url)
            await pilot.press("ctrl+q")


@pytest.mark.parametrize(("fault", "_screen", "cli"), DOWN_FAULTS)
def test_metrics_fault_snapshot_is_one_error_line(fault: dict[str, bool], _screen: str, cli: str) -> None:
    import httpx

    with SimThread(speed=20) as url:
        httpx.post(url + "/sim/fault", json=fault).raise_for_status()
        one_error_line(run_mtpwatch("snapshot", url), cli)


async def test_slow_metrics_keeps_one_scrape_in_flight_and_stays_up() -> None:
    """/metrics slower (0.5 s) than the scrape interval (0.1 s): no pile-up, no 'down', right numbers."""
    async with running_sim(speed=20) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: status_of(app)[0] == "up", "the panel to be up")
            await sim_fault(url, {"metrics_delay_s": 0.5})
            feed = server_feeds(app.screen)[0]
            seen = len(feed.watch.collector)
            t0 = asyncio.get_running_loop().time()
            await wait_for(pilot, lambda: len(feed.watch.collector) >= seen + 4, "four slow scrapes", 15)
            elapsed = asyncio.get_running_loop().time() - t0
            assert elapsed >= 4 * 0.5 * 0.9  # one at a time: never two requests in flight
            assert status_of(app)[0] == "up"
            await assert_numbers_match_fresh_attach(pilot, app, url)
            await sim_fault(url, {"clear": True})
            await pilot.press("ctrl+q")


async def test_spec_families_gone_then_back() -> None:
    """The spec families vanish (e.g. a relaunch without speculation): shown as 'speculation off',
    never as a counter reset or a negative rate; when they return, the numbers are a fresh attach's."""
    async with running_sim(speed=20) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = monitor_of(app.screen).panels[0]
            await wait_for(pilot, lambda: panel.view is not None and panel.view.speculative is True, "MTP on")
            monitor_of(app.screen).send("warm up")
            await wait_for(pilot, lambda: panel.prompt_count == 1, "a first prompt")
            await sim_fault(url, {"metrics_no_spec": True})
            await wait_for(
                pilot, lambda: panel.view is not None and panel.view.speculative is False, "MTP off"
            )
            assert status_of(app)[0] == "up"
            await sim_fault(url, {"clear": True})
            await wait_for(
                pilot, lambda: panel.view is not None and panel.view.speculative is True, "MTP on again"
            )
            await assert_numbers_match_fresh_attach(pilot, app, url)
            await pilot.press("ctrl+q")


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


@contextlib.contextmanager
def not_vllm_server() -> Iterator[int]:
    """An HTTP server that is not vLLM (Python's http.server: 404 on /metrics)."""
    from http.server import HTTPServer, SimpleHTTPRequestHandler

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_snapshot_connection_refused_dns_wrong_port_silent_port() -> None:
    one_error_line(run_mtpwatch("snapshot", f"http://127.0.0.1:{free_port()}"), "connection refused")
    one_error_line(
        run_mtpwatch("snapshot", "http://no-such-host.invalid:8000"), "not found (DNS lookup failed)"
    )
    with not_vllm_server() as port:
        one_error_line(run_mtpwatch("snapshot", f"http://127.0.0.1:{port}"), "not a vLLM server?")
    with silent_listener() as port:
        one_error_line(run_mtpwatch("snapshot", f"http://127.0.0.1:{port}"), "did not answer within 5 s")


async def test_connection_refused_then_the_server_comes() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: "connection refused" in status_of(app)[1], "connection refused")
        status, line = status_of(app)
        assert status in ("connecting", "down") and "retrying in" in line, line
        async with running_sim(speed=20, port=port):
            await wait_for(pilot, lambda: status_of(app)[0] == "up", "the server to come", 20)
            await assert_numbers_match_fresh_attach(pilot, app, url)
        await pilot.press("ctrl+q")


@pytest.mark.parametrize(
    ("kind", "on_screen"),
    [
        ("dns", "not found (DNS lookup failed)"),
        ("wrong-port", "not a vLLM server?"),
        ("silent", "did not answer within 5 s"),
    ],
)
async def test_unreachable_kinds_on_screen(kind: str, on_screen: str) -> None:
    with contextlib.ExitStack() as stack:
        if kind == "dns":
            url = "http://no-such-host.invalid:8000"
        elif kind == "wrong-port":
            url = f"http://127.0.0.1:{stack.enter_context(not_vllm_server())}"
        else:
            url = f"http://127.0.0.1:{stack.enter_context(silent_listener())}"
        app = make_app(AppConfig(servers=[ServerSpec(label="x", url=url)], display=FAST))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_for(pilot, lambda: on_screen in status_of(app)[1], on_screen, 15)
            status, line = status_of(app)
            assert status in ("connecting", "down") and "retrying in" in line, line
            assert "Traceback" not in line and "\n" not in line
            monitor_of(app.screen).send("hello")  # a prompt to a server that is not there: one clear error
            panel = monitor_of(app.screen).panels[0]
            if kind == "silent":
                # a stream may stay silent for minutes (long prefills): the user cancels it
                await wait_for(
                    pilot, lambda: "▶ hello" in "\n".join(panel.stream.lines), "the answer to begin"
                )
                await pilot.press("escape")
                await wait_for(pilot, lambda: panel.prompt_count == 1, "the prompt to be cancelled", 60)
                assert panel.last_summary is not None and panel.last_summary.cancelled
            else:
                await wait_for(pilot, lambda: panel.prompt_count == 1, "the prompt to fail", 15)
                assert panel.last_summary is not None and panel.last_summary.error
                assert "\n" not in panel.last_summary.error and "Traceback" not in panel.last_summary.error
            assert app.is_running
            await pilot.press("ctrl+q")
