"""Recovery and refusals of issue 40, item 9: one line before anything starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli


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
