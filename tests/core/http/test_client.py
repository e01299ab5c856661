"""VllmClient GET side (scrape, health, models, version), one-line errors, URLs, backoff, status."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.core.http.backoff import Backoff, ConnectionState
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.engines import ModelEntry
from mtpwatch.core.http.errors import (
    AuthError,
    HttpStatusError,
    NotVllmError,
    ServerError,
    ServerTimeout,
    ServerUnreachable,
)
from mtpwatch.core.http.urls import normalize_url, same_server
from tests.datadir import DataDir

BASE = "http://127.0.0.1:8000"
PROM = "text/plain; version=0.0.4; charset=utf-8"


# ------------------------------------------------------------------------------------------------ URLs


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("  localhost:8000/v1 ", "http://localhost:8000"),
        ("http://spark.local:8000/v1/", "http://spark.local:8000"),
        ("HTTPS://Box.Example.com:443/metrics", "https://box.example.com:443"),
        ("http://gw:8080/vllm/v1", "http://gw:8080/vllm"),
        ("[::1]:8000", "http://[::1]:8000"),
        ("http://host:8000/v1/chat/completions", "http://host:8000"),
        ("my_host", "http://my_host"),
    ],
)
def test_normalize_url_accepts(given: str, expected: str) -> None:
    assert normalize_url(given) == expected


@pytest.mark.parametrize(
    ("given", "fragment"),
    [
        ("", "empty"),
        ("ftp://host:21", "scheme"),
        ("http://:8000", "no host"),
        ("8000", "no host"),
        ("host:99999", "port"),
        ("host:abc", "port"),
        ("host:0", "port"),
        ("http://ho st:8000", "not a valid host"),
        ("http://user:pw@host:8000", "credentials"),
        ("http://host:8000/?x=1", "query"),
    ],
)
def test_normalize_url_rejects_with_one_line(given: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment) as info:
        normalize_url(given)
    assert "\n" not in str(info.value)


def test_client_rejects_a_bad_url() -> None:
    with pytest.raises(ValueError, match="scheme"):
        VllmClient("gopher://x:1")


# -------------------------------------------------------------------------------------------- scraping


def mock(handler: Callable[[httpx.Request], httpx.Response], **kw: Any) -> VllmClient:
    return VllmClient(BASE, transport=httpx.MockTransport(handler), **kw)


async def test_scrape_text_returns_page_and_sends_key(monkeypatch: pytest.MonkeyPatch, data: DataDir) -> None:
    page = data.text("metrics-ngram-k4-after.txt")
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text=page, headers={"content-type": PROM})

    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    async with mock(handler) as client:
        assert await client.scrape_text() == page
        assert await client.scrape_text() == page
    assert seen[0].url == httpx.URL(BASE + "/metrics")
    assert seen[0].headers["authorization"] == "Bearer from-env"
    async with mock(handler, api_key="explicit") as client:
        await client.scrape_text()
    assert seen[-1].headers["authorization"] == "Bearer explicit"
    monkeypatch.delenv("VLLM_API_KEY")
    async with mock(handler) as client:
        await client.scrape_text()
    assert "authorization" not in seen[-1].headers


async def test_scrape_parses_snapshot(data: DataDir) -> None:
    page = data.text("metrics-ngram-k4-after.txt")
    async with mock(lambda r: httpx.Response(200, text=page, headers={"content-type": PROM})) as client:
        snapshot = await client.scrape()
    assert snapshot.schema == "vllm" and snapshot.speculative and snapshot.num_speculative_tokens == 4


async def test_scrape_of_page_without_vllm_families_lets_caller_decide() -> None:
    page = "# HELP python_gc_objects_collected_total x\n# TYPE python_gc_objects_collected_total counter\n"
    page += 'python_gc_objects_collected_total{generation="0"} 12.0\n'
    async with mock(lambda r: httpx.Response(200, text=page, headers={"content-type": PROM})) as client:
        snapshot = await client.scrape()
    assert snapshot.schema == "none"


def raising(exc: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


def chained(outer: httpx.TransportError, cause: BaseException) -> httpx.TransportError:
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("handler", "kind", "message"),
    [
        (
            raising(
                chained(
                    httpx.ConnectError("All connection attempts failed"), ConnectionRefusedError(111, "x")
                )
            ),
            ServerUnreachable,
            f"cannot connect to {BASE}: connection refused — is the server running?",
        ),
        (
            raising(
                chained(httpx.ConnectError("[Errno -2]"), socket.gaierror(-2, "Name or service not known"))
            ),
            ServerUnreachable,
            "host 127.0.0.1 not found (DNS lookup failed)",
        ),
        (raising(httpx.ConnectTimeout("timed out")), ServerTimeout, "no answer within 5 s"),
        (raising(httpx.ReadTimeout("timed out")), ServerTimeout, f"{BASE}/metrics did not answer within 5 s"),
        (lambda r: httpx.Response(401), AuthError, "pass --api-key or set VLLM_API_KEY"),
        (lambda r: httpx.Response(403), AuthError, "VLLM_API_KEY"),
        (lambda r: httpx.Response(404), NotVllmError, "404 Not Found — not a vLLM server?"),
        (lambda r: httpx.Response(503), HttpStatusError, "503 Service Unavailable: server error"),
        (
            lambda r: httpx.Response(500, json={"error": {"message": "boom\nsecond line"}}),
            HttpStatusError,
            "500 Internal Server Error: server error: boom second line",
        ),
        (
            lambda r: httpx.Response(
                200, text="<html><body>router</body></html>", headers={"content-type": "text/html"}
            ),
            NotVllmError,
            "did not return Prometheus text (got text/html)",
        ),
        (lambda r: httpx.Response(200, json={"status": "ok"}), NotVllmError, "got application/json"),
    ],
)
async def test_scrape_errors_are_one_actionable_line(
    handler: Callable[[httpx.Request], httpx.Response], kind: type[ServerError], message: str
) -> None:
    async with mock(handler, api_key="") as client:
        with pytest.raises(kind) as info:
            await client.scrape_text()
    text = str(info.value)
    assert message in text
    assert "\n" not in text and len(text) < 240


async def test_rejected_key_says_so() -> None:
    async with mock(lambda r: httpx.Response(401), api_key="wrong") as client:
        with pytest.raises(AuthError, match="API key was rejected"):
            await client.scrape_text()


async def test_scrape_invalid_prometheus_text_is_not_vllm() -> None:
    page = 'vllm:generation_tokens_total{model_name="m" 12\n'
    async with mock(lambda r: httpx.Response(200, text=page, headers={"content-type": PROM})) as client:
        with pytest.raises(NotVllmError, match="valid Prometheus text"):
            await client.scrape()


async def test_real_refused_connection() -> None:
    port = free_port()  # nothing listens there now
    async with VllmClient(f"127.0.0.1:{port}", timeout=10) as client:
        with pytest.raises(ServerUnreachable) as info:
            await client.scrape_text()
        assert (
            str(info.value)
            == f"cannot connect to http://127.0.0.1:{port}: connection refused — is the server running?"
        )


# ------------------------------------------------------------------------------------- models, version


def routes(table: dict[str, httpx.Response]) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        return table.get(request.url.path, httpx.Response(404))

    return handler


MODELS = {
    "object": "list",
    "data": [
        {
            "id": "gemma",
            "object": "model",
            "root": "/models/gemma-4-E4B-it",
            "parent": None,
            "max_model_len": 8192,
        },
        {"id": "lora1", "object": "model", "root": "/loras/a", "parent": "gemma", "max_model_len": 8192},
    ],
}


async def test_models_version() -> None:
    table = {
        "/v1/models": httpx.Response(200, json=MODELS),
        "/version": httpx.Response(200, json={"version": "0.32.0"}),
    }
    async with mock(routes(table)) as client:
        assert await client.models() == [
            ModelEntry("gemma", "/models/gemma-4-E4B-it", 8192, None),
            ModelEntry("lora1", "/loras/a", 8192, "gemma"),
        ]
        assert await client.version() == "0.32.0"
    async with mock(routes({})) as client:
        assert await client.version() is None  # no /version: not an error
        with pytest.raises(NotVllmError, match="not an OpenAI-compatible server"):
            await client.models()
    async with mock(routes({"/v1/models": httpx.Response(200, json={"hello": 1})})) as client:
        with pytest.raises(NotVllmError, match="OpenAI model list"):
            await client.models()


# ----------------------------------------------------------------------------- Backoff, ConnectionState


def test_backoff_sequence_cap_and_reset() -> None:
    backoff = Backoff()
    assert [backoff.next() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_backoff_refuses_a_shrinking_sequence() -> None:
    with pytest.raises(ValueError):
        Backoff(initial=2.0, maximum=1.0)


def test_connection_state_down_and_up() -> None:
    now = [1_000_000.0]
    state = ConnectionState(clock=lambda: now[0])
    assert state.status.state == "unknown"
    assert state.success().state == "up"
    now[0] += 10
    down = state.failure("connection refused")
    assert down.state == "down" and down.since == 1_000_010.0 and down.failures == 1
    now[0] += 2
    down = state.failure("timeout")
    assert down.since == 1_000_010.0 and down.failures == 2 and down.reason == "timeout"
    now[0] += 10
    up = state.success()
    assert up.state == "up" and up.since == 1_000_022.0 and up.failures == 0
    assert state.failure("reset").failures == 1  # a new outage counts from one


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("127.0.0.1:8000", "http://localhost:8000/v1", True),
        ("http://[::1]:8000/metrics", "localhost:8000", True),
        ("http://localhost", "127.0.0.1:80", True),
        ("127.0.0.1:8000", "127.0.0.1:8001", False),
        ("https://gpu1:8000", "http://gpu1:8000", False),
        ("gpu1:8000", "gpu2:8000", False),
        ("ftp://x", "ftp://x", False),  # not a server URL: never "the same server"
    ],
)
def test_same_server(a: str, b: str, same: bool) -> None:
    assert same_server(a, b) is same and same_server(b, a) is same
