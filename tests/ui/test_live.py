"""Pilot tests of the app against the simulator over real loopback sockets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.session.diagnosis import MIN_DRAFTS
from mtpwatch.sim.harness import running_sim
from mtpwatch.ui.app import MtpWatchApp, make_app
from mtpwatch.ui.widgets.server_panel import ServerPanel
from tests.feeds import monitor_of, opened_feeds, server_feeds

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil

FAST = DisplaySettings(scrape_interval_s=0.1, max_tokens=48)


def _panel(app: MtpWatchApp, i: int = 0) -> ServerPanel:
    return monitor_of(app.screen).panels[i]


async def test_attach_prompt_streams_and_summarises(wait_until: WaitUntil) -> None:
    async with running_sim(speed=20) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = _panel(app)
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            assert panel.view is not None and panel.view.speculative is True
            await pilot.press(*"hello there", "enter")
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            summary = panel.last_summary
            assert summary is not None and summary.error is None
            assert summary.tokens > 1 and summary.decode_tok_s is not None
            panel.stream.flush()
            assert any(line.strip() and not line.startswith("▶") for line in panel.stream.lines)
            # acceptance over the prompt's window is non-zero on an MTP server
            assert summary.acceptance_rate is not None and summary.acceptance_rate > 0
            await wait_until(pilot, lambda: bool(panel.view and panel.view.acceptance_rate))
            await pilot.press("ctrl+q")


async def test_server_dies_shows_disconnected_then_recovers(wait_until: WaitUntil) -> None:
    async with running_sim(speed=20) as url:
        port = int(url.rsplit(":", 1)[1])
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(120, 40)) as pilot:
            panel = _panel(app)
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await sim_fault(url, {"restart": True})
            await wait_until(pilot, lambda: panel.view is not None and panel.view.restarts == 1)
            await sim_fault(url, {"exit": True})
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "down")
            assert panel.view is not None and "disconnected since" in panel.view.status_detail
            assert "retrying in" in panel.view.status_detail
            async with running_sim(speed=20, port=port):
                await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press("ctrl+q")


async def test_server_exits_mid_stream_no_crash(wait_until: WaitUntil) -> None:
    async with running_sim(speed=1) as url:
        display = DisplaySettings(scrape_interval_s=0.1, max_tokens=2000)
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=display))
        async with app.run_test(size=(120, 40)) as pilot:
            panel = _panel(app)
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press(*"write a long story", "enter")
            await wait_until(pilot, lambda: len(panel.stream.lines) > 1 or bool(panel.stream.pending_text))
            await sim_fault(url, {"exit": True})
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            assert panel.last_summary is not None and panel.last_summary.error
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "down")
            assert app.is_running
            await pilot.press("ctrl+q")


async def sim_fault(url: str, body: dict[str, Any]) -> None:
    """Switch a simulator fault on (restart, exit, ...)."""
    import httpx

    async with httpx.AsyncClient() as http:
        await http.post(url + "/sim/fault", json=body)


async def test_escape_cancels_and_keeps_the_partial_answer(wait_until: WaitUntil) -> None:
    from mtpwatch.ui.widgets.token_stream import CANCEL_MARK

    async with running_sim(speed=1) as url:
        display = DisplaySettings(scrape_interval_s=0.1, max_tokens=4000)
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=display))
        async with app.run_test(size=(120, 40)) as pilot:
            panel = _panel(app)
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press(*"tell me a long story", "enter")
            await wait_until(pilot, lambda: len(panel.stream.lines) > 2)
            await pilot.press("escape")
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            assert not monitor_of(app.screen).generating
            summary = panel.last_summary
            assert summary is not None and summary.cancelled and summary.error is None
            lines = panel.stream.lines
            assert CANCEL_MARK in lines
            answer = lines[: lines.index(CANCEL_MARK)]
            assert sum(1 for line in answer if line.strip() and not line.startswith("▶")) >= 1
            assert "cancelled" in str(panel.query_one(".summary").render())
            await pilot.press("ctrl+q")


async def test_pause_freezes_display_while_collection_continues(wait_until: WaitUntil) -> None:
    async with running_sim(speed=20) as url:
        display = DisplaySettings(scrape_interval_s=0.1, max_tokens=200)
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=display))
        async with app.run_test(size=(120, 40)) as pilot:
            panel = _panel(app)
            feed = (await opened_feeds(pilot))[0]
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press("f2")
            assert app.paused and app.screen.has_class("-paused")
            frozen = panel.view
            monitor_of(app.screen).send("a prompt sent while paused")
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            latest = feed.watch.collector.latest
            assert latest is not None and latest.generation_tokens > 0  # collected meanwhile
            await pilot.pause(0.6)  # longer than one display tick (2 Hz): still frozen
            assert panel.view is frozen
            await pilot.press("f2")
            assert not app.paused
            assert panel.view is not frozen  # jumps to the collected numbers at once
            assert panel.view is not None and panel.view.server_tok_s
            await pilot.press("ctrl+q")


async def test_window_key_cycles_every_panel(wait_until: WaitUntil) -> None:
    async with running_sim(speed=20) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=FAST))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = _panel(app)
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            seen = []
            for _ in range(3):
                await pilot.press("f3")
                seen.append(monitor_of(app.screen).window)
                assert panel.view is not None and panel.view.window == monitor_of(app.screen).window
                title = str(app.screen.query_one("#title-bar").render())
                assert monitor_of(app.screen).window.replace("prompt", "this prompt") in title
            assert seen == ["60 s", "prompt", "10 s"]
            await pilot.press("ctrl+q")


async def test_roofline_and_verdict_from_the_simulator(wait_until: WaitUntil) -> None:
    async with running_sim(speed=20) as url:
        display = DisplaySettings(scrape_interval_s=0.1, max_tokens=96)
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=display))
        async with app.run_test(size=(200, 50)) as pilot:
            panel = _panel(app)
            await wait_until(
                pilot, lambda: panel.view is not None and panel.view.bandwidth.peak_gbps is not None
            )
            await pilot.press("f3", "f3")  # 'this prompt' window
            await pilot.press(*"hello", "enter")
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            feed = server_feeds(app.screen)[0]
            final = feed.rates("prompt")
            assert final is not None and final.drafts > 0
            # the panel draws views at 2 Hz: wait for one built after the prompt ended
            await wait_until(pilot, lambda: panel.view is not None and panel.view.drafts == final.drafts)
            assert panel.view is not None
            bw = panel.view.bandwidth
            assert bw.effective_gbps is not None
            assert bw.k == 2 and bw.binding in ("acceptance", "bandwidth", "compute")
            assert bw.ceiling_spec_tok_s is not None and bw.ceiling_baseline_tok_s is not None
            assert bw.context_tokens and bw.context_source
            assert bw.hardware.startswith("hardware: analytic only (simulated")
            verdict = panel.view.verdict
            assert verdict.removeprefix("hint: ").startswith("MTP is paying off")
            assert verdict.startswith("hint: ") is (final.drafts < MIN_DRAFTS)  # few drafts: a hint
            text = str(panel.query_one(".bandwidth").render())
            assert "speed-up ≤ min(" in text and "binds" in text
            await pilot.press("ctrl+q")


async def test_prompt_window_ends_with_the_prompt(wait_until: WaitUntil) -> None:
    async with running_sim(speed=20) as url:
        display = DisplaySettings(scrape_interval_s=0.1, max_tokens=96)
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=display))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = _panel(app)
            feed = (await opened_feeds(pilot))[0]
            await wait_until(pilot, lambda: panel.view is not None and panel.view.status == "up")
            await pilot.press("f3", "f3", *"hello", "enter")
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            first = feed.rates("prompt")
            assert first is not None and first.server_tok_s and first.drafts > 0
            scrapes = len(feed.watch.collector.tok_s_series())
            await wait_until(pilot, lambda: len(feed.watch.collector.tok_s_series()) >= scrapes + 5)
            later = feed.rates("prompt")  # idle scrapes since do not dilute it
            assert later is not None and later.server_tok_s == first.server_tok_s
            assert later.drafts == first.drafts
            await pilot.press("ctrl+q")


async def test_a_prompt_on_an_idle_server_scrapes_at_once(wait_until: WaitUntil) -> None:
    """With a 60 s idle interval the poll loop rests for a minute on an idle server: the prompt wakes
    it, so the prompt's window has scrapes while it streams, not only the one after its last token."""
    async with running_sim(speed=2) as url:
        display = DisplaySettings(scrape_interval_s=0.1, idle_interval_s=60.0, max_tokens=160)
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=display))
        async with app.run_test(size=(160, 48)) as pilot:
            panel = _panel(app)
            feed = (await opened_feeds(pilot))[0]
            await wait_until(pilot, lambda: bool(panel.view and panel.view.scrape.endswith("every 60 s")))
            await pilot.press(*"hello", "enter")
            await wait_until(pilot, lambda: feed.prompt.t0 is not None)
            t0 = feed.prompt.t0
            assert t0 is not None
            await wait_until(pilot, lambda: panel.prompt_count == 1)
            t1 = feed.prompt.t1
            assert t1 is not None
            during = [t for t, _ in feed.watch.collector.tok_s_series() if t0 < t < t1]
            assert during, "no scrape between the prompt's start and its last token"
            await pilot.press("ctrl+q")


