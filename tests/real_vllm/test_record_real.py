"""--record on a real vLLM (CPU build), ngram k=4, and the replay of it.

One server, watched twice in the A/B view: A is the server the app started (its log says ngram), B
attaches to the same URL (nothing says which method drafts). The test records the session, checks
that every view the live app computed equals the replay's view at that moment, that A is named
"ngram k=4" and B "speculative k=4" (never "MTP"), and that no key enters the file.

With MTPWATCH_WRITE_FIXTURES=1 it also writes the recording and a sample of the live views to
tests/data/recordings/, the fixture of tests/ui/test_real_recording.py (replayed in the fast suite).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, ServerSpec
from mtpwatch.core.launch.vllm_cmd import build_vllm_argv, server_env
from mtpwatch.core.record.reader import read_recording
from mtpwatch.session.replay import ReplaySource
from mtpwatch.session.views import WINDOWS, ServerView
from mtpwatch.ui.app import make_app
from mtpwatch.ui.markup.panel import render_header
from tests.feeds import monitor_of, opened_feeds
from tests.ui.recorded import _capture
from tests.waits import wait_for

from .conftest import VLLM_ARGS, VLLM_ENV, RealEnv

pytestmark = [pytest.mark.real_vllm, pytest.mark.timeout(1500)]  # a vLLM start on a busy CPU

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "tests" / "data" / "recordings"
PROMPT = (
    "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    + "The quick brown fox jumps over the lazy dog near the river"
)
KEY = "sk-real-vllm-record-test-7d41"


async def test_record_real_vllm_and_replay_it(real_env: RealEnv, tmp_path: Path) -> None:
    port = free_port()
    model = real_env.models / "gemma3-270m"
    argv = build_vllm_argv(
        str(model), method="ngram", k=4, port=port, vllm=str(real_env.vllm),
        served_model_name="spec-rec", extra=VLLM_ARGS,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    env = {**VLLM_ENV, **server_env(KEY)}  # the key reaches vLLM through its environment, never argv
    launch = LaunchSpec(argv=tuple(argv), env=env, kind="vllm", startup_timeout_s=600.0)
    path = tmp_path / "real.mtpw.gz"
    config = AppConfig(
        servers=[
            ServerSpec(label="A · started", url=url, api_key=KEY, launch=launch),
            ServerSpec(label="B · attached", url=url, api_key=KEY),
        ],
        display=DisplaySettings(max_tokens=64),
        mode="ab",
        title="real vLLM 0.32 CPU, ngram k=4",
        record=str(path),
    )
    seen: list[tuple[float, int, str, ServerView]] = []
    app = make_app(config)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = monitor_of(app.screen)
        feeds = await opened_feeds(pilot)
        for i, feed in enumerate(feeds):
            _capture(feed, i, seen)
        await wait_for(
            pilot, lambda: all(f.watch.status == "up" and f.watch.identified for f in feeds), "up", 600
        )
        screen.send(PROMPT)
        await wait_for(pilot, lambda: all(p.prompt_count == 1 for p in screen.panels), "the answers", 240)
        views = [p.view for p in screen.panels]
        await wait_for(
            pilot, lambda: bool(screen.panels[0].view and screen.panels[0].view.acceptance_rate), "acc", 30
        )
        screen.action_cycle_window()
        screen.action_cycle_window()  # this prompt
        n = len(seen)
        # A few refreshes of this prompt's window on both servers (a condition, not a time: on a
        # loaded machine the refreshes come later, never fewer).
        await wait_for(
            pilot,
            lambda: all(sum(s == i and w == "prompt" for _, s, w, _ in seen[n:]) >= 4 for i in (0, 1)),
            "views of this prompt's window",
            300,
        )
        started, attached = (p.view for p in screen.panels)
        assert started is not None and attached is not None
        assert "ngram k=4" in render_header(started) and "MTP" not in render_header(started)
        assert "speculative k=4" in render_header(attached) and "MTP" not in render_header(attached)
        assert "MTP" not in started.verdict and "MTP" not in attached.verdict
        assert views[0] is not None
        await pilot.press("ctrl+q")

    raw = path.read_bytes()
    assert KEY.encode() not in raw and KEY not in gzip.decompress(raw).decode()
    recording = read_recording(path)
    source = ReplaySource(recording)
    quit_t = next(r["t"] for r in recording.records if r["kind"] == "mark" and r["what"] == "quit")
    compared = 0
    covered: set[tuple[int, str]] = set()
    with_acceptance: set[int] = set()
    kept: list[dict[str, Any]] = []
    for t, index, window, live in sorted(seen, key=lambda x: x[0]):
        if t > quit_t:
            break
        source.advance(t)
        replayed = source.feeds[index].view(window)
        if replayed != live:
            fields = [f for f in live.__dataclass_fields__ if getattr(live, f) != getattr(replayed, f)]
            raise AssertionError(f"t={t} server {index} {window}: {[(f, getattr(live, f)) for f in fields]}")
        compared += 1
        covered.add((index, window))
        if live.acceptance_rate:
            with_acceptance.add(index)
        kept.append({"t": t, "s": index, "window": window, "view": asdict(live)})
    # Not a count (it depends on how fast the machine refreshes): every view before the quit was
    # compared, and they cover both servers in every window, with acceptance where the test waited.
    assert compared == sum(t <= quit_t for t, *_ in seen)
    assert covered == {(i, w) for i in (0, 1) for w in WINDOWS}, covered
    assert 0 in with_acceptance, with_acceptance
    summary = source.summary()
    labels = [s["method_label"] for s in summary["servers"]]
    assert labels == ["ngram k=4", "speculative k=4"], labels
    seconds = float(recording.records[-1]["t"]) - recording.t0
    print(f"real vLLM recording: {len(raw)} bytes, {seconds:.0f} s, {compared} views equal")

    if os.environ.get("MTPWATCH_WRITE_FIXTURES"):
        FOLDER.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, FOLDER / "vllm-0.32-cpu-ngram-k4.mtpw.gz")
        step = max(1, len(kept) // 400)
        sample = kept[::step] + [v for v in kept if v["window"] == "prompt"][-20:]
        with gzip.open(FOLDER / "vllm-0.32-cpu-ngram-k4.views.json.gz", "wt", encoding="utf-8") as fh:
            json.dump(sample, fh)
