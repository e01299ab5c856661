"""HTTP surface of the simulator: shapes of every endpoint against the real vLLM 0.32 captures."""

from __future__ import annotations

import json
from typing import Any

import httpx

from mtpwatch.sim.harness import running_sim
from tests.datadir import DataDir

FAST = {"speed": 50.0}


def _fixture_events(text: str) -> list[Any]:
    out: list[Any] = []
    for line in text.splitlines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def _shape(event: Any) -> Any:
    """Keys (recursively into choices/delta) of one event, without values."""
    if not isinstance(event, dict):
        return event
    shape: dict[str, Any] = {}
    for key, val in event.items():
        if key == "choices":
            shape[key] = [_shape(c) for c in val]
        elif key == "delta":
            shape[key] = sorted(val)
        else:
            shape[key] = None
    return list(shape.items())


async def test_health_version_headers() -> None:
    async with running_sim(**FAST) as url, httpx.AsyncClient() as client:
        health = await client.get(url + "/health")
        version = await client.get(url + "/version")
    assert health.status_code == 200 and health.content == b""
    assert version.json() == {"version": "0.32.0"}
    assert version.headers["server"] == "mtpwatch-sim"
    assert version.headers["x-mtpwatch-sim"] == "1"


async def test_models_card() -> None:
    async with running_sim(served_model_name="e4b", **FAST) as url, httpx.AsyncClient() as client:
        body = (await client.get(url + "/v1/models")).json()
    assert body["object"] == "list"
    card = body["data"][0]
    assert card["id"] == "e4b"
    assert card["owned_by"] == "vllm"
    assert card["root"] == "google/gemma-4-E4B-it"
    assert card["parent"] is None
    assert card["max_model_len"] == 131072
    assert card["permission"][0]["object"] == "model_permission"
    assert set(card) == {
        "id",
        "object",
        "created",
        "owned_by",
        "root",
        "parent",
        "max_model_len",
        "permission",
    }


