"""`mtpwatch bench --start MODEL --sweep-k …` end to end, with the simulator standing in for vLLM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli

E4B, E4B_D = "google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant"
SIM = f"{sys.executable} -m mtpwatch sim --speed 40"
QUICK = ["--prompts", "long-en", "--limit", "1", "--runs", "3", "--max-tokens", "64", "--no-progress"]


@pytest.mark.parametrize(
    ("method", "drafter"),
    [
        ("mtp", E4B_D),
        ("ngram", None),
        ("eagle3", "org/gemma-4-E4B-eagle3"),
        ("draft_model", "google/gemma-4-E2B-it"),
    ],
)
def test_sweep_every_method(
    method: str, drafter: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    monkeypatch.setenv("VLLM_API_KEY", "sweep-secret")
    out = tmp_path / "sweep.json"
    args = ["bench", "--start", E4B, "--method", method, "--sweep-k", "0,1,3", "--vllm", SIM, "--gpu", "GB10"]
    args += ["--drafter", drafter] if drafter else []
    args += [*QUICK, "--json", str(out), "--", "--max-model-len", "8192"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert f"k sweep 0,1,3 · {E4B} · {method}" in text
    assert "best k (highest median speed-up):" in text and "k advisor (from k=3)" in text
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["ks"] == [0, 1, 3] and doc["method"] == method
    rows = {r["k"]: r for r in doc["rows"]}
    for k in (1, 3):
        row = rows[k]
        assert row["pairs"] == 2 and row["speedup_ci"][0] <= row["speedup"] <= row["speedup_ci"][1]
        assert len(row["per_position"]) == k and 1.0 <= row["mean_acceptance_length"] <= k + 1
        assert row["predicted_decode_tok_s"] > 0 and row["categories"]["long-en"]["speedup"] > 0
    assert doc["best_k"] in (0, 1, 3)
    assert doc["advisor"]["from_k"] == 3 and [p["k"] for p in doc["advisor"]["predictions"]] == [0, 1, 3]
    # the run at k=3 predicts itself exactly; k=1 is a real prediction (its accuracy is a
    # benchmark's business: tests/bench/advisor.py)
    assert rows[3]["prediction_error"] == pytest.approx(0.0, abs=1e-6)
    assert isinstance(rows[1]["prediction_error"], float)
    # every server had the passthrough flag and a planned share; the key never in argv
    for server in doc["plan"]["servers"]:
        assert "--max-model-len" in server["argv"] and "--gpu-memory-utilization" in server["argv"]
        assert server["env"] == {"VLLM_API_KEY": "***"}
    assert "sweep-secret" not in out.read_text(encoding="utf-8") and "sweep-secret" not in result.output
    assert doc["plan"]["schedule"] == "restart"


def test_sweep_plan_only(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    args = ["bench", "--start", E4B, "--drafter", E4B_D, "--sweep-k", "0,2,4", "--gpu", "H100 SXM"]
    result = CliRunner().invoke(cli, [*args, "--plan", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "schedule: restart" in result.output and result.output.count("vllm serve") == 3
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert [s["k"] for s in doc["servers"]] == [0, 2, 4]


def test_sweep_bad_ks() -> None:
    result = CliRunner().invoke(cli, ["bench", "--start", E4B, "--sweep-k", "0", "--plan"])
    assert result.exit_code == 2 and "at least one k > 0" in result.output
    result = CliRunner().invoke(cli, ["bench", "--start", E4B, "--sweep-k", "1,x", "--plan"])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_another_commands_simulators_leave_a_sweep_alone_and_a_failure_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A simulator of someone else's (a bare `mtpwatch sim` holding 0.9 of a GB10 in the per-user
    ledger, the one every simulator shared before) does not fail the sweep; when a sweep's server
    does fail (here: the ledger shared on purpose), the sweep's line says vLLM's reason."""
    import subprocess

    monkeypatch.delenv("MTPWATCH_SIM_GPU_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the per-user ledger lands here, not in everyone's /tmp
    port = free_port()
    foreign = subprocess.Popen(
        [*SIM.split(), "serve", E4B, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert foreign.stdout is not None
        for line in foreign.stdout:  # its API server logs this once it listens
            if "Starting vLLM server on" in line or "Application startup complete" in line:
                break
        ledgers = list(tmp_path.glob("mtpwatch-sim-gpu-*/*.json"))
        assert len(ledgers) == 1, ledgers
        args = ["bench", "--start", E4B, "--method", "ngram", "--sweep-k", "0,1", "--vllm", SIM]
        args += ["--gpu", "GB10", *QUICK, "--", "--max-model-len", "8192"]
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(ledgers[0].parent))
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 1
        (line,) = [x for x in result.output.splitlines() if x.startswith("PARTIAL: ")]
        assert line.startswith(
            "PARTIAL: k=1: server exited with status 1 before answering /health: ValueError: "
        )
        assert "Free memory on device cuda:0 (" in line
    finally:
        foreign.terminate()
        foreign.wait(timeout=30)
        assert foreign.stdout is not None
        foreign.stdout.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
