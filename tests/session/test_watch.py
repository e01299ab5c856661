"""ServerFeed without a terminal: views are pure, the sampler starts only when asked, retries back off."""

from __future__ import annotations

import time
from typing import Any

import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.ab.http_arm import HttpArm
from mtpwatch.session import server_watch as hardware_module
from mtpwatch.session import watch as feed_module
from mtpwatch.session.views import StartupView
from mtpwatch.session.watch import ServerFeed
from mtpwatch.ui.markup.panel import render_startup


class SpySampler:
    """Stands in for the NVML sampler thread; counts starts and stops."""

    started = 0
    stopped = 0

    def __init__(self, **kwargs: Any) -> None:
        pass

    def start(self) -> SpySampler:
        SpySampler.started += 1
        return self

    def stop(self, timeout: float = 5.0) -> None:
        SpySampler.stopped += 1

    def latest(self) -> None:
        return None


def _feed(port: int) -> ServerFeed:
    return ServerFeed(ServerSpec(label="A", url=f"http://127.0.0.1:{port}"), DisplaySettings())


async def test_view_never_starts_or_stops_the_sampler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware_module, "Sampler", SpySampler)
    SpySampler.started = SpySampler.stopped = 0
    feed = _feed(free_port())
    feed.watch.identified = True  # a loopback server, not simulated: a local GPU reading applies
    for window in ("10 s", "60 s", "prompt"):
        feed.view(window)
    assert (SpySampler.started, SpySampler.stopped) == (0, 0)
    feed.sample_hardware(True)
    feed.sample_hardware(True)  # idempotent
    feed.view("10 s")
    assert (SpySampler.started, SpySampler.stopped) == (1, 0)
    assert "no reading yet" in feed.view("10 s").bandwidth.hardware
    feed.sample_hardware(False)
    feed.view("10 s")
    assert (SpySampler.started, SpySampler.stopped) == (1, 1)
    await feed.close()


async def test_unreachable_server_backs_off_and_says_since_when() -> None:
    feed = _feed(free_port())  # nobody listens there
    delays = [await feed.poll() for _ in range(7)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert feed.watch.status == "down" and feed.watch.down_since is not None
    since = time.strftime("%H:%M:%S", time.localtime(feed.watch.down_since))
    detail = feed.view("10 s").status_detail
    assert detail.startswith(f"disconnected since {since} (") and detail.endswith("), retrying in 8.0 s")
    await feed.close()


async def test_first_failure_of_a_server_never_seen_reads_not_reachable() -> None:
    feed = _feed(free_port())
    assert await feed.poll() == 0.5
    assert feed.watch.status == "connecting"
    assert feed.view("10 s").status_detail.startswith("not reachable since ")
    await feed.poll()
    assert feed.watch.status == "down"
    await feed.close()


def test_startup_lines_are_escaped_by_the_render_function() -> None:
    failed = render_startup(StartupView(error="bad [b]tag", hint="pass --port"))
    assert failed == "[$error]failed: bad \\[b]tag[/]\n[$warning]hint: pass --port[/]"
    phase = render_startup(StartupView(phase="loading", elapsed_s=1.5, facts=("weights 1.0 GiB",)))
    assert phase == "[b]loading[/] · 1.5 s since start\n[dim]weights 1.0 GiB[/]"


async def test_a_server_that_comes_up_later_is_identified_once_it_answers() -> None:
    """Attach before the server is up: its version, model and roofline inputs are read once it is."""
    from mtpwatch.sim.harness import SimThread

    port = free_port()
    feed = _feed(port)
    await feed.poll()  # nothing listens yet
    assert feed.watch.status == "connecting" and not feed.watch.identified
    with SimThread(preset="gemma4-e4b-gb10", spec=True, port=port):
        await feed.poll()
        assert feed.watch.status == "up" and feed.watch.identified
        assert (
            feed.watch.version and feed.watch.model and feed.watch.method == "mtp"
        )  # /sim/info names the method
    await feed.close()


def test_the_console_paces_its_stream_reads_and_the_benchmarks_do_not() -> None:
    """The live console reads its answer at most every LIVE_READ_INTERVAL_S (one wake-up for a run of
    fast chunks); a benchmark's arm reads every chunk on arrival, since its ITLs are per chunk."""
    port = free_port()
    feed = _feed(port)
    assert feed.client._read_interval == feed_module.LIVE_READ_INTERVAL_S > 0
    arm = HttpArm(f"http://127.0.0.1:{port}")
    assert arm.client._read_interval == 0.0


async def test_the_feed_shows_the_drafted_share_of_a_schedule_that_skips_drafts() -> None:
    """A simulator whose schedule drafts only at batch size 1, kept at two requests by background
    load: most decode steps run at k=0, and the panel's view says how few drafted."""
    import asyncio

    from mtpwatch.sim.harness import running_sim
    from mtpwatch.ui.markup.panel import render_numbers

    async with running_sim(load=2, speed=20, k=4, k_schedule=((1, 1, 4), (2, 8, 0))) as url:
        feed = ServerFeed(ServerSpec(label="A", url=url), DisplaySettings())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60.0  # generous: only a failing run waits this long
        view = feed.view("10 s")
        while view.drafted_share is None or view.speculative is not True:
            assert loop.time() < deadline, "timed out waiting for a drafted share"
            await asyncio.sleep(min(await feed.poll(), 0.2))
            view = feed.view("10 s")
        await feed.close()
    assert view.drafted_share < 0.99 and view.k_schedule is None  # not launched here: no argv to read
    assert "drafted on [b]" in render_numbers(view, 160)
