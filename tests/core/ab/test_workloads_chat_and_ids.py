"""Prompt files given as chat messages or as token ids (`core.ab.workloads`): the first user message
is the prompt whatever comes before it; token ids are refused in one line naming the file and line
(a prompt is sent as text: completions take it as-is, chat as the single user message)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.commands.bench import command as bench_command
from mtpwatch.core.ab import workloads
from mtpwatch.core.ab.workloads import WorkloadError


def write(tmp_path: Path, *objs: object) -> Path:
    path = tmp_path / "chats.jsonl"
    path.write_text("\n".join(json.dumps(obj) for obj in objs) + "\n", encoding="utf-8")
    return path


def test_the_first_user_message_after_system_and_assistant_turns(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "id": "openai",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "assistant", "content": "Ready."},
                {"role": "User", "content": "What limits decode speed?"},
                {"role": "user", "content": "And prefill?"},
            ],
            "max_tokens": 32,
        },
        {"conversation": [{"from": "human", "value": "Name a drafter."}], "category": "chat"},
    )
    prompts = workloads.resolve(str(path))
    assert [(p.id, p.text, p.category, p.max_tokens) for p in prompts] == [
        ("openai", "What limits decode speed?", "default", 32),
        ("chats.jsonl:2", "Name a drafter.", "chat", workloads.DEFAULT_MAX_TOKENS),
    ]


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"messages": ["hello"]}, "chats.jsonl:1: each conversation turn must be an object"),
        ({"messages": []}, "chats.jsonl:1: 'conversations'/'messages' must be a non-empty list"),
        (
            {"messages": [{"role": "system", "content": "x"}]},
            "chats.jsonl:1: no human/user turn in the conversation",
        ),
        ({"prompt": [101, 2023, 102]}, "chats.jsonl:1: the prompt must be a non-empty string"),
        ({"turns": [[101, 2023]]}, "chats.jsonl:1: the prompt must be a non-empty string"),
    ],
)
def test_unusable_messages_and_token_ids_are_one_line(tmp_path: Path, obj: object, message: str) -> None:
    path = write(tmp_path, obj)
    with pytest.raises(WorkloadError) as exc:
        workloads.resolve(str(path))
    assert str(exc.value) == message


def test_the_bench_refuses_a_token_id_prompt_file_before_any_request(tmp_path: Path) -> None:
    path = write(tmp_path, {"prompt": "fine"}, {"prompt": [101, 2023, 102]})
    res = CliRunner().invoke(bench_command, ["http://127.0.0.1:9", "--prompts", str(path)])
    assert res.exit_code == 2
    assert "chats.jsonl:2: the prompt must be a non-empty string" in res.output
    assert "Traceback" not in res.output and "connection refused" not in res.output
