"""Output text: deterministic at T=0, identical with speculation on and off; varies with seed at T>0."""

from __future__ import annotations

from typing import Any

from mtpwatch.sim.corpus import TextSource, categorize, split_pieces, token_id
from mtpwatch.sim.harness import running_sim


def _text(events: list[Any]) -> str:
    out = []
    for e in events:
        if isinstance(e, dict) and e["choices"]:
            c = e["choices"][0]
            out.append(c.get("text") or c.get("delta", {}).get("content") or "")
    return "".join(out)


async def test_identical_text_spec_on_and_off(sse: Any) -> None:
    body = {
        "messages": [{"role": "user", "content": "Write a python function"}],
        "max_tokens": 80,
        "temperature": 0,
    }
    async with running_sim(speed=50.0) as on, running_sim(spec=False, speed=50.0) as off:
        a = await sse(on, "/v1/chat/completions", body)
        b = await sse(off, "/v1/chat/completions", body)
        c = await sse(on, "/v1/chat/completions", body)
    assert _text(a) == _text(b) == _text(c)
    assert len(_text(a)) > 40
    assert len(a) < len(b)  # same text, fewer chunks with speculation


async def test_temperature_varies_by_seed(sse: Any) -> None:
    base = {"prompt": "Tell a story", "max_tokens": 40, "temperature": 1.0, "ignore_eos": True}
    async with running_sim(speed=50.0) as url:
        s1 = _text(await sse(url, "/v1/completions", {**base, "seed": 1}))
        s1b = _text(await sse(url, "/v1/completions", {**base, "seed": 1}))
        s2 = _text(await sse(url, "/v1/completions", {**base, "seed": 2}))
    assert s1 == s1b
    assert s1 != s2


def test_pieces_and_ids_are_stable() -> None:
    assert split_pieces("Hello, speculative world") == ["Hello", ",", " specul", "ative", " world"]
    assert "".join(split_pieces("日本語のテキスト")) == "日本語のテキスト"
    assert token_id(" world") == token_id(" world") and 100 <= token_id(" world") < 262144


def test_categories() -> None:
    assert categorize("Write a Python function") == "code"
    assert categorize("Solve x^2 - 1 = 0") == "math"
    assert categorize("日本語で説明して") == "japanese"
    assert categorize("Write a short story") == "creative"
    assert categorize("Explain memory bandwidth") == "prose"
    assert TextSource("Write python code").acceptance_factor > TextSource("a story").acceptance_factor
