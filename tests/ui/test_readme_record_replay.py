"""The README's record/replay/loop commands, end to end in a real 80×24 pseudo-terminal."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.core.record.reader import RecordingError, read_recording
from mtpwatch.sim.harness import SimThread
from tests.ui.tty import run_tty


def _recorded(path: Path, kinds: set[str]) -> bool:
    """The recording on disk (flushed each second) already holds records of every kind in `kinds`."""
    try:
        records = read_recording(path).records
    except (OSError, RecordingError, ValueError):
        return False
    return kinds <= {r["kind"] for r in records} and sum(r["kind"] == "scrape" for r in records) >= 8


def test_demo_loop_record_then_replay(tmp_path: Path) -> None:
    # mtpwatch demo --loop --record demo.mtpw.gz   (README)
    rec = tmp_path / "demo.mtpw.gz"
    code, out = run_tty(
        ["demo", "--loop", "--record", str(rec)],
        ready=lambda _: _recorded(rec, {"server", "prompt", "ev"}),
        limit_s=90,
    )
    assert code == 0, out[-2000:]
    assert b"Traceback" not in out
    recording = read_recording(rec)
    assert not recording.truncated  # Ctrl+Q closed the file
    servers = [r for r in recording.records if r["kind"] == "server"]
    assert {r["s"] for r in servers} == {0, 1} and all(r["version"] for r in servers)
    assert any(r["kind"] == "mark" and r.get("what") == "quit" for r in recording.records)

    # mtpwatch replay demo.mtpw.gz --json   (README)
    result = CliRunner().invoke(cli, ["replay", str(rec), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["mode"] == "ab" and [s["label"] for s in summary["servers"]] == [
        "A · MTP off",
        "B · MTP on",
    ]
    assert summary["servers"][1]["method_label"].startswith("MTP k=")
    assert summary["servers"][0]["method_label"] is None  # no speculation

    # mtpwatch replay demo.mtpw.gz   (README): plays with no server; Space, →, +, n, then Ctrl+Q
    code, out = run_tty(
        ["replay", str(rec)],
        ready=lambda o: b"replay" in o,
        keys=(b" ", b"\x1b[C", b"+", b"n", b"\x11"),
        limit_s=60,
    )
    assert code == 0 and b"Traceback" not in out


def test_attach_record_keeps_the_api_key_out(tmp_path: Path) -> None:
    # mtpwatch attach http://127.0.0.1:8000 --record session.mtpw.gz   (README), with a key
    key = "sk-readme-test-key-0123456789"
    rec = tmp_path / "session.mtpw.gz"
    with SimThread(preset="gemma4-e4b-gb10", spec=True, api_key=key) as url:
        code, out = run_tty(
            ["attach", url, "--record", str(rec), "--api-key", key],
            ready=lambda _: _recorded(rec, {"server", "scrape"}),
            limit_s=60,
        )
    assert code == 0 and b"Traceback" not in out
    assert key.encode() not in rec.read_bytes()
    import gzip

    assert key not in gzip.decompress(rec.read_bytes()).decode()
    session = read_recording(rec).session()
    assert session["servers"][0]["url"] == url and "api_key" not in json.dumps(session)
