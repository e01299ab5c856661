"""Loaders for prompt files users already have: `vllm bench serve` custom JSONL and ShareGPT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.commands.bench import command as bench_command
from mtpwatch.core.ab import workloads
from mtpwatch.core.ab.workloads import WorkloadError


def test_vllm_bench_custom_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "custom.jsonl"
    rows = [{"prompt": "Tell me about GPUs.", "output_tokens": 64}, {"prompt": "Count to ten."}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    prompts = workloads.resolve(str(path))
    assert [p.text for p in prompts] == ["Tell me about GPUs.", "Count to ten."]
    assert [p.max_tokens for p in prompts] == [64, workloads.DEFAULT_MAX_TOKENS]
    assert [p.id for p in prompts] == ["custom.jsonl:1", "custom.jsonl:2"]
    # --max-tokens still wins over the file
    assert {p.max_tokens for p in workloads.resolve(str(path), max_tokens=8)} == {8}


def test_custom_jsonl_bad_output_tokens_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"prompt": "x", "output_tokens": "many"}) + "\n", encoding="utf-8")
    with pytest.raises(WorkloadError, match=r"bad.jsonl:1: 'max_tokens'/'output_tokens' must be"):
        workloads.resolve(str(path))


SHAREGPT = [
    {
        "id": "conv-a",
        "conversations": [
            {"from": "human", "value": "What is speculative decoding?"},
            {"from": "gpt", "value": "A way to decode faster."},
            {"from": "human", "value": "Why does it work?"},
        ],
    },
    {"id": "empty", "conversations": []},
    {
        "id": "conv-b",
        "conversations": [
            {"from": "system", "value": "You are terse."},
            {"from": "human", "value": "Name a GPU."},
        ],
    },
]


def test_sharegpt_json_array(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(SHAREGPT, indent=1), encoding="utf-8")
    prompts = workloads.resolve(str(path))
    # the first human turn of each conversation; the empty conversation is skipped like vllm bench does
    assert [(p.id, p.text) for p in prompts] == [
        ("conv-a", "What is speculative decoding?"),
        ("conv-b", "Name a GPU."),
    ]


def test_sharegpt_jsonl_and_openai_messages(tmp_path: Path) -> None:
    path = tmp_path / "chats.jsonl"
    lines = [
        json.dumps(SHAREGPT[0]),
        json.dumps({"messages": [{"role": "user", "content": "Hi there"}], "category": "chat"}),
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    prompts = workloads.resolve(str(path))
    assert [p.text for p in prompts] == ["What is speculative decoding?", "Hi there"]
    assert [p.category for p in prompts] == ["default", "chat"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[{"conversations": [{"from": "gpt", "value": "hi"}]}]', "no human/user turn"),
        ('[{"conversations": "text"}]', "must be a non-empty list"),
        ("[1, 2]", "expected a JSON object"),
        ('{"conversations": [{"from": "human", "value": 3}]}', "the first user turn has no text"),
        ("[\n{", "not valid JSON"),
    ],
)
def test_sharegpt_errors_are_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(WorkloadError, match=message) as exc:
        workloads.resolve(str(path))
    assert "\n" not in str(exc.value)


def test_bench_cli_reports_a_bad_sharegpt_file_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('[{"conversations": [{"from": "gpt", "value": "hi"}]}]', encoding="utf-8")
    res = CliRunner().invoke(bench_command, ["http://127.0.0.1:9", "--prompts", str(path)])
    assert res.exit_code == 2
    assert "no human/user turn" in res.output and "Traceback" not in res.output
