"""The demo's first Enter, pressed at the first frame, gets both answers (issue 40, item 1).

The first frame offered "Enter sends the suggested prompt" while both simulators were still
starting; an Enter pressed then failed arm A with "connection refused" in a race (3 of 11 quick
tries). The console now holds the prompt until both arms are up, and the first frame says so.
Repeated 20 times, each with the demo's real simulators (subprocesses through the launcher), each
waiting for both answers with a generous deadline (never for a time or a count of frames).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING

import pytest
from textual.widgets import Static

from mtpwatch.commands.demo import demo_config
from mtpwatch.ui.app import make_app
from mtpwatch.ui.screens.monitor import SAMPLE_PROMPT
from mtpwatch.ui.widgets.prompt_input import PromptInput
from tests.feeds import monitor_of

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil

TRIES = 20


def _demo() -> object:
    """`mtpwatch demo` as its command builds it (suggested prompt in the box), short answers."""
    config = demo_config()
    display = dataclasses.replace(config.display, max_tokens=12)  # the race is at the connection
    return dataclasses.replace(config, prefill=SAMPLE_PROMPT, display=display)


@pytest.mark.parametrize("attempt", range(TRIES))
async def test_enter_at_the_first_frame_gets_both_answers(attempt: int, wait_until: WaitUntil) -> None:
    app = make_app(_demo())  # type: ignore[arg-type]
    async with app.run_test(size=(160, 48)) as pilot:
        screen = monitor_of(app.screen)
        title = str(screen.query_one("#title-bar", Static).render())
        assert screen.gate.waiting() == ("A", "B"), "the servers were up before the first frame"
        assert "sends the suggested prompt once A and B are up" in title, title
        # Enter's action (the Input's `enter` binding), at once: `pilot.press` first waits for the
        # app to be idle, which on a loaded machine is after the simulators are up (no race left).
        await screen.query_one(PromptInput).action_submit()
        await wait_until(pilot, lambda: screen.gate.pending is not None or screen.generating)
        if screen.gate.pending is not None:  # held, not sent: the title says what it waits for
            assert "prompt waiting for" in str(screen.query_one("#title-bar", Static).render())
        panels = screen.panels
        await wait_until(pilot, lambda: all(p.prompt_count >= 1 for p in panels), limit_s=120)
        for panel in panels:
            summary = panel.last_summary
            assert summary is not None and summary.error is None, summary
            assert summary.tokens > 0, summary
            assert SAMPLE_PROMPT[:40] in "\n".join(panel.stream.lines)
        assert "sends the suggested prompt" not in str(screen.query_one("#title-bar", Static).render())
        await pilot.press("ctrl+q")


async def test_a_prompt_held_for_an_arm_that_never_comes_up_is_given_back(wait_until: WaitUntil) -> None:
    config = _demo()
    a, b = config.servers  # type: ignore[attr-defined]
    assert a.launch is not None
    # A's "server" exits at once: it never comes up.
    dead = dataclasses.replace(a.launch, argv=(sys.executable, "-c", "import sys; sys.exit(3)"))
    config = dataclasses.replace(config, servers=[dataclasses.replace(a, launch=dead), b])  # type: ignore[type-var]
    app = make_app(config)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 48)) as pilot:
        screen = monitor_of(app.screen)
        box = screen.query_one(PromptInput)
        await box.action_submit()

        def a_status() -> str | None:  # the driver opens just after the first frame
            return screen.feeds[0].state().status if screen.opened else None

        await wait_until(pilot, lambda: screen.gate.pending is not None or a_status() == "failed")
        await wait_until(pilot, lambda: a_status() == "failed" and screen.gate.pending is None, 120)
        assert box.value == SAMPLE_PROMPT  # nothing lost: back in the box
        assert not screen.generating and all(p.prompt_count == 0 for p in screen.panels)
        # a notification reaches the app as a message: wait for it, do not read it at once
        await wait_until(
            pilot, lambda: any(str(n.message).startswith("A did not come up (") for n in app._notifications)
        )
        await pilot.press("ctrl+q")


async def test_a_quit_before_the_driver_opens_starts_no_server() -> None:
    """The driver opens just after the first frame (`MonitorScreen.open_driver`); a screen whose
    servers were stopped before that (a quit at the first frame) builds and starts nothing."""
    app = make_app(_demo(), autostart=False)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 48)) as pilot:
        screen = monitor_of(app.screen)
        assert screen.feeds == [] and screen.driver.cannot("send") is not None
        await screen.stop_servers()
        screen.open_driver()  # what the after-refresh callback would run now
        assert screen.feeds == [] and not screen.workers
        screen.stopping = False
        screen.open_driver()  # the same call, not stopped: sources built, servers starting
        assert len(screen.feeds) == 2 and screen.opened
        await screen.stop_servers()
        await pilot.press("ctrl+q")
