"""A server that redirects the generation POST (a gateway in front of vLLM answering 307): the fast
streaming path (`core.http.faststream`) cannot follow it, so `VllmClient` hands the request to httpx,
which follows it, and stays on httpx for the next generations. (The /metrics redirect of some vLLM
builds, on the GET side: tests/core/http/test_fastget.py.)"""

from __future__ import annotations

import asyncio
from http.server import BaseHTTPRequestHandler

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest
from mtpwatch.sim.harness import running_sim
from tests.httpd import loopback_server

REQUEST = GenerationRequest("Explain memory bandwidth.", max_tokens=40, return_token_ids=True)


def redirect_to(target: str, seen: list[str]) -> type[BaseHTTPRequestHandler]:
    """A handler answering every POST with 307 to the same path on `target`; notes each path asked."""

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(self.path)
            self.send_response(307)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Redirect


async def test_a_redirected_stream_is_followed_through_httpx() -> None:
    async with running_sim(speed=200, seed=3) as url, VllmClient(url, fast_stream=False) as direct:
        expected = await asyncio.wait_for(direct.generate(REQUEST), 60)
    seen: list[str] = []
    async with running_sim(speed=200, seed=3) as url:
        with loopback_server(redirect_to(url, seen)) as gateway:
            async with VllmClient(gateway, fast_stream=True) as client:
                first = await asyncio.wait_for(client.generate(REQUEST), 60)
                assert client.fast_stream is False  # a redirect: httpx from now on
                assert seen == ["/v1/completions", "/v1/completions"]  # the fast path, then httpx
                second = await asyncio.wait_for(client.generate(REQUEST), 60)
    assert seen == ["/v1/completions"] * 3  # the second generation went to httpx at once
    for result in (first, second):
        assert result.error is None and result.finish_reason == "length"
        assert result.completion_tokens == 40
        assert (result.text, result.token_ids) == (expected.text, expected.token_ids)
