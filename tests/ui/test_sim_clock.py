"""A figure past a physical limit says why: under `mtpwatch sim --speed 10` the simulator's clock
runs 10× faster than the GPU it models (its /sim/info says so), so BW reads ~600 % of the peak."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from textual.widgets import Static

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.session.bandwidth_inputs import BandwidthModel
from mtpwatch.session.views import BandwidthView, clock_note
from mtpwatch.sim.harness import running_sim
from mtpwatch.ui.app import make_app
from mtpwatch.ui.markup.roofline import render_bandwidth, render_bandwidth_short
from mtpwatch.ui.widgets.server_panel import ServerPanel
from tests.feeds import monitor_of

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil

PAST = BandwidthView(
    gpu="GB10 (simulated)",
    peak_gbps=273.0,
    effective_gbps=1641.0,
    percent_of_peak=601.0,
    ceiling_baseline_tok_s=29.3,
    tok_s=180.0,
    pct_of_ceiling=614.0,
)


def test_a_sped_up_clock_is_named_next_to_the_figure() -> None:
    sped = replace(PAST, clock_speed=10.0)
    assert "(sim ×10 clock)" in render_bandwidth_short(sped)
    full = render_bandwidth(sped, "10 s", 78)
    assert "simulated ×10 clock" in full and "mtpwatch sim --speed 10" in full
    # Marked at any figure: every rate of a sped-up simulator is 10× the modelled GPU's.
    low = replace(sped, percent_of_peak=60.0, pct_of_ceiling=61.0)
    assert "sim ×10 clock" in render_bandwidth_short(low)


def test_past_the_peak_on_a_real_clock_says_what_to_check() -> None:
    assert PAST.past_peak
    assert "check --model-config" in render_bandwidth_short(PAST)
    assert "over the physical peak" in render_bandwidth(PAST, "10 s", 78)
    fine = replace(PAST, percent_of_peak=62.0, pct_of_ceiling=63.0)
    assert not fine.past_peak and clock_note(fine) == ""
    assert render_bandwidth_short(fine).split("GB/s")[-1] == " [dim](analytic)[/]"  # a label, no warning


async def test_the_app_learns_the_clock_from_sim_info() -> None:
    for speed in (1.0, 10.0):
        async with running_sim(speed=speed) as url:
            model = BandwidthModel(DisplaySettings())
            await model.load(url)
            assert model.simulated and model.clock_speed == speed


async def test_attached_to_sim_speed_10_the_panel_says_why(wait_until: WaitUntil) -> None:
    async with running_sim(speed=10) as url:
        display = DisplaySettings(scrape_interval_s=0.1, max_tokens=64)
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=display))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = monitor_of(app.screen).panels[0]
            assert isinstance(panel, ServerPanel)
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press(*"Explain memory bandwidth", "enter")

            def past_peak() -> bool:
                bw = panel.view.bandwidth if panel.view is not None else None
                return bw is not None and (bw.percent_of_peak or 0) > 100

            await wait_until(pilot, past_peak, limit_s=60)
            assert panel.view is not None and panel.view.bandwidth.clock_speed == 10.0
            await wait_until(
                pilot,
                lambda: "simulated ×10 clock" in str(panel.query_one(".bandwidth", Static).render()),
            )
            await pilot.press("ctrl+q")


def test_tok_s_over_the_ceiling_within_the_peak_is_not_called_past_the_peak() -> None:
    """% of the ceiling = % of peak × tokens per step / the window's τ: it passes 100 when the
    acceptance window lags the tok/s (a prompt starting after idle), with the bandwidth at 60 %.
    That is no physical limit: the BW figure must not say '> peak', the ceiling line says why."""
    lagging = replace(PAST, percent_of_peak=60.0, pct_of_ceiling=104.0, k=2, tau=1.29)
    assert not lagging.past_peak and lagging.past_ceiling
    assert "peak" not in render_bandwidth_short(lagging).split("GB/s")[-1]
    assert clock_note(lagging) == ""
    assert "more tokens per step than the window's τ" in render_bandwidth(lagging, "10 s", 78)
    assert not replace(lagging, clock_speed=10.0).past_ceiling  # the sim's clock note says it all
