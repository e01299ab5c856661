"""core.provenance: secrets masked, prompt-set hash, start-up log facts, comparable fields."""

from __future__ import annotations

import json

import pytest

from mtpwatch.core import provenance
from mtpwatch.core.ab import workloads
from mtpwatch.core.launch import servers
from mtpwatch.core.launch.logparse import watch_lines
from tests.datadir import DataDir


def test_secrets_are_masked_and_nothing_else() -> None:
    argv = [
        "mtpwatch", "bench", "--max-tokens", "16", "--api-key", "S1", "--hf-token=abc",
        "--num-speculative-tokens", "3", "--launch-a", "vllm serve m --api-key K2 --port 8001",
        "HF_TOKEN=zz", "http://u:pw@h:1/x",
        "--ssl-keyfile", "/k.pem",
    ]  # fmt: skip
    masked = servers.mask_argv(argv)
    assert masked == [
        "mtpwatch", "bench", "--max-tokens", "16", "--api-key", "***", "--hf-token=***",
        "--num-speculative-tokens", "3", "--launch-a", "vllm serve m --api-key *** --port 8001",
        "HF_TOKEN=***", "http://u:***@h:1/x",
        "--ssl-keyfile", "/k.pem",
    ]  # fmt: skip
    assert servers.mask_secrets("Authorization: Bearer abc.def") == "Authorization: Bearer ***"
    assert provenance.parse_metadata(["a=1", "db_password=x", "url=http://h?x=1"]) == {
        "a": "1", "db_password": "***", "url": "http://h?x=1"
    }  # fmt: skip
    with pytest.raises(ValueError, match="KEY=VALUE"):
        provenance.parse_metadata(["=x"])


def test_prompt_set_hash_changes_with_any_prompt() -> None:
    prompts = workloads.resolve("short")
    h = provenance.prompt_set_hash(prompts)
    assert h.startswith("sha256:") and h == provenance.prompt_set_hash(workloads.resolve("short"))
    assert h != provenance.prompt_set_hash(workloads.resolve("short", max_tokens=9))
    assert h != provenance.prompt_set_hash(prompts[::-1])


def test_launched_server_facts_from_a_real_vllm_startup_log(data: DataDir) -> None:
    # the recorded start-up log of vLLM 0.32 (CPU) with ngram k=4, and the command line that started it
    log = data.text("vllm-startup-ngram-cpu.log").splitlines()
    spec = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4})
    argv = ["vllm", "serve", "/models/gemma3-270m", "--api-key", "secret", "--speculative-config", spec]
    info = provenance.launched_info("http://127.0.0.1:18012", argv, watch_lines(log).facts)
    assert (info.method, info.k, info.vllm_version) == ("ngram", 4, "0.32.0")
    assert info.spec_config is not None and info.spec_config["from_log"]["method"] == "ngram"
    assert info.spec_config["prompt_lookup_max"] == 4
    assert info.launch_argv is not None and "secret" not in info.launch_argv


def test_comparable_fields() -> None:
    meta = {
        "gpu": {"name": "GB10"},
        "prompt_set": {"hash": "sha256:x"},
        "temperature": 0.0,
        "arms": {"a": {"vllm_version": "0.32.0", "served_name": "m"}, "b": {"vllm_version": "0.32.0"}},
    }
    assert provenance.comparable_fields(meta) == {
        "GPU": "GB10",
        "prompt set hash": "sha256:x",
        "temperature": 0.0,
        "vLLM version (arm A)": "0.32.0",
        "vLLM version (arm B)": "0.32.0",
        "model (arm A)": "m",
        "model (arm B)": None,
    }
    assert provenance.comparable_fields({}, {"temperature": 0.7})["temperature"] == 0.7
