"""vLLM's mean acceptance length over-counts when the answer ends inside the accepted prefix
(vllm#56101; vLLM 0.34 counts before it trims: vllm/v1/core/sched/scheduler.py:2400 and 2892–2898).
The simulator does as vLLM does; the panel's summary line and `bench` say why the server's mean
length exceeds the client's tokens per step (issue 37, item 5)."""

from __future__ import annotations

from click.testing import CliRunner
from textual.content import Content

from mtpwatch.cli import cli
from mtpwatch.commands.options import free_port
from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.metrics import formulas as F
from mtpwatch.session.views import PromptSummary
from mtpwatch.session.watch import ServerFeed
from mtpwatch.sim.harness import SimThread
from mtpwatch.ui.markup.panel import render_summary

PRESET = "gemma4-e4b-gb10"


def test_the_formulas() -> None:
    assert F.client_tokens_per_step(7, 4) == 2.0  # 1 prefill token, then 6 over 3 decode steps
    assert F.client_tokens_per_step(1, 1) is None
    assert F.eos_overcount(3.0, 2.0) == 1.0
    assert F.eos_overcount(2.0, 2.0) is None and F.eos_overcount(1.9, 2.0) is None
    assert F.eos_overcount(None, 2.0) is None


def test_the_summary_line_says_why_at_any_width() -> None:
    s = PromptSummary(
        tokens=7,
        ttft_s=0.01,
        decode_tok_s=90.0,
        acceptance_rate=0.5,
        mean_acceptance_length=3.0,
        scope="this request",
        client_tokens_per_step=2.0,
        eos_overcount=1.0,
    )
    wide = Content.from_markup(render_summary(1, s)).plain
    assert "len 3.00" in wide and "len > 2.00 tokens/step received" in wide and "vllm#56101" in wide
    narrow = Content.from_markup(render_summary(1, s, compact=True, width=56)).plain
    assert "vllm#56101" in narrow


async def test_a_short_answer_on_the_simulator_shows_the_overcount_and_says_why() -> None:
    port = free_port()
    display = DisplaySettings(max_tokens=10, temperature=0.0)
    feed = ServerFeed(ServerSpec(label="B", url=f"http://127.0.0.1:{port}"), display)
    flagged = None
    with SimThread(preset=PRESET, spec=True, k=4, port=port):
        await feed.poll()
        for i in range(40):  # until one answer ends inside an accepted prefix (about one in two)
            answer = await feed.generate(f"Name a colour ({i}).", lambda text: None)
            s = answer.summary
            assert s.error is None and s.client_tokens_per_step is not None
            if s.eos_overcount is not None:
                flagged = s
                break
            # not flagged: the server's length is not above what the client received
            assert (
                s.mean_acceptance_length is None
                or s.mean_acceptance_length <= s.client_tokens_per_step + 0.005
            )
    await feed.close()
    assert flagged is not None, "no short answer ended inside an accepted prefix"
    assert flagged.mean_acceptance_length is not None and flagged.client_tokens_per_step is not None
    assert flagged.mean_acceptance_length > flagged.client_tokens_per_step
    assert flagged.scope.startswith("this request")
    assert "vllm#56101" in Content.from_markup(render_summary(1, flagged)).plain


def test_bench_says_why_the_servers_length_exceeds_the_clients() -> None:
    with (
        SimThread(preset=PRESET, spec=False, speed=20) as a,
        SimThread(preset=PRESET, spec=True, k=4, speed=20) as b,
    ):
        args = [
            "bench",
            "--ab",
            a,
            b,
            "--prompts",
            "short",
            "--limit",
            "2",
            "--runs",
            "3",
            "--max-tokens",
            "12",
        ]
        res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert (
        "warning: arm B: the server's mean acceptance length exceeds the client's tokens per step in" in flat
    )
    assert "vLLM counts drafts accepted past the answer's end (vllm#56101)" in flat
    assert "arm A: the server's mean acceptance length" not in flat  # no drafts, nothing to over-count
