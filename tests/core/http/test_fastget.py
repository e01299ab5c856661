"""The fast /metrics GET of the monitor and the fleet: the same text as httpx, chunked bodies,
keep-alive, and the fallback to httpx for redirects and errors (whose words stay the monitor's)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import ServerError
from mtpwatch.core.http.fastget import FastGet, FastGetUnsupported
from mtpwatch.sim.harness import running_sim

PAGE = "".join(f'vllm:generation_tokens_total{{engine="{i}",model_name="m"}} {i}.0\n' for i in range(2000))


@contextlib.asynccontextmanager
async def server() -> AsyncIterator[tuple[str, list[web.Request]]]:
    seen: list[web.Request] = []

    async def chunked(request: web.Request) -> web.StreamResponse:
        seen.append(request)
        resp = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(0, len(PAGE), 7000):
            await resp.write(PAGE[i : i + 7000].encode())
        await resp.write_eof()
        return resp

    async def moved(request: web.Request) -> web.Response:
        seen.append(request)
        raise web.HTTPTemporaryRedirect("/sub/metrics/")

    async def sub(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(text=PAGE, content_type="text/plain")

    async def broken(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(status=500, text="engine dead")

    async def stuck(request: web.Request) -> web.Response:
        seen.append(request)
        await asyncio.sleep(2)
        return web.Response(text=PAGE, content_type="text/plain")

    async def html(request: web.Request) -> web.Response:
        seen.append(request)
        return web.Response(text="<html>hello</html>", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", chunked)
    app.router.add_get("/sub/metrics", moved)
    app.router.add_get("/sub/metrics/", sub)
    app.router.add_get("/bad/metrics", broken)
    app.router.add_get("/stuck/metrics", stuck)
    app.router.add_get("/html/metrics", html)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        await runner.cleanup()


async def test_same_text_as_httpx_on_the_simulator_and_keep_alive() -> None:
    async with running_sim(load=0) as url:
        fast = FastGet(url, api_key="k1")
        a = await fast.get()
        b = await fast.get()
        writer = fast._writer
        c = await fast.get()
        assert fast._writer is writer, "the connection is kept alive"
        fast.close()
        async with httpx.AsyncClient() as client:
            expect = (await client.get(url + "/metrics")).text

    def vllm(text: str) -> list[str]:  # process_* gauges (memory, CPU) move between two GETs
        return [line for line in text.splitlines() if line.startswith("vllm:")]

    assert vllm(a) == vllm(b) == vllm(c) == vllm(expect) and len(vllm(a)) > 100


async def test_chunked_redirect_and_error_fallbacks() -> None:
    """`VllmClient.scrape_text` (the monitor's and the fleet's scrape) takes the fast path and falls
    back to httpx, which words every error as before."""
    async with server() as (base, seen):
        fast = FastGet(base, api_key="secret")
        assert await fast.get() == PAGE
        assert seen[-1].headers["Authorization"] == "Bearer secret"
        fast.close()
        async with VllmClient(base, api_key="secret") as client:
            assert await client.scrape_text() == PAGE
            assert client._fast_get is not None and client._fast_get._writer is not None  # fast, kept alive
        with pytest.raises(FastGetUnsupported):
            await FastGet(base + "/sub").get()
        async with VllmClient(base + "/sub") as client:
            assert await client.scrape_text() == PAGE  # httpx followed the redirect
            n = len(seen)
            assert await client.scrape_text() == PAGE
            assert [r.path for r in seen[n:]] == ["/sub/metrics", "/sub/metrics/"]  # httpx only now
        async with VllmClient(base + "/bad") as client:
            with pytest.raises(ServerError, match="answered 500"):
                await client.scrape_text()
            assert client._fast_get is not None  # an error status does not give up the fast path
        async with VllmClient(base + "/html") as client:
            with pytest.raises(ServerError, match="did not return Prometheus text"):
                await client.scrape_text()
        async with VllmClient(base + "/stuck", timeout=0.5) as client:
            with pytest.raises(ServerError, match=r"did not answer within 0.5 s"):
                await client.scrape_text()
            assert [r.path for r in seen[-1:]] == ["/stuck/metrics"]  # timed out once, not twice
    async with VllmClient("http://127.0.0.1:9") as client:
        with pytest.raises(ServerError, match="connection refused"):
            await client.scrape_text()
