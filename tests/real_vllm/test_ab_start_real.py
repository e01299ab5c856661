"""`mtpwatch ab --start` against real vLLM (CPU build): ngram twins, flags passed through to both,
the API key in every server's environment and in no process's command line.

Two vLLM servers run at once here (the A/B twins), ~5-7 GB of RAM each.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.core.launch.process import descendants, group_members
from tests.feeds import monitor_of, opened_feeds, server_process

from .conftest import STARTUP_LIMIT_S, VLLM_ENV, RealEnv

pytestmark = pytest.mark.real_vllm

KEY = "real-ab-secret-2718"
PROMPT = "The quick brown fox jumps over the lazy dog near the river bank. " * 3 + "The quick brown fox"


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _all_cmdlines() -> list[str]:
    return [_cmdline(int(p)) for p in os.listdir("/proc") if p.isdigit()]


@pytest.mark.timeout(2 * STARTUP_LIMIT_S + 300)
def test_ab_start_ngram_twins_real(real_env: RealEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in VLLM_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    seen: dict[str, Any] = {}

    def run_app(config: Any, **kwargs: Any) -> int:
        from mtpwatch.ui.app import make_app

        async def main() -> None:
            app = make_app(config, **kwargs)
            async with app.run_test(size=(160, 48)) as pilot:
                panels, feeds = monitor_of(app.screen).panels, await opened_feeds(pilot)
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 2 * STARTUP_LIMIT_S
                while not all(p.view is not None and p.view.status == "up" for p in panels):
                    states = [f.state() for f in feeds]
                    assert loop.time() < deadline, [s.reason for s in states]
                    assert not any(s.status == "failed" for s in states), [s.reason for s in states]
                    await pilot.pause(0.5)
                pids = [server_process(f).pid for f in feeds]
                seen["members"] = sorted({m for pid in pids for m in [pid, *descendants(pid)]})
                seen["cmdlines"] = _all_cmdlines()
                seen["logs"] = ["\n".join(server_process(f).tail()) for f in feeds]
                async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}) as http:
                    seen["metrics"] = [(await http.get(f.spec.url + "/metrics")).text for f in feeds]
                    seen["unauthorised"] = (await http.get(feeds[0].spec.url + "/v1/models", headers={
                        "Authorization": "Bearer wrong"})).status_code  # fmt: skip
                seen["speculative"] = [p.view.speculative if p.view else None for p in panels]
                await pilot.press(*PROMPT, "enter")
                while not all(p.prompt_count >= 1 for p in panels):
                    assert loop.time() < deadline, "no answer"
                    await pilot.pause(0.2)
                seen["tokens"] = [p.last_summary.tokens if p.last_summary else 0 for p in panels]
                await pilot.press("ctrl+q")
            seen["left"] = [m for pid in pids for m in group_members(pid)]

        asyncio.run(main())
        return 0

    monkeypatch.setattr("mtpwatch.ui.app.run_app", run_app)
    model = str(real_env.models / "gemma3-270m")
    args = ["ab", "--start", model, "--method", "ngram", "-k", "4", "--vllm", str(real_env.vllm)]
    args += ["--max-tokens", "48", "-b", "--max-num-seqs 3"]
    args += ["--", "--max-model-len", "2048", "--enforce-eager", "--dtype", "bfloat16"]
    args += ["--gpu-memory-utilization", "0.55"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    # flags after -- reached both servers: in their start-up logs and in cache_config_info
    for log, page in zip(seen["logs"], seen["metrics"], strict=True):
        assert "'max_model_len': 2048" in log and "'gpu_memory_utilization': 0.55" in log
        assert 'gpu_memory_utilization="0.55"' in page
    assert "'max_num_seqs': 3" in seen["logs"][1] and "'max_num_seqs': 3" not in seen["logs"][0]
    assert "spec_decode_num_drafts_total" in seen["metrics"][1]
    assert "spec_decode_num_drafts_total" not in seen["metrics"][0]
    assert seen["speculative"] == [False, True]
    # the key works (the servers enforce it) and is in no process's argv
    assert seen["unauthorised"] == 401
    assert len(seen["members"]) >= 4  # two API servers and their engine processes
    assert not [c for c in seen["cmdlines"] if KEY in c]
    assert all(t > 1 for t in seen["tokens"])
    assert seen["left"] == []
