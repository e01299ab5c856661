"""Drivers: a live session sends and measures but cannot seek; a replay seeks and says why it does
nothing else."""

from __future__ import annotations

import asyncio
import time

from mtpwatch.config import AppConfig, ServerSpec
from mtpwatch.session.drivers import LiveDriver
from mtpwatch.session.replay import ReplayDriver, ReplaySource
from tests.session.test_real_recording import RECORDING


def test_a_live_driver_refuses_only_what_its_servers_cannot_do() -> None:
    one = AppConfig(servers=[ServerSpec(label="A", url="http://127.0.0.1:1")])
    driver = LiveDriver(one, clock=time.monotonic)
    # the monitor opens its driver just after its first frame: until then it says so
    setting_up = "The servers are being set up: try again in a moment."
    assert driver.cannot("send") == driver.cannot("measure") == setting_up
    assert driver.open() is None and len(driver.sources) == 1
    assert driver.cannot("send") is None
    assert driver.cannot("measure") == "Measuring needs two servers (mtpwatch ab / demo)."
    assert driver.cannot("seek") is not None
    asyncio.run(driver.stop())
    empty = LiveDriver(AppConfig(servers=[]), clock=time.monotonic)
    assert empty.open() is None and empty.cannot("send") == "Not connected to any server."


def test_a_replay_driver_seeks_and_refuses_to_send_or_measure() -> None:
    source = ReplaySource.open(RECORDING)
    driver = ReplayDriver(source)
    assert driver.open() is None
    sources = driver.sources
    assert driver.cannot("seek") is None
    assert "replay" in (driver.cannot("send") or "") and "F6" in (driver.cannot("measure") or "")
    driver.seek(source.t_end)
    driver.seek(source.t_start)  # backwards: fresh feeds, in the same list the screen holds
    assert driver.sources is sources and driver.sources == source.feeds and sources
