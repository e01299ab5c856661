"""--record and `mtpwatch replay`: a recording of the simulator replays to the numbers shown live."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from click.testing import CliRunner

from mtpwatch.core.record.reader import read_recording
from mtpwatch.session.replay import ReplaySource
from tests.ui.recorded import KEY, Recorded


def test_replay_shows_what_the_live_app_showed(sim_recording: Recorded) -> None:
    path, seen = sim_recording.path, sim_recording.seen

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
    # Views are built only when a panel draws (at most 2 Hz), so a short session yields a dozen or so.
    assert compared >= 10 and with_numbers >= 3

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
        recorder.record("prompt", 0, clock[0], text=f"prompt {i}")
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


def test_record_to_a_missing_folder_is_one_line_before_the_tui(tmp_path: Path) -> None:
    from mtpwatch.cli import cli

    for args in (
        ["demo", "--record", str(tmp_path / "no" / "such" / "x.gz")],
        ["attach", "http://127.0.0.1:1", "--record", str(tmp_path / "no" / "x.gz")],
        ["start", "some/model", "--headless", "--record", str(tmp_path / "x.gz")],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, (args, result.output)
        assert "Error: --record" in result.output and "Traceback" not in result.output
