"""The panel, the prompt's summary line and the verdict read one acceptance (`prompt_acceptance`)."""

from __future__ import annotations

from mtpwatch.commands.options import free_port
from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.http.engines import LlamaTimings
from mtpwatch.core.http.generation import RequestSpecMetrics
from mtpwatch.core.metrics.attribution import LLAMACPP_REQUEST_SCOPE, PER_REQUEST_SCOPE
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.session.scrapes import Page
from mtpwatch.session.views import PromptSummary, ServerView
from mtpwatch.session.watch import ServerFeed


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def snap(schema: str, drafts: float, accepted: float, running: float) -> MetricsSnapshot:
    return MetricsSnapshot(
        schema=schema,  # type: ignore[arg-type]
        model="m",
        speculative=True,
        num_speculative_tokens=2,
        drafts=drafts,
        draft_tokens=2 * drafts,
        accepted=accepted,
        accepted_per_pos=(accepted, 0.0),
        generation_tokens=drafts + accepted,
        requests_running=running,
    )


async def _prompt(
    schema: str, running: float, *, timings: LlamaTimings | None, spec: RequestSpecMetrics | None
) -> tuple[ServerView, ServerView, PromptSummary]:
    """One prompt on a feed whose counters say 1 % over 200 drafts (`running` requests at each scrape)."""
    clock = Clock()
    feed = ServerFeed(
        ServerSpec(label="A", url=f"http://127.0.0.1:{free_port()}"), DisplaySettings(), clock=clock
    )
    feed.watch.take(Page(snap(schema, 0, 0, 0)), clock.t)
    stats = feed.begin_prompt("hello")
    stats.timings = timings
    clock.t += 1.0
    feed.watch.take(Page(snap(schema, 100, 2, running)), clock.t)
    clock.t += 1.0
    feed.watch.take(Page(snap(schema, 200, 4, running)), clock.t)
    panel_streaming = feed.view("prompt")
    stats.spec_metrics = spec
    stats.completion_tokens = 400
    result = stats.finish(t=clock.t)
    feed.end_prompt(clock.t)
    answer = feed.close_prompt(result, clock.t)
    panel = feed.view("prompt")
    await feed.close()
    return panel_streaming, panel, answer.summary


async def test_llama_timings_reach_the_panel_as_well_as_the_summary_line() -> None:
    timings = LlamaTimings(predicted_n=400, draft_n=400, draft_n_accepted=300)
    streaming, panel, summary = await _prompt("llamacpp", 1, timings=timings, spec=None)
    for view in (streaming, panel):
        assert view.scope == LLAMACPP_REQUEST_SCOPE
        assert view.acceptance_rate == 0.75
    assert summary.scope == panel.scope and summary.acceptance_rate == panel.acceptance_rate
    assert summary.mean_acceptance_length == panel.mean_acceptance_length
    # the counters (1 %) would call the drafter broken; the verdict reads the 75 % beside it
    assert "failing" not in panel.verdict


async def test_vllm_per_request_metrics_rule_the_panel_summary_and_verdict() -> None:
    spec = RequestSpecMetrics(
        num_spec_steps=100, num_draft_tokens=200, num_accepted_draft_tokens=130, num_spec_tokens=2,
        acceptance_histogram=(20, 30, 50),
    )  # fmt: skip
    streaming, panel, summary = await _prompt("vllm", 3, timings=None, spec=spec)
    assert streaming.scope == "engine-wide"  # three requests ran; the per-request numbers come at the end
    assert "failing" in streaming.verdict  # what the counters beside it say: 1 % over 200 drafts
    assert panel.scope == summary.scope == PER_REQUEST_SCOPE
    assert panel.acceptance_rate == summary.acceptance_rate == 0.65
    assert panel.mean_acceptance_length == summary.mean_acceptance_length == 2.3
    assert panel.drafts == 100
    assert "failing" not in panel.verdict and "2.30" in panel.verdict


async def test_counters_alone_when_the_request_says_nothing() -> None:
    _, panel, summary = await _prompt("vllm", 1, timings=None, spec=None)
    assert panel.scope == summary.scope == "this request"
    assert panel.acceptance_rate == summary.acceptance_rate == 0.01
    assert "failing" in panel.verdict