async def test_chat_stream_shapes_match_real_capture(sse: Any, data: DataDir) -> None:
    real = _fixture_events(data.text("sse-ngram-k4-chat.txt"))
    body = {
        "model": "spec",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 40,
        "temperature": 0,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    async with running_sim(served_model_name="spec", **FAST) as url:
        events = await sse(url, "/v1/chat/completions", body)
    assert events[-1] == "[DONE]"
    # role chunk, content chunks, last content chunk (finish_reason), usage chunk, [DONE]
    assert _shape(events[0]) == _shape(real[0])
    assert _shape(events[1]) == _shape(real[1])
    assert _shape(events[-3]) == _shape(real[-3])
    assert _shape(events[-2]) == _shape(real[-2])
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["usage"]["completion_tokens"] == 40
    assert events[-2]["system_fingerprint"].startswith("vllm-0.32.0-")
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    # speculation: fewer content chunks than tokens
    assert len(events) - 3 < 40


async def test_completions_stream_shapes_match_real_capture(sse: Any, data: DataDir) -> None:
    real = _fixture_events(data.text("sse-baseline-completions.txt"))
    body = {
        "model": "base",
        "prompt": "The quick brown fox",
        "max_tokens": 16,
        "temperature": 0,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    async with running_sim(served_model_name="base", spec=False, **FAST) as url:
        events = await sse(url, "/v1/completions", body)
    assert [_shape(e) for e in events[:-3]] == [_shape(real[0])] * (len(events) - 3)
    assert _shape(events[-3]) == _shape(real[-3])
    assert _shape(events[-2]) == _shape(real[-2])
    # no speculation: exactly one token per chunk
    assert len(events) - 2 == 16


async def test_fingerprint_on_last_chunk_without_usage(sse: Any) -> None:
    body = {"prompt": "abc", "max_tokens": 5, "temperature": 0, "ignore_eos": True}
    async with running_sim(**FAST) as url:
        events = await sse(url, "/v1/completions", body)
    assert events[-1] == "[DONE]"
    assert "system_fingerprint" in events[-2] and events[-2]["choices"][0]["finish_reason"] == "length"
    assert all("system_fingerprint" not in e for e in events[:-2])
    assert all("usage" not in e for e in events[:-1])


async def test_continuous_usage_and_token_ids(sse: Any) -> None:
    body = {
        "messages": [{"role": "user", "content": "Explain speculative decoding"}],
        "max_tokens": 50,
        "temperature": 0,
        "return_token_ids": True,
        "ignore_eos": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    async with running_sim(**FAST) as url:
        events = await sse(url, "/v1/chat/completions", body)
    chunks = events[:-1]
    assert chunks[0]["usage"]["completion_tokens"] == 0
    assert isinstance(chunks[0]["prompt_token_ids"], list)
    assert len(chunks[0]["prompt_token_ids"]) == chunks[0]["usage"]["prompt_tokens"]
    previous = 0
    for chunk in chunks[1:-1]:
        ids = chunk["choices"][0]["token_ids"]
        done = chunk["usage"]["completion_tokens"]
        assert done - previous == len(ids) >= 1  # cumulative usage, delta = tokens in this chunk
        assert chunk["usage"]["total_tokens"] == chunk["usage"]["prompt_tokens"] + done
        previous = done
    assert previous == 50
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 50
    assert max(len(c["choices"][0]["token_ids"]) for c in chunks[1:-1]) > 1  # multi-token chunks


async def test_non_streaming_chat_and_completion() -> None:
    async with running_sim(**FAST) as url, httpx.AsyncClient(timeout=30) as client:
        chat = (
            await client.post(
                url + "/v1/chat/completions",
                json={
                    "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 12,
                    "temperature": 0,
                    "ignore_eos": True,
                },
            )
        ).json()
        comp = (
            await client.post(
                url + "/v1/completions",
                json={"prompt": "hi", "max_tokens": 7, "temperature": 0, "ignore_eos": True},
            )
        ).json()
    assert chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert chat["choices"][0]["finish_reason"] == "length"
    assert chat["usage"]["completion_tokens"] == 12
    assert comp["object"] == "text_completion" and comp["usage"]["completion_tokens"] == 7
    assert comp["choices"][0]["text"]


async def test_natural_stop_finish_reason(sse: Any) -> None:
    body = {
        "prompt": "Tell me about bandwidth",
        "max_tokens": 4000,
        "temperature": 0,
        "stream_options": {"include_usage": True},
    }
    async with running_sim(speed=200.0) as url:
        events = await sse(url, "/v1/completions", body)
    assert events[-3]["choices"][0]["finish_reason"] == "stop"
    assert events[-2]["usage"]["completion_tokens"] < 4000


async def test_errors_are_vllm_shaped() -> None:
    async with running_sim(api_key="sekrit", **FAST) as url, httpx.AsyncClient() as client:
        unauth = await client.post(url + "/v1/completions", json={"prompt": "x"})
        auth = {"Authorization": "Bearer sekrit"}
        wrong_model = await client.post(
            url + "/v1/completions", json={"prompt": "x", "model": "nope"}, headers=auth
        )
        bad_json = await client.post(url + "/v1/completions", content=b"{", headers=auth)
        too_long = await client.post(
            url + "/v1/completions", json={"prompt": "x", "max_tokens": 10**7}, headers=auth
        )
        metrics = await client.get(url + "/metrics")  # /metrics is not behind the key, as in vLLM
    assert unauth.status_code == 401 and unauth.json() == {"error": "Unauthorized"}
    assert wrong_model.status_code == 404 and wrong_model.json()["error"]["type"] == "NotFoundError"
    assert bad_json.status_code == 400
    assert too_long.status_code == 400 and "maximum context length" in too_long.json()["error"]["message"]
    assert metrics.status_code == 200


async def test_sim_info() -> None:
    async with running_sim(preset="gemma4-26b-a4b-gb10", k=3, **FAST) as url, httpx.AsyncClient() as client:
        info = (await client.get(url + "/sim/info")).json()
    assert info["preset"] == "gemma4-26b-a4b-gb10"
    assert info["gpu"] == "GB10" and info["peak_gbps"] == 273.0
    assert info["k"] == 3 and info["method"] == "mtp"
    assert len(info["acceptance_profile"]) == 3
    assert info["model_config"] == "gemma-4-26B-A4B-it"
    # MoE: verifying k+1 tokens reads more target bytes than one token
    assert info["target_bytes_per_step"] > info["target_bytes_per_token"]
