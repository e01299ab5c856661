"""The demo path (simulator subprocesses through the launcher) and CLI input errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from click.testing import CliRunner

from mtpwatch.commands.demo import demo_config
from mtpwatch.ui.app import make_app
from tests.feeds import monitor_of, opened_feeds, server_process

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil


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


async def test_demo_starts_and_stops_its_servers(wait_until: WaitUntil) -> None:
    config = demo_config()
    assert [s.launch is not None and s.launch.kind == "sim" for s in config.servers] == [True, True]
    app = make_app(config)
    async with app.run_test(size=(120, 40)) as pilot:
        feeds = await opened_feeds(pilot)
        await wait_until(
            pilot,
            lambda: all(p.view is not None and p.view.status == "up" for p in monitor_of(app.screen).panels),
            limit_s=60,
        )
        pids = [server_process(feed).pid for feed in feeds]
        assert all(_alive(pid) for pid in pids)
        views = [p.view for p in monitor_of(app.screen).panels]
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


async def test_screenshots_are_filmed_from_the_simulator(tmp_path: Path) -> None:
    from mtpwatch.commands.screenshots import write_screenshots
    from mtpwatch.sim.presets import DEFAULT_PRESET, get_preset

    written = await write_screenshots(tmp_path, speed=20, max_tokens=24, startup_delay=1.5)
    views = ("monitor", "ab", "ab-measure", "compact", "compact-single", "help", "start", "disconnected")
    assert sorted(p.stem for p in written) == sorted((*views, "fleet", "replay"))
    preset = get_preset(DEFAULT_PRESET)
    ab = (tmp_path / "ab.svg").read_text(encoding="utf-8")
    assert f"MTP&#160;k={preset.k}" in ab and "lossless" in ab and "20×&#160;speed" in ab
    assert "disconnected" in (tmp_path / "disconnected.svg").read_text(encoding="utf-8")
