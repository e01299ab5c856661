"""The prompt forms vLLM's OpenAI server accepts besides one string, as the simulator takes them: token
ids, a batch (the first prompt answered), a list of strings, chat content as a list of parts; and the
400s for an empty or mistyped prompt. Each answer is the one the equivalent plain prompt gets."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mtpwatch.sim.harness import running_sim

FAST = {"speed": 400.0}
ASK = {"max_tokens": 6, "temperature": 0, "return_token_ids": True}


async def post(client: httpx.AsyncClient, url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(url + path, json={**ASK, **body})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_token_ids_and_a_batch_of_them_are_the_prompt() -> None:
    ids = [5, 6, 7, 8]
    async with running_sim(**FAST) as url, httpx.AsyncClient(timeout=30) as client:
        one = await post(client, url, "/v1/completions", {"prompt": ids})
        batch = await post(client, url, "/v1/completions", {"prompt": [ids, [9, 10]]})
    for answer in (one, batch):  # a batch: the first prompt is answered, as its only choice
        assert answer["usage"]["prompt_tokens"] == len(ids)
        assert answer["usage"]["completion_tokens"] == 6
        assert answer["choices"][0]["prompt_token_ids"] == ids
        assert len(answer["choices"]) == 1
    assert batch["choices"][0]["text"] == one["choices"][0]["text"]  # temperature 0: the same answer


async def test_a_list_of_strings_answers_its_first() -> None:
    async with running_sim(**FAST) as url, httpx.AsyncClient(timeout=30) as client:
        plain = await post(client, url, "/v1/completions", {"prompt": "What is a GPU?"})
        listed = await post(client, url, "/v1/completions", {"prompt": ["What is a GPU?", "And a TPU?"]})
    assert listed["choices"][0]["text"] == plain["choices"][0]["text"]
    assert listed["choices"][0]["prompt_token_ids"] == plain["choices"][0]["prompt_token_ids"]
    assert listed["usage"] == plain["usage"]


async def test_chat_content_as_a_list_of_parts_is_its_text() -> None:
    text = {"messages": [{"role": "user", "content": "Explain KV caches."}]}
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "Explain KV caches."}]}]}
    async with running_sim(**FAST) as url, httpx.AsyncClient(timeout=30) as client:
        plain = await post(client, url, "/v1/chat/completions", text)
        split = await post(client, url, "/v1/chat/completions", parts)
    assert split["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]
    assert split["usage"] == plain["usage"]


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        ("/v1/completions", {"prompt": []}, "prompt must not be empty"),
        ("/v1/completions", {"prompt": 5}, "prompt must be a string or a list"),
        ("/v1/chat/completions", {"messages": []}, "messages must be a non-empty list"),
        ("/v1/chat/completions", {"messages": "hi"}, "messages must be a non-empty list"),
    ],
)
async def test_an_empty_or_mistyped_prompt_is_a_400(path: str, body: dict[str, Any], message: str) -> None:
    async with running_sim(**FAST) as url, httpx.AsyncClient(timeout=30) as client:
        response = await client.post(url + path, json={**ASK, **body})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == f"invalid request: {message}"
    assert error["type"] == "BadRequestError"
