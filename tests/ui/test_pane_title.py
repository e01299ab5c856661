"""A started server's panel title follows the method vLLM ran, read from its engine init line
(tests/data/vllm-0.34-init-lines.txt, built from vLLM 0.34.0's format strings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtpwatch.core.launch.logparse import LogWatcher
from mtpwatch.core.sweeps.engine import engine_mode
from mtpwatch.session.views import ServerView
from mtpwatch.ui.markup.titles import render_pane_title

LINES = [
    line
    for line in (Path(__file__).resolve().parents[1] / "data" / "vllm-0.34-init-lines.txt")
    .read_text()
    .splitlines()
    if line and not line.startswith("#")
]


@pytest.mark.parametrize(
    ("line", "configured", "title"),
    [
        (LINES[0], "B · k=4 · method: vLLM detects", "B · DFlash k=4"),
        (LINES[1], "B · EAGLE-3 k=3", "B · EAGLE-3 k=3"),
        (LINES[2], "B · MTP k=2", "B · MTP k=2"),
    ],
)
def test_the_title_says_the_method_vllm_ran(line: str, configured: str, title: str) -> None:
    watcher = LogWatcher()
    watcher.feed(line)
    facts = watcher.facts
    view = ServerView(
        label=configured, url="http://127.0.0.1:1", method=facts.spec_method, k=facts.num_spec_tokens
    )
    assert render_pane_title(configured, view, starts_server=True) == title
    # until the log says, the label says what was configured
    before = ServerView(label=configured, url="http://127.0.0.1:1")
    assert render_pane_title(configured, before, starts_server=True) == configured


def test_configured_mtp_on_a_dflash_drafter_is_labelled_dflash() -> None:
    """0.33 rewrites a configured "mtp" to dflash by the drafter's name: the label follows the log."""
    watcher = LogWatcher()
    watcher.feed(LINES[0])
    view = ServerView(label="B · MTP k=4", url="u", method=watcher.facts.spec_method, k=4, speculative=True)
    assert render_pane_title("B · MTP k=4", view, starts_server=True) == "B · DFlash k=4"
    # an attached server and the baseline keep their labels
    assert render_pane_title("B · http://x", view, starts_server=False) == "B · http://x"
    off = ServerView(label="A · MTP off", url="u", speculative=False)
    assert render_pane_title("A · MTP off", off, starts_server=True) == "A · MTP off"


def test_the_engine_rules_follow_the_logged_method() -> None:
    """The k advisor's block-drafter rule applies to what vLLM ran, not to the configured method."""
    configured = {"method": "mtp", "model": "z-lab/gemma-4-E4B-it-DFlash", "num_speculative_tokens": 4}
    ran = engine_mode({**configured, "from_log": {"method": "dflash"}})
    assert ran.method == "dflash" and ran.advice_withheld
    detected = engine_mode(
        {"model": "z-lab/gemma-4-E4B-it-DFlash", "num_speculative_tokens": 4}, method="dflash"
    )
    assert detected.method == "dflash" and detected.advice_withheld
    assert engine_mode(configured).method == "mtp"  # nothing logged yet: the command line's
