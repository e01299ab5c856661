"""Recovery and refusals of issue 40, item 9: one line before anything starts."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.sim.harness import SimThread


@pytest.mark.parametrize(
    "args",
    [
        ["start", "some/model", "--vllm", "/nonexistent/bin/vllm"],
        ["start", "some/model", "--vllm", "/nonexistent/bin/vllm", "--headless"],
        ["start", "some/model", "-k", "4", "--vllm", "no-such-vllm-command-here"],
        ["start", "--engine", "llama.cpp", "m.gguf", "--llama-server", "/nonexistent/llama-server"],
    ],
    ids=["ui", "headless", "not-on-path", "llama.cpp"],
)
def test_start_without_its_server_program_refuses_before_the_tui(args: list[str]) -> None:
    """`start` without vLLM opened the TUI only to say `cannot run 'vllm'` twice under `k ? · model ?`."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot run '"), result.output
    assert "--vllm" in lines[0] or "--llama-server" in lines[0]


def test_a_k_sweep_whose_server_cannot_start_writes_no_report(tmp_path: Path) -> None:
    """`bench --sweep-k` where vLLM could not start wrote an empty sweep.json that `plot` refused."""
    out = tmp_path / "sweep.json"
    result = CliRunner().invoke(
        cli,
        ["bench", "--start", "google/gemma-4-E4B-it", "--drafter", "google/gemma-4-E4B-it-assistant",
         "--sweep-k", "0,1", "--gpu", "GB10", "--vllm", "/nonexistent/bin/vllm", "--no-progress",
         "--json-file", str(out)],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert not out.exists()
    assert "Traceback" not in result.output
    (line,) = [x for x in result.output.splitlines() if "nothing measured" in x]
    assert "cannot run '/nonexistent/bin/vllm'" in line and f"{out} not written" in line, line
    assert "best k" not in result.output  # no empty table either


@pytest.mark.parametrize(
    ("args", "flag"),
    [(["--max-tokens", "1000000"], "--max-tokens"), (["--lengths", "8,200000"], "--lengths")],
    ids=["max-tokens", "lengths"],
)
def test_bench_checks_max_tokens_against_the_context_before_any_request(args: list[str], flag: str) -> None:
    """`--max-tokens 1000000` sent 8 requests before learning the context is 131,072 tokens."""
    with SimThread(preset="gemma4-e4b-gb10", spec=True, speed=20) as url:
        result = CliRunner().invoke(cli, ["bench", url, *args, "--no-progress"])
        page = httpx.get(url + "/metrics", timeout=10).text
    assert result.exit_code == 1, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("Error:")]
    assert flag in line and "131,072 tokens (max_model_len, from its /v1/models)" in line, line
    # No generation request reached the server.
    sent = re.findall(r"^vllm:request_success_total\{[^}]*\} (\S+)$", page, re.MULTILINE)
    assert sent and all(float(x) == 0 for x in sent), sent
    assert "Traceback" not in result.output
