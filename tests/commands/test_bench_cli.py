"""`mtpwatch bench` end to end against simulators: table, JSON, CSV, exit codes, restart schedule."""

from __future__ import annotations

import csv
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.commands.bench import command
from mtpwatch.commands.options import free_port
from mtpwatch.core.ab.plan import CONTENDED
from mtpwatch.core.ab.records import CSV_FIELDS
from mtpwatch.sim.harness import SimThread

PRESET = "gemma4-e4b-gb10"
QUICK = ["--prompts", "long", "--limit", "1", "--runs", "3", "--max-tokens", "48"]


@pytest.fixture(scope="module")
def ab_urls() -> Iterator[tuple[str, str]]:
    with (
        SimThread(preset=PRESET, spec=False, speed=20) as a,
        SimThread(preset=PRESET, spec=True, speed=20) as b,
    ):
        yield a, b


def test_ab_table_json_csv(ab_urls: tuple[str, str], tmp_path: Path) -> None:
    out_json, out_csv = tmp_path / "ab.json", tmp_path / "ab.csv"
    res = CliRunner().invoke(
        command,
        [
            "--ab",
            *ab_urls,
            *QUICK,
            "--require-identical",
            "--json-file",
            str(out_json),
            "--csv",
            str(out_csv),
        ],
    )
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert "A = baseline (MTP off)" in text and "B = treatment (MTP on)" in text
    assert "speed-up B/A: median" in text
    assert "client: (tokens−1)/(t_last−t_first)" in text and "server /metrics" in text
    assert "lossless check (temperature 0): identical" in text
    assert "per category" in text and "long-ja" in text
    doc = json.loads(out_json.read_text(encoding="utf-8"))
    assert set(doc["speedup"]) >= {"median", "ci_low", "ci_high"}
    assert doc["speedup"]["ci_low"] <= doc["speedup"]["median"] <= doc["speedup"]["ci_high"]
    assert doc["speedup"]["median"] > 1.3  # MTP on is faster on this preset (physics: ~1.8x at 48 tokens)
    assert doc["identical_outputs"] is True and doc["first_divergence"] is None
    for arm in ("a", "b"):
        assert set(doc["arms"][arm]["decode_tok_s"]) >= {"median", "mean", "cv"}
        assert {"acceptance_rate", "mean_acceptance_length", "per_position"} <= set(doc["arms"][arm])
    assert len(doc["arms"]["b"]["per_position"]) == 2
    assert len(doc["runs"]) == 2 * 3 * 2
    assert set(doc["runs"][0]) >= {
        "arm",
        "prompt",
        "category",
        "run",
        "warmup",
        "tokens",
        "ttft_s",
        "decode_tok_s",
    }
    assert doc["gates"] == []
    rows = list(csv.DictReader(out_csv.open(encoding="utf-8")))
    assert len(rows) == len(doc["runs"]) and tuple(rows[0]) == CSV_FIELDS
    assert [r["arm"] for r in rows] == [r["arm"] for r in doc["runs"]]


def test_race_is_labelled_contended(ab_urls: tuple[str, str], tmp_path: Path) -> None:
    out_json = tmp_path / "race.json"
    res = CliRunner().invoke(
        command, ["--ab", *ab_urls, *QUICK, "--schedule", "race", "--json-file", str(out_json)]
    )
    assert res.exit_code == 0, res.output
    assert "CONTENDED — NOT A MEASUREMENT" in res.stdout
    assert "contended — not a measurement" in res.stdout.split("speed-up B/A")[1].splitlines()[0]
    assert json.loads(out_json.read_text(encoding="utf-8"))["measurement"] == CONTENDED


def test_single_server(ab_urls: tuple[str, str]) -> None:
    res = CliRunner().invoke(command, [ab_urls[1], *QUICK, "--lengths", "16"])
    assert res.exit_code == 0, res.output
    assert "server: " in res.stdout and "speed-up" not in res.stdout
    assert "acceptance rate" in res.stdout
    assert "drafted on (share of steps)" in res.stdout  # Δnum_drafts / ΔITL count


def test_failed_requests_exit_nonzero() -> None:
    with SimThread(preset=PRESET, speed=20, cut_stream_after=5) as url:
        res = CliRunner().invoke(command, [url, *QUICK])
    assert res.exit_code == 1
    assert "GATE FAILED:" in res.stdout and "request(s) failed" in res.stdout
    assert "Traceback" not in res.output


