"""Saving the F6 measurement from the app: Ctrl+S, and --save on exit, in the bench report format."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.config import AppConfig, DisplaySettings, MeasureSettings, ServerSpec
from mtpwatch.core.reports import reportfile
from mtpwatch.session.measure import measurement_prompt
from mtpwatch.sim.harness import running_sim
from mtpwatch.ui.app import make_app
from tests.feeds import monitor_of

if TYPE_CHECKING:
    from tests.ui.conftest import WaitUntil

FAST = DisplaySettings(scrape_interval_s=0.1, max_tokens=24, gpu="GB10")


async def test_ctrl_s_and_exit_save_the_measurement(
    wait_until: WaitUntil, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    on_exit = tmp_path / "f6.json"
    async with running_sim(speed=40, spec=False) as url_a, running_sim(speed=40, k=3) as url_b:
        config = AppConfig(
            servers=[ServerSpec(label="A", url=url_a), ServerSpec(label="B", url=url_b)],
            display=FAST,
            mode="ab",
        )
        app = make_app(
            dataclasses.replace(config, measure=MeasureSettings(runs=3, warmup=1, save_path=str(on_exit)))
        )
        async with app.run_test(size=(160, 48)) as pilot:
            monitor = monitor_of(app.screen)
            await wait_until(
                pilot, lambda: all(p.view is not None and p.view.status == "up" for p in monitor.panels)
            )
            await pilot.press("ctrl+s")  # nothing measured yet: a warning, no file
            await pilot.pause()
            assert monitor.ab.saved_to is None and not on_exit.exists()
            assert monitor.ab.start_measurement([measurement_prompt("count to ten", 24)])
            ab = monitor.ab
            await wait_until(pilot, lambda: ab.last_report is not None and not ab.measuring, 40)
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: monitor.ab.saved_to is not None)
            assert monitor.ab.saved_to == on_exit
            saved = on_exit.read_text(encoding="utf-8")
            on_exit.unlink()
            # a second measurement is unsaved until the app exits
            assert monitor.ab.start_measurement([measurement_prompt("name three colours", 24)])
            await wait_until(pilot, lambda: monitor.ab.saved_to is None and not monitor.ab.measuring, 40)
            await pilot.press("ctrl+q")
    doc = json.loads(saved)
    assert doc["tool"] == "mtpwatch bench" and doc["speedup"]["pairs"] == 2
    meta = doc["meta"]
    assert meta["arms"]["a"]["url"] == url_a and meta["arms"]["b"]["k"] == 3
    assert meta["arms"]["b"]["vllm_version"] == "0.32.0" and meta["gpu"]["name"] == "GB10"
    assert meta["prompt_set"]["name"] == "console" and meta["metadata"]["source"].startswith("mtpwatch app")
    assert len(doc["runs"]) == 2 * 3
    on_quit = json.loads(on_exit.read_text(encoding="utf-8"))  # written on exit
    assert on_quit["runs"][0]["prompt"] == "name three colours"
    # the saved file is a bench report to plot and compare like any other
    loaded = reportfile.load(on_exit)
    assert loaded.k == 3 and loaded.speedup is not None
    res = CliRunner().invoke(cli, ["plot", str(on_exit), "--only", "runs,positions", "--table"])
    assert res.exit_code == 0, res.output
    assert "B treatment" in res.stdout


def test_save_option_checks_its_folder(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["demo", "--save", str(tmp_path / "nope" / "x.json")])
    assert res.exit_code == 2 and "does not exist" in res.output
