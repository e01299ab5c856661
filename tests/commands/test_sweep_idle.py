"""`bench --sweep-k 0s,…`: the "speculation on, k=0" arm against plain k=0, with the simulator
standing in for vLLM (`core.sweeps.idle`)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.core.sweeps.idle import parse_sweep_ks

E4B, E4B_D = "google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant"
SIM = f"{sys.executable} -m mtpwatch sim --speed 40"
QUICK = ["--prompts", "long-en", "--limit", "1", "--runs", "3", "--max-tokens", "64", "--no-progress"]


def test_the_0s_arm_is_measured_against_plain_k0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    out = tmp_path / "sweep.json"
    args = ["bench", "--start", E4B, "--method", "mtp", "--drafter", E4B_D, "--sweep-k", "0s,0,2"]
    args += ["--vllm", SIM, "--gpu", "GB10", *QUICK, "--json-file", str(out), "--", "--max-model-len", "8192"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert f"k sweep 0,2,0s · {E4B} · mtp" in text
    assert "speculation on, k=0 (0s: num_speculative_tokens=2, num_speculative_tokens_per_batch_size" in text
    row = next(line for line in text.splitlines() if line.startswith(" 0s "))
    assert "x [" in row and "drafted on 0.0% of steps" in row
    assert "price of leaving speculation on:" in text and "1 − speed-up" in text
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["ks"] == [0, 2]  # the sweep's own rows are unchanged
    idle = doc["speculation_on_k0"]
    assert idle["arm"] == "0s" and idle["schedule"] == [[1, 1, 0]] and idle["num_speculative_tokens"] == 2
    low, high = idle["speedup_ci"]
    assert idle["pairs"] == 2 and low <= idle["speedup_vs_k0"] <= high
    assert idle["cost"] == pytest.approx(1 - idle["speedup_vs_k0"], abs=1e-4)
    assert idle["cost_ci"] == pytest.approx([1 - high, 1 - low], abs=1e-4)
    assert idle["decode_tok_s"] > 0 and idle["baseline_decode_tok_s"] > 0
    # the 0s server ran the largest k's config with the schedule, and its counters say it never drafted
    bench = idle["bench"]
    spec = bench["meta"]["arms"]["b"]["spec_config"]
    assert spec["num_speculative_tokens"] == 2
    assert spec["num_speculative_tokens_per_batch_size"] == [[1, 1, 0]]
    assert bench["meta"]["arms"]["a"]["speculative"] is False
    assert bench["arms"]["b"]["drafts"] == 0 and idle["drafted_share"] == 0.0


def test_0s_is_refused_where_vllm_has_no_schedule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    old = tmp_path / "vllm"
    old.write_text("#!/bin/sh\necho 0.31.0\n", encoding="utf-8")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    args = ["bench", "--start", E4B, "--method", "ngram", "--sweep-k", "0s,0,2", "--vllm", str(old)]
    result = CliRunner().invoke(cli, [*args, "--gpu", "GB10", *QUICK])
    assert result.exit_code == 2
    assert "--sweep-k 0s needs num_speculative_tokens_per_batch_size (vLLM 0.32+)" in result.output
    assert "vLLM 0.31.0 has no num_speculative_tokens_per_batch_size" in result.output


def test_sweep_k_parses_0s() -> None:
    assert parse_sweep_ks("0s,0,1, 4") == ([0, 1, 4], True)
    assert parse_sweep_ks("0,2") == ([0, 2], False)
    with pytest.raises(ValueError, match="'0x' is not a k"):
        parse_sweep_ks("0x,2")
    result = CliRunner().invoke(cli, ["bench", "--start", E4B, "--sweep-k", "0x,2", "--vllm", SIM])
    assert result.exit_code == 2 and "'0x' is not a k" in result.output
