"""Built-in prompt sets and JSONL loaders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpwatch.core.ab import workloads
from mtpwatch.core.ab.workloads import WorkloadError


def test_builtin_sets_shape() -> None:
    long = workloads.builtin("long")
    assert {p.category for p in long} == {"long-ja", "long-en"}
    assert all(p.max_tokens == 256 for p in long)
    ja = [p for p in long if p.category == "long-ja"]
    assert ja and all("200文字" in p.text for p in ja)
    en = [p for p in long if p.category == "long-en"]
    assert en and all("150 words" in p.text for p in en)

    short = workloads.builtin("short")
    assert short and all(p.max_tokens == 8 for p in short)
    for p in short:
        # 3-shot: three worked answers, then the question left open for one label
        answers = p.text.count("Answer:") + p.text.count("答え:")
        assert answers == 4, p.id
        assert p.text.rstrip().endswith(("Answer:", "答え:"))

    everything = workloads.builtin("all")
    assert {"long-ja", "long-en", "short-mc-ja", "short-mc-en", "code", "math"} <= set(
        workloads.categories(everything)
    )
    ids = [p.id for p in everything]
    assert len(ids) == len(set(ids))


def test_unknown_builtin_is_one_line() -> None:
    with pytest.raises(WorkloadError) as exc:
        workloads.resolve("nope")
    assert "\n" not in str(exc.value) and "nope" in str(exc.value)


def test_user_jsonl(tmp_path: Path) -> None:
    f = tmp_path / "mine.jsonl"
    f.write_text(
        "\n".join(
            [
                json.dumps({"prompt": "hello", "category": "greet", "max_tokens": 32}),
                "",
                "# a comment",
                json.dumps({"prompt": "bye"}),
            ]
        ),
        encoding="utf-8",
    )
    ps = workloads.resolve(str(f))
    assert [(p.text, p.category, p.max_tokens) for p in ps] == [
        ("hello", "greet", 32),
        ("bye", "default", 256),
    ]
    assert ps[1].id == "mine.jsonl:4"


def test_speed_bench_shape(tmp_path: Path) -> None:
    f = tmp_path / "speed.jsonl"
    rows = [
        {
            "question_id": "q1",
            "category": "coding",
            "sub_category": "x",
            "turns": ["write a sort", "now faster"],
        },
        {"question_id": "q2", "category": "writing", "turns": ["a poem"], "multiturn": False},
        {"question": "what is 2+2", "category": "math"},
    ]
    f.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    ps = workloads.load_jsonl(f)
    assert [(p.id, p.text, p.category) for p in ps] == [
        ("q1", "write a sort", "coding"),
        ("q2", "a poem", "writing"),
        ("speed.jsonl:3", "what is 2+2", "math"),
    ]


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("{not json", "not valid JSON"),
        ('{"category": "x"}', "no prompt text"),
        ('{"prompt": ""}', "non-empty"),
        ('{"prompt": "a", "max_tokens": 0}', "max_tokens"),
        ('{"turns": []}', "turns"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: str, needle: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"prompt": "ok"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(WorkloadError) as exc:
        workloads.load_jsonl(f)
    msg = str(exc.value)
    assert "bad.jsonl:2" in msg and needle in msg and "\n" not in msg


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="not found"):
        workloads.load_jsonl(tmp_path / "absent.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(WorkloadError, match="no prompts"):
        workloads.load_jsonl(empty)


def test_resolve_limit_per_category_and_max_tokens() -> None:
    ps = workloads.resolve("long", limit=2, max_tokens=64)
    assert len(ps) == 4
    assert [p.category for p in ps].count("long-ja") == 2
    assert all(p.max_tokens == 64 for p in ps)
    with pytest.raises(WorkloadError):
        workloads.resolve("long", limit=0)
