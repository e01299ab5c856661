"""`bench --context-lengths`: the set padded to each length in the server's tokens (`core.sweeps.context`),
acceptance, per position and speed-up per length; the simulator's /tokenize and /v1/models stand
in for vLLM's. The simulator's acceptance does not depend on context length (no cited figure gives
its shape), so these tests check the plumbing, not a trend."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from mtpwatch.commands.bench import command
from mtpwatch.core.ab.workloads import Prompt, resolve
from mtpwatch.core.sweeps.context import ContextError, check_lengths, filler_text, pad_prompt, parse_lengths
from mtpwatch.sim.corpus import prompt_token_ids
from mtpwatch.sim.harness import SimThread

PRESET = "gemma4-e4b-gb10"
QUICK = ["--prompts", "long-en", "--limit", "1", "--runs", "3", "--max-tokens", "32", "--no-progress"]


@pytest.fixture(scope="module")
def ab_urls() -> Iterator[tuple[str, str]]:
    with (
        SimThread(preset=PRESET, spec=False, speed=40) as a,
        SimThread(preset=PRESET, spec=True, speed=40) as b,
    ):
        yield a, b


def test_the_simulator_counts_tokens_as_vllm_s_tokenize(ab_urls: tuple[str, str]) -> None:
    reply = httpx.post(ab_urls[0] + "/tokenize", json={"prompt": "Hello there, world"})
    body = reply.json()
    assert reply.status_code == 200 and body["tokens"] == prompt_token_ids("Hello there, world")
    assert body["count"] == len(body["tokens"]) and body["max_model_len"] > 0
    assert httpx.post(ab_urls[0] + "/tokenize", json={"messages": []}).status_code == 400


def test_context_lengths_table_and_json(ab_urls: tuple[str, str], tmp_path: Path) -> None:
    out = tmp_path / "ctx.json"
    args = ["--ab", *ab_urls, "--context-lengths", "1024,256", *QUICK, "--json-file", str(out)]
    res = CliRunner().invoke(command, args)
    assert res.exit_code == 0, res.output
    assert "acceptance against context length" in res.stdout and "(server /tokenize)" in res.stdout
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["kind"] == "context sweep" and doc["token_source"] == "server /tokenize"
    rows = {r["length"]: r for r in doc["rows"]}
    assert sorted(rows) == [256, 1024] and set(doc["bench"]) == {"256", "1024"}
    for n, row in rows.items():
        # in the server's own tokens: the longest padding that stays at or under the target
        assert row["counted"] and all(n - 8 <= t <= n for t in row["prompt_tokens"])
        low, high = row["speedup_ci"]
        assert row["pairs"] == 2 and low <= row["speedup"] <= high
        assert 0 < row["acceptance_rate"] <= 1 and len(row["per_position"]) >= 1
        # each length's own bench ran the padded prompts
        runs = doc["bench"][str(n)]["runs"]
        assert runs and all(r["prompt"].endswith(f"@{n}") for r in runs)


def test_a_length_past_max_model_len_is_refused_before_sending(ab_urls: tuple[str, str]) -> None:
    max_len = httpx.get(ab_urls[0] + "/v1/models").json()["data"][0]["max_model_len"]
    res = CliRunner().invoke(command, ["--ab", *ab_urls, "--context-lengths", f"256,{max_len}", *QUICK])
    assert res.exit_code == 2
    assert f"--context-lengths {max_len}: with max_tokens 32" in res.output
    assert "(from /v1/models)" in res.output


def test_padding_without_a_tokenizer_is_an_estimate() -> None:
    prompts = resolve("long-en", limit=1)
    padded = pad_prompt(prompts[0], 512, filler_text(prompts), lambda _text: None)
    assert not padded.counted and padded.tokens == 512 and len(padded.prompt.text) >= 4 * 500
    assert padded.prompt.text.endswith(prompts[0].text)  # the question stays last
    with pytest.raises(ContextError):
        parse_lengths("256,abc")
    assert parse_lengths("4096, 256,256") == [256, 4096]
    with pytest.raises(ContextError, match="max_model_len 1000"):
        check_lengths([512, 999], [Prompt("p", "x", "c", max_tokens=8)], 1000)


def test_plot_draws_acceptance_against_context_length(ab_urls: tuple[str, str], tmp_path: Path) -> None:
    from mtpwatch.cli import cli

    out, svg = tmp_path / "ctx.json", tmp_path / "ctx.svg"
    args = ["--ab", *ab_urls, "--context-lengths", "128,512", *QUICK, "--json-file", str(out)]
    assert CliRunner().invoke(command, args).exit_code == 0
    table = CliRunner().invoke(cli, ["plot", str(out), "--only", "context", "--table"])
    assert table.exit_code == 0, table.output
    assert "acceptance vs prompt length" in table.output and "per position" in table.output
    lines = [line.split() for line in table.output.splitlines()]
    assert [cells[0] for cells in lines if cells and cells[0] in ("128", "512")] == ["128", "512"]
    drawn = CliRunner().invoke(cli, ["plot", str(out), "--only", "context", "--svg", str(svg)])
    assert drawn.exit_code == 0, drawn.output
    assert "acceptance vs prompt length" in drawn.output and svg.read_text(encoding="utf-8").startswith("<")


def test_context_lengths_want_running_servers() -> None:
    res = CliRunner().invoke(command, ["--start", "m", "--context-lengths", "256", "--sweep-k", "0,1"])
    assert res.exit_code == 2 and "--context-lengths measures running servers" in res.output
