"""The report's provenance block against a real vLLM (CPU build): /version, /v1/models, cache_config_info.

Runs first in this folder and uses the baseline server, which the next file's first test reuses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.commands.bench import command

from .conftest import ServerPool

pytestmark = pytest.mark.real_vllm


@pytest.mark.timeout(900)  # the first test of the folder waits for the server's start
def test_bench_report_provenance_from_a_real_vllm(server_pool: ServerPool, tmp_path: Path) -> None:
    server = server_pool.get("baseline")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        json.dumps({"prompt": "One, two, three,", "output_tokens": 8}) + "\n", encoding="utf-8"
    )
    out = tmp_path / "real.json"
    res = CliRunner().invoke(
        command,
        [server.url, "--prompts", str(prompts), "--runs", "2", "--warmup", "1", "--json-file", str(out),
         "--label", "real baseline"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    meta = json.loads(out.read_text(encoding="utf-8"))["meta"]
    arm = meta["arms"]["a"]
    assert arm["vllm_version"].startswith("0.32.0")  # GET /version of the real server
    assert arm["served_name"] == server.served_name and arm["model"] == str(server.model_path)
    assert arm["speculative"] is False and arm["k"] is None
    # the engine flags vLLM exposes as labels of vllm:cache_config_info
    assert arm["engine"]["block_size"].isdigit() and "enable_prefix_caching" in arm["engine"]
    assert arm["errors"] == [] and meta["label"] == "real baseline"
    assert meta["prompt_set"]["name"] == "p.jsonl" and meta["prompt_set"]["prompts"] == 1
