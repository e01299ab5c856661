"""Answers follow the prompt: its language and form pick a category, its words the answer; the text
is the same with speculation on and off at temperature 0 (what the A/B lossless check compares)."""

from __future__ import annotations

from typing import Any

import pytest

from mtpwatch.sim.corpus import CATEGORIES, TextSource, categorize, pick_entry, split_pieces
from mtpwatch.sim.harness import running_sim


def _answer(prompt: str) -> str:
    return "".join(t.text for t in TextSource(prompt).tokens())


@pytest.mark.parametrize(
    ("prompt", "category"),
    [
        ("Write a haiku about GPUs", "poem"),
        ("A poem about the sea, please", "poem"),
        ("List five tips for faster speculative decoding", "list"),
        ("Tell me a story about a robot", "creative"),
        ("Explain the history of the printing press", "prose"),  # 'history' holds no 'story'
        ("Write a Python function that merges two sorted lists", "code"),
        ("Solve x^2 - 5x + 6 = 0", "math"),
        ("Translate 'good morning' into French", "french"),
        ("Explique la bande passante de la mémoire", "french"),
        ("Erkläre, wie die Speicherbandbreite die Geschwindigkeit begrenzt", "german"),
        ("¿Cómo funciona la decodificación especulativa?", "spanish"),
        ("用中文解释推测解码", "chinese"),
        ("日本語で説明して", "japanese"),
        # a poem in the language asked for (French prose before), a few CJK characters in a French
        # prompt leave it French (Chinese before)
        ("Écris un haïku sur les GPU", "french-poem"),
        ("Write a haiku about GPUs in French", "french-poem"),
        ("Schreibe ein Gedicht über die GPU, bitte", "german-poem"),
        ("GPUについての俳句を書いて", "japanese-poem"),
        ("Explique le mot 日本語 et ce que veut dire la langue", "french"),
        ("Réponds en 日本語, s'il te plaît", "japanese"),
    ],
)
def test_the_prompt_picks_its_category(prompt: str, category: str) -> None:
    assert categorize(prompt) == category
    assert TextSource(prompt).category == category


def test_a_haiku_about_gpus_is_one_gpu_haiku() -> None:
    text = _answer("Write a haiku about GPUs")
    lines = text.strip("\n").split("\n")
    assert len(lines) == 3  # one haiku, ended where it ends (not 256 tokens of an essay)
    assert "cores" in text
    assert "speculative" not in text.lower()
    assert _answer("Write a haiku about the ocean") != text  # the topic picks the haiku


def test_a_french_haiku_request_gets_a_french_haiku() -> None:
    text = _answer("Écris un haïku sur les GPU")
    assert len(text.strip("\n").split("\n")) == 3 and "cœurs" in text  # the GPU haiku, in French
    assert "Le décodage" not in text and "bande passante" not in text  # not the French prose


def test_topic_words_pick_the_answer_within_a_category() -> None:
    assert "merge_sorted" in _answer("Write a Python function that merges two sorted lists")
    assert "fibonacci" in _answer("Python code for the Fibonacci sequence")
    assert _answer("Explain memory bandwidth").startswith("Memory bandwidth")
    assert "Speicherbandbreite" in _answer("Erkläre die Speicherbandbreite und die GPU, bitte")


def test_every_entry_round_trips_and_is_reachable() -> None:
    for category, entries in CATEGORIES.items():
        for _tags, text in entries:
            assert "".join(split_pieces(text)) == text, (category, text[:30])
        assert 0 <= pick_entry(category, "anything at all") < len(entries)


def test_answers_are_deterministic_at_temperature_zero() -> None:
    for prompt in ("Write a haiku about GPUs", "Explique le décodage spéculatif", "Tell a story"):
        assert _answer(prompt) == _answer(prompt)


def _text(events: list[Any]) -> str:
    out = []
    for e in events:
        if isinstance(e, dict) and e["choices"]:
            c = e["choices"][0]
            out.append(c.get("text") or c.get("delta", {}).get("content") or "")
    return "".join(out)


@pytest.mark.parametrize(
    "prompt", ["Write a haiku about GPUs", "Explique le décodage spéculatif", "List tips for a hike"]
)
async def test_both_arms_give_the_same_answer(sse: Any, prompt: str) -> None:
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 200, "temperature": 0}
    async with running_sim(speed=50.0) as on, running_sim(spec=False, speed=50.0) as off:
        a = _text(await sse(on, "/v1/chat/completions", body))
        b = _text(await sse(off, "/v1/chat/completions", body))
    assert a == b
    assert a and _answer(prompt).startswith(a)  # the corpus's answer (cut at max_tokens)


def test_the_demo_loops_prompts_each_get_their_own_answer() -> None:
    from mtpwatch.core.ab.workloads import builtin
    from mtpwatch.session.demo_loop import loop_prompts
    from mtpwatch.ui.screens.monitor import SAMPLE_PROMPT

    prompts = loop_prompts(SAMPLE_PROMPT)[1:]  # the built-in long-answer and code prompts
    openings = {_answer(p)[:40] for p in prompts}
    assert len(openings) == len(prompts)
    tides = next(p.text for p in builtin("long-en") if "tides" in p.text)
    assert "Moon" in _answer(tides)
    sql = next(p.text for p in builtin("code") if "SQL" in p.text)
    assert categorize(sql) == "code" and "SELECT" in _answer(sql)
