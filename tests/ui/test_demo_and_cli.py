"""The demo path (simulator subprocesses through the launcher) and CLI input errors."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from click.testing import CliRunner
from textual.pilot import Pilot

from mtpwatch.commands.demo import demo_config
from mtpwatch.ui.app import make_app


async def wait_until(pilot: Pilot[Any], predicate: Callable[[], bool], limit_s: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not met before the timeout")
        await pilot.pause(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_demo_starts_and_stops_its_servers() -> None:
    config = demo_config()
    assert [s.launch is not None and s.launch.kind == "sim" for s in config.servers] == [True, True]
    app = make_app(config)
    async with app.run_test(size=(120, 40)) as pilot:
        feeds = app.monitor.feeds
        await wait_until(
            pilot,
            lambda: all(p.view is not None and p.view.status == "up" for p in app.monitor.panels),
            limit_s=60,
        )
        pids = [feed.process.pid for feed in feeds]
        assert all(_alive(pid) for pid in pids)
        views = [p.view for p in app.monitor.panels]
        assert views[0] is not None and views[0].speculative is False
        assert views[1] is not None and views[1].speculative is True
        await pilot.press("ctrl+q")
    assert not any(_alive(pid) for pid in pids)


def test_attach_bad_url_is_one_line_before_the_tui() -> None:
    from mtpwatch.cli import cli

    result = CliRunner().invoke(cli, ["attach", "ftp://nowhere"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "URL" in result.output


def test_ab_needs_two_urls_or_start() -> None:
    from mtpwatch.cli import cli

    result = CliRunner().invoke(cli, ["ab", "http://127.0.0.1:1"])
    assert result.exit_code == 2
    assert "two URLs" in result.output
