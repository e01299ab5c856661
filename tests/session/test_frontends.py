"""The monitor's view over both vLLM API servers the simulator serves: the Python one (Prometheus text,
`/metrics/?name[]=` honoured) and the Rust frontend of 0.33/0.34 (OpenMetrics, `/metrics` only, the spec
totals exported at 0 even without speculation, no `_created`). The same prompt gives the same kind of
numbers, each equal to the raw counter deltas of its own `/metrics` pages."""

from __future__ import annotations

import httpx
import pytest

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.metrics.snapshot import MetricsSnapshot, parse_snapshot
from mtpwatch.session.watch import ServerFeed
from mtpwatch.sim.harness import running_sim


async def page(url: str) -> tuple[str, MetricsSnapshot]:
    async with httpx.AsyncClient() as client:
        response = await client.get(url + "/metrics")
    return response.headers["content-type"], parse_snapshot(response.text)


@pytest.mark.parametrize("spec", [True, False], ids=["mtp", "baseline"])
@pytest.mark.parametrize("frontend", ["python", "rust"])
async def test_monitor_view_over_each_frontend(frontend: str, spec: bool) -> None:
    options = {"frontend": frontend, "vllm_log": "0.34-gpu", "spec": spec, "k": 3, "speed": 20.0}
    async with running_sim(preset="gemma4-e4b-gb10", **options) as url:
        feed = ServerFeed(ServerSpec(label="A", url=url), DisplaySettings(max_tokens=96))
        await feed.poll()
        idle = feed.view("prompt").speculative
        ctype, before = await page(url)
        answer = await feed.generate("Tell me about the printing press.", lambda _: None)
        _, after = await page(url)
        view = feed.view("prompt")
        await feed.close()
    assert answer.summary.tokens > 0
    assert view.version == "0.34.0"
    if frontend == "rust":
        assert ctype.startswith("application/openmetrics-text; version=1.0.0")
        assert (before.exposition, before.created) == ("openmetrics", None)
        # the Rust frontend has no /metrics/: the full page, and the panel's source line says why and
        # how a restart is seen there
        assert view.scrape.startswith("full page (OpenMetrics, filter refused: 404")
        assert "restarts: counters going down" in view.scrape
    else:
        assert ctype.startswith("text/plain; version=0.0.4")
        assert before.exposition == "prometheus" and before.created is not None
        assert view.scrape.startswith("filtered")
    assert view.speculative is spec
    # before any traffic: the Python server's page says; the Rust frontend's cannot (the spec totals
    # are there with or without a drafter), and a server mtpwatch did not launch has no log to ask
    assert idle is (None if frontend == "rust" else spec)
    assert view.server_tok_s is not None and view.server_tok_s > 0
    if not spec:
        assert view.acceptance_rate is None and view.k is None
        return
    assert view.k == 3
    drafted = after.draft_tokens - before.draft_tokens
    accepted = after.accepted - before.accepted
    assert drafted > 0
    assert view.acceptance_rate == pytest.approx(accepted / drafted)
    drafts = after.drafts - before.drafts
    assert view.mean_acceptance_length == pytest.approx(1 + accepted / drafts)


@pytest.mark.parametrize("frontend", ["python", "rust"])
async def test_a_restart_is_seen_on_each_frontend(frontend: str) -> None:
    """The Rust frontend has no `_created`: its restart shows as the counters going down, and the
    panel counts it as on the Python server (whose `_created` changes too)."""
    options = {"frontend": frontend, "vllm_log": "0.34-gpu", "k": 3, "speed": 20.0}
    async with running_sim(preset="gemma4-e4b-gb10", **options) as url:
        feed = ServerFeed(ServerSpec(label="A", url=url), DisplaySettings(max_tokens=48))
        await feed.poll()
        await feed.generate("Tell me about the printing press.", lambda _: None)
        async with httpx.AsyncClient() as client:
            await client.post(url + "/sim/fault", json={"restart": True})
            for _ in range(600):  # the restart is spawned: wait until the counters are back to 0
                if parse_snapshot((await client.get(url + "/metrics")).text).generation_tokens == 0:
                    break
        await feed.poll()  # sees the restart (and probes the new server at the next scrape)
        await feed.poll()
        view = feed.view("10 s")
        await feed.close()
    assert view.restarts == 1
    assert ("restarts: counters going down" in view.scrape) is (frontend == "rust")
