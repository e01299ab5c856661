"""The k advisor's line in the A/B view, from a real prompt on two simulators (baseline, MTP k=4)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from textual.widgets import Static

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.core.sweeps.advisor import Advice, advise
from mtpwatch.core.sweeps.engine import engine_mode
from mtpwatch.session.advice import advice_for
from mtpwatch.sim.harness import running_sim
from mtpwatch.ui.app import make_app
from mtpwatch.ui.markup.ab import advice_groups
from mtpwatch.ui.pack import pack
from tests.feeds import monitor_of

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil


async def test_ab_view_names_the_k_it_would_choose(wait_until: WaitUntil) -> None:
    display = DisplaySettings(scrape_interval_s=0.1, max_tokens=96)
    async with (
        running_sim(speed=20, spec=False) as url_a,
        running_sim(speed=20, spec=True, k=4) as url_b,
    ):
        config = AppConfig(
            servers=[ServerSpec(label="A", url=url_a), ServerSpec(label="B", url=url_b)],
            display=display,
            mode="ab",
        )
        app = make_app(config)
        async with app.run_test(size=(200, 50)) as pilot:
            panels = monitor_of(app.screen).panels
            await wait_until(pilot, lambda: all(p.view is not None and p.view.status == "up" for p in panels))
            await pilot.press(*"Explain tides", "enter")
            await wait_until(pilot, lambda: all(p.prompt_count == 1 for p in panels), limit_s=60)
            advice = advice_for(monitor_of(app.screen).feeds[0], monitor_of(app.screen).feeds[1])
            assert advice is not None and advice.from_k == 4
            assert [p.k for p in advice.predictions] == [0, 1, 2, 3, 4]
            line = str(app.screen.query_one("#speedup", Static).render())
            assert "k advisor" in line
            await pilot.press("ctrl+q")


def render_advice(advice: Advice | None) -> str:
    """The advisor's groups on one line, as a wide speed-up line shows them."""
    return pack(advice_groups(advice), None)


def test_render_advice() -> None:
    keep = advise([0.9, 0.85], step_s=0.022, baseline_step_s=0.020)
    assert "keep k=2" in render_advice(keep)
    lower = advise([0.6, 0.2, 0.05, 0.01], step_s=0.060, baseline_step_s=0.020)
    text = render_advice(lower)
    assert f"k={lower.best_k}" in text and "k=4 now" in text
    assert render_advice(None) == ""


def test_render_advice_says_what_the_engine_runs() -> None:
    lower = advise([0.6, 0.2, 0.05, 0.01], step_s=0.060, baseline_step_s=0.020)
    assert "1 request at a time" in render_advice(lower)
    fly = engine_mode(
        {"method": "draft_model", "num_speculative_tokens": 4, "rejection_sample_method": "fly"}
    )
    text = render_advice(dataclasses.replace(lower, caveat=fly.caveat(), withheld=fly.advice_withheld))
    assert f"k={lower.best_k}" in text and "lossy: outputs differ by design" in text
    block = engine_mode({"method": "dflash", "num_speculative_tokens": 8})
    text = render_advice(dataclasses.replace(lower, caveat=block.caveat(), withheld=block.advice_withheld))
    assert "k advisor: none" in text and "block size" in text and f"k={lower.best_k}" not in text
