"""Provenance in the bench report, the per-run JSONL log, and --resume after a kill (simulators)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.commands.bench import command
from mtpwatch.core import provenance
from mtpwatch.core.ab import runlog, workloads
from mtpwatch.core.ab.plan import BenchConfig, RunUnits, StartArm, StopArm, Unit, build_plan
from mtpwatch.sim.harness import SimThread

QUICK = ["--prompts", "short", "--limit", "1", "--runs", "3", "--max-tokens", "16"]


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[str, str]]:
    with (
        SimThread(preset="gemma4-e4b-gb10", spec=False, speed=20) as a,
        SimThread(preset="gemma4-e4b-gb10", spec=True, k=3, speed=20) as b,
    ):
        yield a, b


def test_report_carries_provenance(sims: tuple[str, str], tmp_path: Path) -> None:
    out = tmp_path / "ab.json"
    res = CliRunner().invoke(
        command,
        ["--ab", *sims, *QUICK, "--json-file", str(out), "--label", "k3 trial", "--metadata", "image=v0.32",
         "--metadata", "hf_token=hunter2", "--api-key", "s3cret-key", "--gpu", "GB10"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    text = out.read_text(encoding="utf-8")
    assert "s3cret-key" not in text and "hunter2" not in text  # secrets never reach the file
    doc = json.loads(text)
    assert list(doc)[:2] == ["meta", "tool"]
    meta = doc["meta"]
    assert meta["label"] == "k3 trial" and meta["metadata"] == {"image": "v0.32", "hf_token": "***"}
    assert meta["mtpwatch_version"] and meta["created_utc"].endswith("Z") and meta["host"]
    assert meta["gpu"] == {"name": "GB10", "peak_gbps": 273.0, "source": "--gpu"}
    prompts = workloads.resolve("short", limit=1, max_tokens=16)
    assert meta["prompt_set"]["hash"] == provenance.prompt_set_hash(prompts)
    assert meta["prompt_set"]["name"] == "short" and meta["temperature"] == 0.0
    a, b = meta["arms"]["a"], meta["arms"]["b"]
    assert a["url"] == sims[0] and b["url"] == sims[1]
    assert a["vllm_version"] == b["vllm_version"] == "0.32.0"  # the simulator speaks vLLM 0.32's /version
    assert a["served_name"] == "google/gemma-4-E4B-it" and a["speculative"] is False
    assert b["k"] == 3 and b["speculative"] is True
    assert "block_size" in b["engine"] and "gpu_memory_utilization" in b["engine"]
    # the label names the report in plot/compare
    from mtpwatch.core.reports import reportfile

    assert reportfile.load(out).name == "k3 trial" and reportfile.load(out).k == 3


def _stderr_until(proc: subprocess.Popen[bytes], marker: bytes, err: list[bytes]) -> threading.Event:
    seen = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        while chunk := proc.stderr.read1(4096):  # type: ignore[attr-defined]
            err.append(chunk)
            if marker in b"".join(err):
                seen.set()
        seen.set()

    threading.Thread(target=read, daemon=True).start()
    return seen


@pytest.mark.timeout(240)
def test_killed_bench_keeps_its_runs_and_resume_finishes_it(sims: tuple[str, str], tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    argv = [sys.executable, "-m", "mtpwatch", "bench", "--ab", *sims, "--prompts", "short", "--limit", "1",
            "--runs", "12", "--max-tokens", "48", "--progress", "--jsonl", str(log),
            "--label", "killed"]  # fmt: skip
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    err: list[bytes] = []
    assert _stderr_until(proc, b"[6/", err).wait(120), b"".join(err)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    stderr = b"".join(err).decode()
    assert f"finish with: mtpwatch bench --resume {log}" in stderr
    kept = runlog.load(log)
    assert kept.header["meta"]["label"] == "killed"
    total = 2 * 12 * 2
    assert 6 <= len(kept.records) < total
    before = [runlog.record_to_json(r) for r in kept.records]

    out = tmp_path / "final.json"
    res = CliRunner().invoke(command, ["--resume", str(log), "--json-file", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["gates"] == [] and doc["interrupted"] is None
    assert len(doc["runs"]) == total
    assert doc["meta"]["label"] == "killed" and len(doc["meta"]["resumed"]) == 1
    assert doc["meta"]["resumed"][0]["runs_before"] == len(before)
    # the runs measured before the kill are in the report unchanged, and each planned run once
    final = runlog.load(log)
    assert [runlog.record_to_json(r) for r in final.records[: len(before)]] == before
    keys = [(r.arm, r.point, r.prompt_index, r.run) for r in final.records]
    assert len(keys) == len(set(keys)) == total
    assert doc["speedup"]["pairs"] == 2 * 11


def test_resume_refuses_settings_and_bad_logs(tmp_path: Path) -> None:
    not_log = tmp_path / "x.jsonl"
    not_log.write_text('{"type": "run"}\n', encoding="utf-8")
    res = CliRunner().invoke(command, ["--resume", str(not_log)])
    assert res.exit_code == 1 and "not an mtpwatch bench run log" in res.output
    res = CliRunner().invoke(command, ["--resume", str(not_log), "--runs", "5"])
    assert res.exit_code == 2 and "drop --runs" in res.output
    res = CliRunner().invoke(command, ["--resume", str(tmp_path / "none.jsonl")])
    assert res.exit_code == 1 and "run log not found" in res.output
    res = CliRunner().invoke(command, ["http://127.0.0.1:9", "--metadata", "novalue"])
    assert res.exit_code == 2 and "expected KEY=VALUE" in res.output


def test_a_line_cut_by_a_crash_is_dropped(tmp_path: Path) -> None:
    config = BenchConfig(prompts=workloads.resolve("short", limit=1), runs=2, warmup=0)
    path = tmp_path / "r.jsonl"
    writer = runlog.RunLogWriter(path)
    writer.header(meta={}, config=config, arms={"a": {"url": "http://x"}})
    writer.close()
    good = runlog.load(path)
    assert good.config == config  # the whole configuration round-trips, prompts included
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"type": "run", "arm": "a", "pro')  # the process died mid-line
    assert runlog.load(path).records == []
    with path.open("a", encoding="utf-8") as fh:
        fh.write('\n{"type": "note", "text": "later"}\n')
    with pytest.raises(runlog.RunLogError, match=r"r.jsonl:2: not valid JSON"):
        runlog.load(path)


def test_resumed_restart_plan_skips_finished_sessions() -> None:
    from mtpwatch.core.ab.records import RunRecord

    config = BenchConfig(
        prompts=workloads.resolve("short", limit=1)[:1], runs=3, warmup=1, schedule="restart"
    )
    plan = build_plan(config)
    first_session: list[Unit] = []
    for step in plan[1:]:
        if isinstance(step, StopArm):
            break
        assert isinstance(step, RunUnits)
        first_session.extend(step.units)
    done = [
        RunRecord(u.arm, "p", "c", u.point, u.run, u.warmup, u.pair, 1, None, 1.0, 1.0, 1.0, 0, None, False,
                  prompt_index=u.prompt)
        for u in first_session
    ]  # fmt: skip
    rest = runlog.resumed_plan(plan, done)
    starts = [s.arm for s in rest if isinstance(s, StartArm)]
    assert [s.arm for s in plan if isinstance(s, StartArm)] == ["a", "b", "a"]
    assert starts == ["b", "a"]  # A's first session is done: not started again


def test_resume_runs_again_the_runs_that_failed(sims: tuple[str, str], tmp_path: Path) -> None:
    """Runs that failed because a server died were counted as done: --resume ran nothing and still
    reported `GATE FAILED: 5 request(s) failed` (issue 40, item 9). They are run again now."""
    log = tmp_path / "runs.jsonl"
    res = CliRunner().invoke(
        command, ["--ab", *sims, *QUICK, "--jsonl", str(log), "--json-file", str(tmp_path / "a.json")]
    )
    assert res.exit_code == 0, res.output
    total = len(runlog.load(log).records)
    # The server died under the last five runs: what the bench writes for a run whose request failed.
    lines = log.read_text(encoding="utf-8").splitlines()
    runs = [i for i, line in enumerate(lines) if json.loads(line).get("type") == "run"]
    for i in runs[-5:]:
        rec = json.loads(lines[i])
        rec.update(tokens=0, ttft_s=None, decode_tok_s=None, output_tok_s=None, errors=1, text="",
                   token_ids=None, error=f"cannot connect to {sims[1]}: connection refused")  # fmt: skip
        lines[i] = json.dumps(rec)
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    failed = runlog.load(log)
    assert len(failed.finished) == total - 5 and failed.failed == 5

    out = tmp_path / "final.json"
    res = CliRunner().invoke(command, ["--resume", str(log), "--json-file", str(out)])
    assert res.exit_code == 0, res.output
    assert "GATE FAILED" not in res.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["gates"] == [] and len(doc["runs"]) == total
    final = runlog.load(log)
    assert len(final.records) == total + 5 and len(final.finished) == total and final.failed == 0
    assert "5 failed run(s) to run again" in log.read_text(encoding="utf-8")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("jsonl", [False, True], ids=["no-log", "log"])
def test_ctrl_c_says_how_to_resume(sims: tuple[str, str], tmp_path: Path, jsonl: bool) -> None:
    """Ctrl-C's message did not mention --resume (issue 40, item 9)."""
    log = tmp_path / "runs.jsonl"
    # 400 runs: the Ctrl-C lands mid-bench however late the reader thread sees "[2/" (with 12, a busy
    # test process saw it after the bench had finished: exit 0).
    argv = [sys.executable, "-m", "mtpwatch", "bench", "--ab", *sims, "--prompts", "short", "--limit", "1",
            "--runs", "400", "--max-tokens", "48", "--progress"]  # fmt: skip
    argv += ["--jsonl", str(log)] if jsonl else []
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # A suite started in the background (`bash tests/run.sh &`) ignores SIGINT, and the bench
        # would inherit that: Ctrl-C as a terminal sends it reaches a process that takes it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    err: list[bytes] = []
    assert _stderr_until(proc, b"[2/", err).wait(120), b"".join(err)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    stderr = b"".join(err).decode()
    assert "stopped by Ctrl-C" in stderr, stderr
    if jsonl:
        assert f"finish with: mtpwatch bench --resume {log}" in stderr
    else:
        assert "with --jsonl FILE a stopped bench keeps its runs and `mtpwatch bench --resume FILE`" in stderr
