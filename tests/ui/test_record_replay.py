"""--record and `mtpwatch replay`: a recording of the simulator replays to the numbers shown live."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import TYPE_CHECKING

from click.testing import CliRunner

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.core.record.reader import read_recording
from mtpwatch.sim.server import SimThread
from mtpwatch.ui.app import make_app
from mtpwatch.ui.feed import ServerFeed
from mtpwatch.ui.replay import ReplaySource
from mtpwatch.ui.screens.monitor import SAMPLE_PROMPT
from mtpwatch.ui.view import ServerView

if TYPE_CHECKING:
    from conftest import WaitUntil

KEY = "sk-test-0123456789abcdef-never-in-a-recording"


def _capture(feed: ServerFeed, index: int, seen: list[tuple[float, int, str, ServerView]]) -> None:
    """Keep every view the live app computed: (time, server, window, view)."""
    live_view = feed.view

    def view(window: str) -> ServerView:
        result = live_view(window)
        seen.append((feed.clock(), index, window, result))
        return result

    feed.view = view  # type: ignore[method-assign]


Seen = list[tuple[float, int, str, ServerView]]


async def _record_ab(path: Path, wait_until: WaitUntil, seen: Seen) -> None:
    with (
        SimThread(preset="gemma4-e4b-gb10", spec=False, speed=8, api_key=KEY) as url_a,
        SimThread(preset="gemma4-e4b-gb10", spec=True, speed=8, api_key=KEY) as url_b,
    ):
        config = AppConfig(
            servers=[
                ServerSpec(label="A · MTP off", url=url_a, api_key=KEY),
                ServerSpec(label="B · MTP on", url=url_b, api_key=KEY),
            ],
            display=DisplaySettings(max_tokens=48, spec_method="mtp"),
            mode="ab",
            title="record test",
            record=str(path),
        )
        app = make_app(config)
        async with app.run_test(size=(160, 48)) as pilot:
            screen = app.monitor
            for i, feed in enumerate(screen.feeds):
                _capture(feed, i, seen)
            await wait_until(pilot, lambda: all(f.status == "up" and f.identified for f in screen.feeds))
            for prompt in (SAMPLE_PROMPT, "Write a haiku about bandwidth."):
                done = [p.prompt_count for p in screen.panels]
                screen.send(prompt)
                await wait_until(
                    pilot,
                    lambda done=done: (
                        not screen.generating
                        and all(p.prompt_count > d for p, d in zip(screen.panels, done, strict=True))
                    ),
                    limit_s=60,
                )
            screen.cycle_window()  # 60 s
            screen.cycle_window()  # this prompt
            n = len(seen)
            await wait_until(pilot, lambda: len(seen) > n + 4)
            await pilot.press("ctrl+q")


async def test_replay_shows_what_the_live_app_showed(tmp_path: Path, wait_until: WaitUntil) -> None:
    path = tmp_path / "session.mtpw.gz"
    seen: list[tuple[float, int, str, ServerView]] = []
    await _record_ab(path, wait_until, seen)

    raw = path.read_bytes()
    assert KEY.encode() not in raw and KEY.encode() not in gzip.decompress(raw)
    recording = read_recording(path)
    kinds = {r["kind"] for r in recording.records}
    assert {"server", "scrape", "prompt", "ev", "result", "end", "done"} <= kinds
    assert not recording.truncated

    source = ReplaySource(recording)
    assert [s.label for s in source.config.servers] == ["A · MTP off", "B · MTP on"]
    compared = 0
    with_numbers = 0
    quit_t = next(r["t"] for r in recording.records if r["kind"] == "mark" and r["what"] == "quit")
    for t, index, window, live in sorted(seen, key=lambda x: x[0]):
        if t > quit_t:
            break  # the app is closing its clients: not part of the session
        source.advance(t)
        replayed = source.feeds[index].view(window)
        if replayed != live:
            fields = [f for f in live.__dataclass_fields__ if getattr(live, f) != getattr(replayed, f)]
            diff = {f: (getattr(live, f), getattr(replayed, f)) for f in fields}
            raise AssertionError(f"t={t} server {index} window {window}: live != replay: {diff}")
        compared += 1
        with_numbers += live.server_tok_s is not None and live.acceptance_rate is not None
    assert compared > 20 and with_numbers > 5

    summary = source.summary()
    assert [p["label"] for p in summary["prompts"]].count("B · MTP on") == 2
    mtp = [p for p in summary["prompts"] if p["server"] == 1]
    assert all(p["tokens"] > 0 and p["decode_tok_s"] and p["acceptance_rate"] for p in mtp)
    assert summary["servers"][1]["method"] == "mtp"
    assert summary["servers"][1]["method_label"].startswith("MTP k=")

    from mtpwatch.cli import cli

    result = CliRunner().invoke(cli, ["replay", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["prompts"] == json.loads(json.dumps(summary["prompts"]))


def test_a_crash_loses_at_most_the_unflushed_tail(tmp_path: Path) -> None:
    from mtpwatch.core.record.writer import Recorder

    clock = [0.0]
    path = tmp_path / "cut.gz"
    recorder = Recorder(path, clock=lambda: clock[0])
    for i in range(40):
        clock[0] = i * 0.25
        recorder.prompt(0, clock[0], f"prompt {i}")
    # No close(): the process died. Everything up to the last flush (≤ 0.75 s ago) is readable.
    recording = read_recording(path)
    assert recording.truncated
    last = recording.records[-1]
    assert last["kind"] == "prompt" and clock[0] - last["t"] <= 1.0


def test_replay_of_a_file_that_is_not_a_recording_is_one_line(tmp_path: Path) -> None:
    from mtpwatch.cli import cli

    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    result = CliRunner().invoke(cli, ["replay", str(bad), "--json"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: cannot replay") and "Traceback" not in result.output
    missing = CliRunner().invoke(cli, ["replay", str(tmp_path / "nope.gz")])
    assert missing.exit_code == 1 and "no such file" in missing.output
