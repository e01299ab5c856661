"""`demo --loop`: the built-in prompts in turn, a pause between answers, until quit."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.session.demo_loop import DemoLoop, loop_prompts
from mtpwatch.sim.harness import SimThread
from mtpwatch.ui.app import make_app
from mtpwatch.ui.screens.monitor import SAMPLE_PROMPT
from tests.feeds import monitor_of

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil


def test_the_loop_waits_for_idle_servers_then_pauses_between_prompts() -> None:
    loop = DemoLoop(["one", "two"], pause_s=4.0)
    assert loop.due(0.0, busy=False, ready=False) is None  # servers not up yet
    assert loop.due(1.0, busy=False, ready=True) == "one"  # the first goes at once
    assert loop.due(2.0, busy=True, ready=True) is None
    assert loop.due(10.0, busy=False, ready=True) is None  # idle since 10.0: pause first
    assert loop.due(13.9, busy=False, ready=True) is None
    assert loop.due(14.0, busy=False, ready=True) == "two"
    assert loop.due(30.0, busy=False, ready=True) is None
    assert loop.due(34.0, busy=False, ready=True) == "one"  # round and round
    prompts = loop_prompts(SAMPLE_PROMPT)
    assert prompts[0] == SAMPLE_PROMPT and len(prompts) > 3 and len(set(prompts)) == len(prompts)


async def test_demo_loop_sends_prompt_after_prompt_to_both_servers(wait_until: WaitUntil) -> None:
    with (
        SimThread(preset="gemma4-e4b-gb10", spec=False, speed=20) as url_a,
        SimThread(preset="gemma4-e4b-gb10", spec=True, speed=20) as url_b,
    ):
        config = AppConfig(
            servers=[ServerSpec(label="A", url=url_a), ServerSpec(label="B", url=url_b)],
            display=DisplaySettings(max_tokens=16),
            mode="ab",
        )
        app = make_app(dataclasses.replace(config, loop=True, prefill=SAMPLE_PROMPT))
        async with app.run_test(size=(80, 24)) as pilot:
            screen = monitor_of(app.screen)
            assert screen.loop is not None
            screen.loop.pause_s = 0.3
            await wait_until(pilot, lambda: all(p.prompt_count >= 3 for p in screen.panels), limit_s=60)
            # Every prompt sent was answered by both (none dropped or cut off by the next one).
            await wait_until(pilot, lambda: not screen.generating)
            counts = [p.prompt_count for p in screen.panels]
            assert counts[0] == counts[1] == screen.loop.sent, (counts, screen.loop.sent)
            assert all(p.last_summary and not p.last_summary.cancelled for p in screen.panels)
            assert "self-running demo" in str(screen.query_one("#title-bar").render())
            # A booth runs for hours: the answer panes hold the current prompt only.
            assert "\n".join(screen.panels[0].stream.lines).count("▶") <= 1
            await pilot.press("ctrl+q")
