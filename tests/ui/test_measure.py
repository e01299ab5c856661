"""The A/B view's measurement (F6, restart schedule) and per-request acceptance, against the simulator."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, MeasureSettings, ServerSpec
from mtpwatch.core.launch import process
from mtpwatch.core.launch.vllm_cmd import build_sim_argv
from mtpwatch.core.metrics.attribution import PER_REQUEST_SCOPE
from mtpwatch.session.launching import StartupProgress
from mtpwatch.session.measure import FeedArm, measurement_prompt
from mtpwatch.session.sources import Source
from mtpwatch.session.watch import ServerFeed
from mtpwatch.sim.harness import running_sim
from mtpwatch.ui.app import make_app
from tests.feeds import monitor_of, server_feeds

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil

FAST = DisplaySettings(scrape_interval_s=0.1, max_tokens=24)


async def test_f6_measures_last_prompt_with_paired_runs(wait_until: WaitUntil) -> None:
    async with running_sim(speed=40, spec=False) as url_a, running_sim(speed=40) as url_b:
        config = AppConfig(
            servers=[ServerSpec(label="A", url=url_a), ServerSpec(label="B", url=url_b)],
            display=FAST,
            mode="ab",
        )
        app = make_app(dataclasses.replace(config, measure=MeasureSettings(runs=4, warmup=1)))
        async with app.run_test(size=(200, 50)) as pilot:
            monitor = monitor_of(app.screen)
            await wait_until(
                pilot, lambda: all(p.view is not None and p.view.status == "up" for p in monitor.panels)
            )
            await pilot.press(*"count to ten", "enter")
            await wait_until(pilot, lambda: all(p.prompt_count == 1 for p in monitor.panels))
            await pilot.press("f6")
            await wait_until(pilot, lambda: bool(monitor.ab.measurement_summaries), limit_s=40)
            summary = monitor.ab.measurement_summaries[-1]
            # 4 runs per arm, 1 warm-up dropped: 3 pairs of ABBA runs on one prompt
            assert "3 pairs" in summary and "median" in summary and "95 % CI" in summary
            assert "CV A" in summary and "alternate" in summary
            speedup = str(monitor.query_one("#speedup").render())
            assert "3 pairs" in speedup
            for panel in monitor.panels:
                panel.stream.flush()
                runs = [line for line in panel.stream.lines if "tok/s" in line and line.startswith("run ")]
                assert len(runs) == 3, panel.stream.lines  # the three measured runs of each arm
            assert not monitor.ab.measuring
            await pilot.press("ctrl+q")


async def test_escape_cancels_measurement_and_keeps_pairs(wait_until: WaitUntil) -> None:
    async with running_sim(speed=40, spec=False) as url_a, running_sim(speed=40) as url_b:
        config = AppConfig(
            servers=[ServerSpec(label="A", url=url_a), ServerSpec(label="B", url=url_b)],
            display=FAST,
            mode="ab",
        )
        app = make_app(dataclasses.replace(config, measure=MeasureSettings(runs=40, warmup=1)))
        async with app.run_test(size=(200, 50)) as pilot:
            monitor = monitor_of(app.screen)
            await wait_until(
                pilot, lambda: all(p.view is not None and p.view.status == "up" for p in monitor.panels)
            )
            assert monitor.ab.start_measurement([measurement_prompt("hello", 24)])
            await wait_until(
                pilot, lambda: "2 pairs" in str(monitor.query_one("#speedup").render()), limit_s=40
            )
            await pilot.press("escape")
            ab = monitor.ab
            await wait_until(pilot, lambda: not ab.measuring and bool(ab.measurement_summaries))
            summary = monitor.ab.measurement_summaries[-1]
            assert "cancelled" in summary and "pairs" in summary
            await pilot.press("ctrl+q")


async def test_per_request_metrics_label_the_summary(wait_until: WaitUntil) -> None:
    async with running_sim(speed=40, per_request_spec_metrics=True) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = monitor_of(app.screen).panels[0]
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press(*"hello", "enter")
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            summary = panel.last_summary
            feed = server_feeds(app.screen)[0]
            assert summary is not None and feed.prompt.request_spec is not None
            assert summary.scope == PER_REQUEST_SCOPE
            assert summary.acceptance_rate == feed.prompt.request_spec.acceptance_rate
            view = feed.view("prompt")
            assert view.scope == PER_REQUEST_SCOPE
            assert view.per_position == feed.prompt.request_spec.per_position
            await pilot.press("ctrl+q")


async def test_without_per_request_metrics_keeps_counter_attribution(wait_until: WaitUntil) -> None:
    async with running_sim(speed=40) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = monitor_of(app.screen).panels[0]
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press(*"hello", "enter")
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            assert panel.last_summary is not None and panel.last_summary.scope == "this request"
            assert server_feeds(app.screen)[0].prompt.request_spec is None
            await pilot.press("ctrl+q")


def _restart_config() -> AppConfig:
    servers = []
    for label, no_spec in (("A · MTP off", True), ("B · MTP on", False)):
        port = free_port()
        argv = build_sim_argv("gemma4-e4b-gb10", no_spec=no_spec, port=port, extra=["--speed", "40"])
        servers.append(
            ServerSpec(
                label=label,
                url=f"http://127.0.0.1:{port}",
                launch=LaunchSpec(argv=tuple(argv), kind="sim", startup_timeout_s=60.0),
            )
        )
    return AppConfig(servers=servers, display=FAST, mode="ab")


async def test_restart_schedule_one_server_at_a_time(wait_until: WaitUntil) -> None:
    events: list[tuple[float, str, bool]] = []
    pids: list[int] = []
    original = FeedArm.__init__

    def spy_init(
        self: FeedArm, feed: Source, progress: StartupProgress, on_up: Callable[[bool], None]
    ) -> None:
        assert isinstance(feed, ServerFeed)

        def on_up_spy(up: bool) -> None:
            events.append((time.monotonic(), self.label, up))
            if up and feed.process is not None:
                pids.append(feed.process.pid)
            on_up(up)

        original(self, feed, progress, on_up_spy)

    mp = pytest.MonkeyPatch()
    mp.setattr(FeedArm, "__init__", spy_init)
    try:
        prompts = (measurement_prompt("one two three", 16),)
        app = make_app(
            dataclasses.replace(
                _restart_config(),
                schedule="restart",
                measure=MeasureSettings(runs=3, warmup=1, restart=True, prompts=prompts),
            )
        )
        async with app.run_test(size=(200, 50)) as pilot:
            monitor = monitor_of(app.screen)
            await wait_until(pilot, lambda: bool(monitor.ab.measurement_summaries), limit_s=90)
            summary = monitor.ab.measurement_summaries[-1]
            assert "(restart," in summary and "2 pairs" in summary
            await pilot.press("ctrl+q")
    finally:
        mp.undo()
    # A, B, A sessions: up/down alternate and never overlap
    assert [(label[0], up) for _, label, up in events] == [
        ("A", True), ("A", False), ("B", True), ("B", False), ("A", True), ("A", False),
    ]  # fmt: skip
    assert all(f.process is None for f in server_feeds(monitor))
    assert len(pids) == 3
    for pid in pids:  # every server and its process group are gone
        assert not process.group_members(pid) and not process.descendants(pid)