async def test_at_the_default_interval_each_scrape_is_drawn_as_it_lands(wait_until: WaitUntil) -> None:
    """2 Hz scrapes, views at most 2 Hz a panel (`ViewPacer`): by the time the poll loop rests after a
    scrape, the panel shows a view built from that scrape, not one from the scrape before (a fixed
    2 Hz view tick drew it up to half a second later)."""
    async with running_sim(speed=20) as url:
        app = make_app(AppConfig(servers=[ServerSpec(label="sim", url=url)], display=DisplaySettings()))
        async with app.run_test(size=(120, 40)) as pilot:
            panel = _panel(app)
            feed = (await opened_feeds(pilot))[0]
            assert feed.display.scrape_interval_s == 0.5
            drawn_from: list[float | None] = []  # the newest scrape's time at each view shown
            at_rest: list[tuple[float | None, float | None]] = []  # (newest scrape, what the panel shows)
            show, rest = panel.show, feed.rest

            def recording_show(view: Any) -> None:
                drawn_from.append(feed.watch.collector.latest_t)
                show(view)

            async def checking_rest(delay: float) -> None:
                at_rest.append((feed.watch.collector.latest_t, drawn_from[-1] if drawn_from else None))
                await rest(delay)

            panel.show = recording_show  # type: ignore[method-assign]
            feed.rest = checking_rest  # type: ignore[method-assign]
            await wait_until(pilot, lambda: len(at_rest) >= 5)
            assert all(newest is not None and shown == newest for newest, shown in at_rest), at_rest
            await pilot.press("ctrl+q")
