"""Fuzzing the JSONL prompt loaders: they raise only `WorkloadError`, and read what `json` reads.

A prompt file is any text: every line is either skipped (blank, '#'), a prompt whose fields are exactly
what `json.loads` gives for that line, or the one `WorkloadError` naming the file and line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mtpwatch.core.ab.workloads import DEFAULT_MAX_TOKENS, WorkloadError, load_jsonl, parse_jsonl

# Text a model or a user writes, line separators JSON does not escape (U+2028, U+0085, …) included.
TEXT = st.text(
    st.characters(blacklist_categories=["Cs"]) | st.sampled_from("\u2028\u2029\x85\x1c\x0b\x0c"), max_size=12
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(TEXT, kids, max_size=3),
    max_leaves=10,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "prompt": TEXT | JSON,
        "question": TEXT,
        "text": TEXT,
        "turns": st.lists(TEXT, max_size=2) | JSON,
        "category": TEXT | JSON,
        "max_tokens": st.integers(-2, 10**6) | JSON,
        "id": TEXT | st.integers() | JSON,
        "question_id": TEXT,
    },
)
OBJECTS = st.one_of(FIELDS, JSON)


def _expected(obj: object) -> tuple[str, str, int] | None:
    """(text, category, max_tokens) that `obj` must give, or None when it must be refused."""
    if not isinstance(obj, dict):
        return None
    text = next((obj[k] for k in ("prompt", "question", "text") if k in obj), None)
    if text is None and "turns" in obj:
        turns = obj["turns"]
        text = turns[0] if isinstance(turns, list) and turns else 0
    if not isinstance(text, str) or not text.strip():
        return None
    category = obj.get("category") or "default"
    max_tokens = obj.get("max_tokens", DEFAULT_MAX_TOKENS)
    if not isinstance(category, str) or type(max_tokens) is not int or max_tokens < 1:
        return None
    return text, category, max_tokens


@given(st.lists(OBJECTS, min_size=1, max_size=5), st.booleans())
def test_jsonl_reads_what_json_reads(objects: list[object], ensure_ascii: bool) -> None:
    lines = [json.dumps(o, ensure_ascii=ensure_ascii) for o in objects]
    expected = [_expected(json.loads(line)) for line in lines]
    try:
        prompts = parse_jsonl(lines, source="p.jsonl")
    except WorkloadError as exc:
        assert None in expected, exc
        bad = expected.index(None) + 1
        assert str(exc).startswith(f"p.jsonl:{bad}: ") and "\n" not in str(exc)
        assert "not valid JSON" not in str(exc)  # every line is JSON: the refusal is about its fields
        return
    assert [(p.text, p.category, p.max_tokens) for p in prompts] == expected


@given(st.lists(FIELDS, min_size=1, max_size=4))
def test_jsonl_file_reads_what_json_reads(
    tmp_path_factory: pytest.TempPathFactory, objects: list[object]
) -> None:
    # Through a real file: the line splitting must be JSONL's (\n), not str.splitlines' (which also
    # breaks on U+2028, U+0085, \x1c…, characters a JSON string may hold unescaped).
    lines = [json.dumps(o, ensure_ascii=False) for o in objects]
    expected = [_expected(json.loads(line)) for line in lines]
    path = tmp_path_factory.mktemp("w") / "p.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        prompts = load_jsonl(path)
    except WorkloadError as exc:
        assert None in expected, exc
        assert str(exc).startswith(f"p.jsonl:{expected.index(None) + 1}: ")
        assert "not valid JSON" not in str(exc)
        return
    assert [(p.text, p.category, p.max_tokens) for p in prompts] == expected


@given(st.text(max_size=300))
def test_arbitrary_text_raises_only_workload_error(text: str) -> None:
    try:
        parse_jsonl(text.split("\n"))
    except WorkloadError as exc:
        assert str(exc) and "\n" not in str(exc)


@pytest.mark.parametrize(
    "line",
    ["[" * 100_000, '{"prompt": ' * 50_000, "1" * 5000, '{"prompt": "x", "max_tokens": ' + "9" * 5000 + "}"],
    ids=["deep-array", "deep-object", "huge-int", "huge-max-tokens"],
)
def test_hostile_lines_are_one_error(line: str, tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match=r"^p.jsonl:1: "):
        parse_jsonl([line], source="p.jsonl")
    path = tmp_path / "p.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(WorkloadError):
        load_jsonl(path)
