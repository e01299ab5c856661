"""The app attached to a replayed llama-server: its recorded /metrics (before, then after the prompt),
/v1/models, /props, /slots and completion stream (tests/data/llamacpp-*, sse-llamacpp-completions-timings.txt,
recorded from a real llama-server by tests/real_llamacpp/capture.py) served over real HTTP.

What a user saw before llama.cpp was an engine: 'down … (model … is not on this metrics page)', no
acceptance, and an answer whose token count was marked approximate.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from aiohttp import web

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.core.metrics.rates import delta_rates
from mtpwatch.core.metrics.snapshot import parse_snapshot
from mtpwatch.ui.app import make_app
from mtpwatch.ui.markup.panel import compact_numbers, render_header, render_numbers, render_summary
from tests.datadir import DataDir
from tests.feeds import monitor_of

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil

DATA = DataDir().root


def _page(name: str) -> Any:
    return json.loads((DATA / name).read_text())["page"]


class Replay:
    """Serves the recorded pages; /metrics switches from 'before' to 'after' once the stream ends."""

    def __init__(self) -> None:
        self.before = (DATA / "llamacpp-metrics-before.txt").read_text()
        self.after = (DATA / "llamacpp-metrics-after.txt").read_text()
        text = (DATA / "sse-llamacpp-completions-timings.txt").read_text()
        self.sse = text.split("\n\n", 1)[1].encode()
        self.streamed = False
        self.bodies: list[dict[str, Any]] = []

    async def metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=self.after if self.streamed else self.before, content_type="text/plain")

    async def models(self, _request: web.Request) -> web.Response:
        return web.json_response(_page("llamacpp-v1-models.json"))

    async def props(self, _request: web.Request) -> web.Response:
        return web.json_response(_page("llamacpp-props.json"))

    async def slots(self, _request: web.Request) -> web.Response:
        return web.json_response(_page("llamacpp-slots.json"))

    async def health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.json())
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in re.split(rb"(?<=\n\n)", self.sse):
            if event:
                await response.write(event)
        self.streamed = True
        await response.write_eof()
        return response


@asynccontextmanager
async def replayed_llama_server() -> AsyncIterator[tuple[str, Replay]]:
    replay = Replay()
    app = web.Application()
    app.router.add_get("/metrics", replay.metrics)
    app.router.add_get("/v1/models", replay.models)
    app.router.add_get("/props", replay.props)
    app.router.add_get("/slots", replay.slots)
    app.router.add_get("/health", replay.health)
    app.router.add_post("/v1/completions", replay.completions)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}", replay
    finally:
        await runner.cleanup()


async def test_attach_to_llama_server_shows_acceptance_and_exact_tokens(wait_until: WaitUntil) -> None:
    before = parse_snapshot((DATA / "llamacpp-metrics-before.txt").read_text())
    after = parse_snapshot((DATA / "llamacpp-metrics-after.txt").read_text())
    expected = delta_rates(before, after, 1.0, "prompt")
    async with replayed_llama_server() as (url, replay):
        display = DisplaySettings(scrape_interval_s=0.1, max_tokens=64)
        app = make_app(AppConfig(servers=[ServerSpec(label="llama.cpp", url=url)], display=display))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = monitor_of(app.screen).panels[0]
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            view = panel.view
            assert view is not None and view.status_detail == "" and view.engine == "llama.cpp"
            assert view.model == "gemma-llama-draft" and view.method == "draft-simple"
            assert view.speculative is True  # from /props, before this page's first draft counts
            header = render_header(view)
            assert "llama.cpp b" in header and "draft-simple k≤4" in header
            await pilot.press("f3", "f3")  # the 'this prompt' window
            await pilot.press(*"copy this", "enter")
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            summary = panel.last_summary
            assert summary is not None and summary.error is None
            assert summary.tokens == 64 and not summary.approximate
            assert "≈" not in render_summary(1, summary)
            assert summary.acceptance_rate == expected.acceptance_rate  # the final chunk's timings
            assert summary.scope == "this request (llama.cpp timings)"
            await wait_until(pilot, lambda: panel.view is not None and panel.view.drafts == expected.drafts)
            view = panel.view
            assert view is not None
            assert view.acceptance_rate == expected.acceptance_rate
            assert view.mean_acceptance_length == expected.mean_acceptance_length
            assert view.per_position == expected.per_position
            assert view.draft_note == f"drafts ≤ 4, mean {expected.draft_tokens / expected.drafts:.2f} tokens"
            numbers = render_numbers(view)
            assert "n/a: llama-server exports no TTFT/ITL/TPOT histograms" in numbers
            assert "n/a: llama-server exports no KV-cache gauge" in numbers
            assert "KV cache —" not in numbers and "TTFT —" not in numbers
            compact = compact_numbers(view, 78)
            assert "ITL n/a" in compact and "KV n/a" in compact
            await pilot.press("ctrl+q")
    # mtpwatch asked llama-server for per-chunk counts in its own way
    assert replay.bodies and replay.bodies[0].get("timings_per_token") is True