@pytest.mark.timeout(180)
def test_restart_schedule_with_launched_simulators(tmp_path: Path) -> None:
    pa, pb = free_port(), free_port()
    sim = f"{sys.executable} -m mtpwatch sim --preset {PRESET} --speed 20 --host 127.0.0.1"
    out_json = tmp_path / "restart.json"
    res = CliRunner().invoke(
        command,
        [
            "--ab", f"http://127.0.0.1:{pa}", f"http://127.0.0.1:{pb}",
            "--schedule", "restart",
            "--launch-a", f"{sim} --port {pa} --no-spec",
            "--launch-b", f"{sim} --port {pb}",
            "--startup-timeout", "60",
            "--prompts", "long", "--limit", "1", "--runs", "3", "--max-tokens", "32",
            "--json-file", str(out_json),
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(out_json.read_text(encoding="utf-8"))
    assert doc["measurement"].startswith("restart")
    # per prompt: A session 1 (1 warm-up + 1), B (1 warm-up + 2), A session 2 (1 warm-up + 1)
    warm = [r for r in doc["runs"] if r["warmup"]]
    assert sorted(r["arm"] for r in warm) == ["a", "a", "a", "a", "b", "b"]
    assert doc["speedup"]["pairs"] == 4 and doc["speedup"]["median"] > 1.2
    assert doc["identical_outputs"] is True
    # provenance of servers the bench started: the command line, the start-up log, and what the
    # server said about itself while it was up
    arm_b = doc["meta"]["arms"]["b"]
    assert arm_b["launch_argv"][-2:] == ["--port", str(pb)] and arm_b["url"] == f"http://127.0.0.1:{pb}"
    assert arm_b["vllm_version"] == "0.32.0" and arm_b["k"] == 2 and arm_b["speculative"] is True
    assert arm_b["method"] == "mtp" and arm_b["spec_config"]["from_log"]["num_speculative_tokens"] == 2
    assert doc["meta"]["arms"]["a"]["speculative"] is False
    # no NVML here: the GPU the started simulators model, once they answered (issue 40, item 8)
    assert doc["meta"]["gpu"]["name"] == "GB10 (simulated)" and "/sim/info" in doc["meta"]["gpu"]["source"]
    # both servers were stopped: nothing answers on their ports any more
    for port in (pa, pb):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0


def test_swapped_arms_are_called_out(ab_urls: tuple[str, str]) -> None:
    res = CliRunner().invoke(command, ["--ab", ab_urls[1], ab_urls[0], *QUICK])
    assert res.exit_code == 0, res.output
    assert "arm A (baseline) has speculative decoding on" in res.stdout
    assert "arm B (treatment) shows no speculative-decoding counters" in res.stdout


def test_progress_line_shows_running_speedup() -> None:
    import io

    from mtpwatch.commands.bench_progress import Progress
    from mtpwatch.core.ab.events import PairFinished, RunFinished
    from mtpwatch.core.ab.plan import Point
    from mtpwatch.core.ab.records import RunRecord

    now = [100.0]
    buf = io.StringIO()
    upcoming = ["p1 A c1", "p1 B c1", "p1 B c1", "p1 A c1"]
    progress = Progress(buf, "tty", upcoming=upcoming, clock=lambda: now[0])
    rec = RunRecord("b", "p1", "c", Point(), 1, False, 0, 16, 0.01, 40.0, 40.0, 0.4, 0, None, False)
    progress(PairFinished(Point(), "p1", 0, 2.0, 2.0, 1, 2, 4))
    now[0] = 130.0
    progress(RunFinished(rec, 2, 4))
    out = buf.getvalue()
    # done/total, elapsed, ETA (30 s for 2 runs: 30 s more for the 2 left), the run now going, the last
    assert out.startswith(
        "\r[2/4 50%] 30s elapsed, ETA 30s · now: p1 B c1 · last: p1 B run 1 40.0 tok/s · "
        "speed-up B/A 2.00x (1 pairs)"
    ), out
    quiet = io.StringIO()
    Progress(quiet, "off")(RunFinished(rec, 2, 4))
    assert quiet.getvalue() == ""


def test_progress_lines_when_not_a_terminal() -> None:
    import io

    from mtpwatch.commands.bench_progress import Progress
    from mtpwatch.core.ab.events import BenchFinished, RunFinished
    from mtpwatch.core.ab.plan import Point
    from mtpwatch.core.ab.records import RunRecord

    now = [0.0]
    buf = io.StringIO()
    progress = Progress(buf, "lines", interval_s=30, upcoming=["x"] * 10, clock=lambda: now[0])
    rec = RunRecord("a", "p1", "c", Point(), 1, False, 0, 16, 0.01, 40.0, 40.0, 0.4, 0, None, False)
    for i in range(1, 10):  # a run every 10 s: a line at once, then one every 30 s
        now[0] = 10.0 * i
        progress(RunFinished(rec, i, 10))
    lines = buf.getvalue().splitlines()
    assert [line.split("]")[0] for line in lines] == [
        "mtpwatch bench: [1/10 10%",
        "mtpwatch bench: [4/10 40%",
        "mtpwatch bench: [7/10 70%",
    ]
    assert "\r" not in buf.getvalue() and "ETA 1m00s" in lines[1]
    progress(BenchFinished(None))  # type: ignore[arg-type]
    assert buf.getvalue().splitlines()[-1].startswith("mtpwatch bench: [9/10 90%] 1m30s elapsed")
