"""`mtpwatch ab --start` from the command line, end to end, with the simulator standing in for vLLM.

The README's own command (`ab --start MODEL --drafter D -k 2`) and every method start two simulated
vLLM servers through `--vllm "… mtpwatch sim"`: the baseline twin has none of the treatment's
flags, flags after `--` reach both, `-a`/`-b` one each, the memory plan makes both fit one
simulated GB10, the API key reaches both through the environment and never their argv, and both
answer a prompt in the app (driven headless by Textual's Pilot) before Ctrl+Q stops every process.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.core.launch.process import group_members
from tests.feeds import monitor_of, server_feeds, server_process

E4B, E4B_D = "google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant"
SIM = f"{sys.executable} -m mtpwatch sim --speed 20"
KEY = "ab-start-secret-4711"


def _cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return [a.decode() for a in fh.read().split(b"\0") if a]


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as fh:
        pairs = [e.decode(errors="replace").split("=", 1) for e in fh.read().split(b"\0") if b"=" in e]
    return dict(p for p in pairs if len(p) == 2)


def _drive(seen: dict[str, Any]) -> Any:
    """A stand-in for `run_app`: the real app, headless, one prompt to both twins, then Ctrl+Q."""

    def run_app(config: Any, **kwargs: Any) -> int:
        from mtpwatch.ui.app import make_app

        async def main() -> None:
            app = make_app(config, **kwargs)
            async with app.run_test(size=(160, 48)) as pilot:
                panels = monitor_of(app.screen).panels
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 90
                while not all(p.view is not None and p.view.status == "up" for p in panels):
                    assert loop.time() < deadline, [p.view.status if p.view else None for p in panels]
                    await pilot.pause(0.1)
                feeds = server_feeds(app.screen)
                pids = [server_process(f).pid for f in feeds]
                seen["groups"] = [group_members(pid) for pid in pids]
                seen["argv"] = [_cmdline(pid) for pid in pids]
                seen["env"] = [_environ(pid) for pid in pids]
                seen["all_cmdlines"] = [_cmdline(p) for group in seen["groups"] for p in group]
                seen["speculative"] = [p.view.speculative if p.view else None for p in panels]
                await pilot.press(*"Repeat: the quick brown fox", "enter")
                while not all(p.prompt_count >= 1 for p in panels):
                    assert loop.time() < deadline, "no answer"
                    await pilot.pause(0.1)
                seen["tokens"] = [p.last_summary.tokens if p.last_summary else 0 for p in panels]
                await pilot.press("ctrl+q")
            seen["left"] = [m for pid in pids for m in group_members(pid)]

        asyncio.run(main())
        return 0

    return run_app


@pytest.mark.parametrize(
    ("method_args", "method", "drafter"),
    [
        ([], "mtp", E4B_D),  # the README's command: --drafter D -k 2 (MTP by default)
        (["--method", "ngram"], "ngram", None),
        (["--method", "eagle3"], "eagle3", "org/gemma-4-E4B-eagle3"),
        (["--method", "draft_model"], "draft_model", "google/gemma-4-E2B-it"),
    ],
)
def test_ab_start_every_method(
    method_args: list[str], method: str, drafter: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    seen: dict[str, Any] = {}
    monkeypatch.setattr("mtpwatch.ui.app.run_app", _drive(seen))
    args = ["ab", "--start", E4B, *method_args, "-k", "2", "--vllm", SIM, "--gpu", "GB10"]
    args += ["--drafter", drafter] if drafter else []
    args += ["-b", "--max-num-seqs 4", "--", "--max-model-len", "8192", "--enforce-eager"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    a_argv, b_argv = seen["argv"]
    # the baseline twin carries none of the treatment's speculative flags
    assert "--speculative-config" not in a_argv
    spec = json.loads(b_argv[b_argv.index("--speculative-config") + 1])
    assert spec["method"] == method and spec["num_speculative_tokens"] == 2
    assert spec.get("model") == drafter
    # passthrough to both, -b to B only, and each twin its own planned memory share
    for argv in (a_argv, b_argv):
        assert argv[argv.index("--max-model-len") + 1] == "8192" and "--enforce-eager" in argv
        assert argv.count("--gpu-memory-utilization") == 1
    assert "--max-num-seqs" not in a_argv and b_argv[b_argv.index("--max-num-seqs") + 1] == "4"
    # the key: in each server's environment, in no process's command line
    assert [env.get("VLLM_API_KEY") for env in seen["env"]] == [KEY, KEY]
    assert seen["all_cmdlines"] and not any(KEY in " ".join(c) for c in seen["all_cmdlines"])
    assert seen["speculative"] == [False, True]
    assert all(t > 1 for t in seen["tokens"])
    assert seen["left"] == [], "a simulated server outlived Ctrl+Q"


def test_the_readme_command_plans_and_prints_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # read where VLLM_API_KEY is absent
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    result = CliRunner().invoke(
        cli, ["ab", "--start", E4B, "--drafter", E4B_D, "-k", "2", "--gpu", "GB10", "--plan", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["schedule"] == "alternate" and "both fit" in doc["why"]
    assert [s["env"] for s in doc["servers"]] == [{"VLLM_API_KEY": "***"}] * 2
    assert KEY not in result.output
    assert all(isinstance(a, str) for s in doc["servers"] for a in s["argv"])
    big = ["ab", "--start", "google/gemma-4-31B-it", "--drafter", "google/gemma-4-31B-it-assistant"]
    text = CliRunner().invoke(cli, [*big, "-k", "2", "--gpu", "GB10", "--plan"])
    assert text.exit_code == 0 and "schedule: restart — both at once need" in text.output


@pytest.mark.parametrize(
    "drafter",
    ["z-lab/gemma-4-E4B-it-DFlash", "z-lab/Qwen3-8B-DFlash-b16", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"],
)
def test_a_dflash_or_eagle3_drafter_is_never_forced_to_mtp(
    drafter: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM 0.34 refuses method "mtp" for a DFlash checkpoint: without --method, the method is left to
    vLLM's detection (the checkpoint is not here offline), and the plan line says so and why."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    args = ["ab", "--start", E4B, "--drafter", drafter, "-k", "4", "--gpu", "GB10", "--vllm", SIM, "--plan"]
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    b_argv = doc["servers"][1]["argv"]
    assert json.loads(b_argv[b_argv.index("--speculative-config") + 1]) == {
        "model": drafter,
        "num_speculative_tokens": 4,
    }
    assert doc["vllm"] == {"version": "0.32.0", "source": f"{SIM} --version"}
    assert doc["method"].startswith("left out, vLLM detects it")
    text = CliRunner().invoke(cli, args).output
    assert "B · k=4 · method: vLLM detects:" in text
    assert "drafter not counted: give --drafter-gib or a local path" in text
    # an explicit --method wins
    forced = CliRunner().invoke(cli, [*args, "--json", "--method", "dflash"])
    b_argv = json.loads(forced.output)["servers"][1]["argv"]
    assert json.loads(b_argv[b_argv.index("--speculative-config") + 1])["method"] == "dflash"


def test_twins_without_a_plan_are_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU memory known (no NVML, no nvidia-smi) and none named: nothing starts, one line says why."""
    started: list[Any] = []

    def run_app(*a: Any, **k: Any) -> int:
        started.append(a)
        return 0

    monkeypatch.setattr("mtpwatch.ui.app.run_app", run_app)
    monkeypatch.setattr("mtpwatch.core.launch.gpumem.local_gpu_memory", lambda *a, **k: None)
    result = CliRunner().invoke(cli, ["ab", "--start", E4B, "--drafter", E4B_D, "-k", "2", "--vllm", SIM])
    assert result.exit_code == 1 and not started
    (line,) = result.output.splitlines()
    assert line.startswith("Error: no GPU memory known here")
    assert "--gpu NAME" in line and "--gpu-memory GIB" in line and "--restart" in line
    # each way out it names is a plan
    for way in (["--gpu", "GB10"], ["--gpu-memory", "40"], ["--restart"]):
        plan = CliRunner().invoke(cli, ["ab", "--start", E4B, "--drafter", E4B_D, "-k", "2", *way, "--plan"])
        assert plan.exit_code == 0, (way, plan.output)
    assert "schedule: restart" in plan.output


def test_twins_with_your_own_shares_and_no_gpu_collide_in_the_simulator_as_in_vllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No GPU known but your --gpu-memory-utilization for both: they start, and B dies with vLLM's message."""
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    seen: dict[str, Any] = {}

    def run_app(config: Any, **kwargs: Any) -> int:
        from mtpwatch.ui.app import make_app

        async def main() -> None:
            app = make_app(config, **kwargs)
            async with app.run_test(size=(160, 48)) as pilot:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 60
                while not any(f.state().status == "failed" for f in monitor_of(app.screen).feeds):
                    assert loop.time() < deadline
                    await pilot.pause(0.1)
                seen["reasons"] = [f.state().reason for f in monitor_of(app.screen).feeds]
                await pilot.press("ctrl+q")

        asyncio.run(main())
        return 0

    monkeypatch.setattr("mtpwatch.ui.app.run_app", run_app)
    monkeypatch.setattr("mtpwatch.core.launch.gpumem.local_gpu_memory", lambda *a, **k: None)
    args = ["ab", "--start", E4B, "--method", "ngram", "--vllm", SIM, "--", "--gpu-memory-utilization", "0.9"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    failed = [r for r in seen["reasons"] if r]
    assert failed and "status 1" in failed[0]
    assert "not enough free GPU memory at start-up" in failed[0]


def test_ab_help_names_the_real_prompt_sets() -> None:
    result = CliRunner().invoke(cli, ["ab", "--help"])
    text = "".join(result.output.split())  # the help wraps lines, at hyphens too
    assert "long-en,long-ja" in text and "long_en" not in text
    from mtpwatch.core.ab import workloads

    assert {"long-en", "long-ja"} <= set(workloads.BUILTIN_SETS)


def test_start_takes_its_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from mtpwatch.commands import start

    captured: dict[str, Any] = {}

    async def fake(argv: list[str], **kwargs: Any) -> int:
        captured.update(argv=argv, **kwargs)
        return 0

    monkeypatch.setattr(start, "run_headless", fake)
    # no vLLM here: not run
    monkeypatch.setattr("mtpwatch.commands.start.shutil.which", lambda program: program)
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    result = CliRunner().invoke(cli, ["start", E4B, "--headless", "--method", "ngram"])
    assert result.exit_code == 0, result.output
    assert captured["api_key"] == KEY and captured["env"] == {"VLLM_API_KEY": KEY}
    assert KEY not in " ".join(captured["argv"])
    assert os.environ.get("VLLM_API_KEY") is None


async def test_clients_read_openai_api_key_where_vllm_api_key_is_absent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mtpwatch.core.http.client import VllmClient

    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    client = VllmClient("http://127.0.0.1:9")
    assert client.api_key == KEY
    await client.aclose()
    monkeypatch.setenv("VLLM_API_KEY", "vllm-first")
    client = VllmClient("http://127.0.0.1:9")
    assert client.api_key == "vllm-first"
    await client.aclose()


def test_the_b_label_says_the_method_the_server_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DFlash drafter, method left to detection: B is labelled "k=4 · method: vLLM detects" until its
    engine init line says which method ran (the simulator detects it as vLLM does), then "DFlash k=4"."""
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    seen: dict[str, Any] = {}

    def run_app(config: Any, **kwargs: Any) -> int:
        from mtpwatch.ui.app import make_app

        seen["labels"] = [s.label for s in config.servers]

        async def main() -> None:
            app = make_app(config, **kwargs)
            async with app.run_test(size=(160, 48)) as pilot:
                b = monitor_of(app.screen).panels[1]
                deadline = asyncio.get_running_loop().time() + 90
                while str(b.border_title) != "B · DFlash k=4":
                    assert asyncio.get_running_loop().time() < deadline, str(b.border_title)
                    await pilot.pause(0.1)
                seen["titles"] = [str(p.border_title) for p in monitor_of(app.screen).panels]
                await pilot.press("ctrl+q")

        asyncio.run(main())
        return 0

    monkeypatch.setattr("mtpwatch.ui.app.run_app", run_app)
    args = ["ab", "--start", E4B, "--drafter", "z-lab/gemma-4-E4B-it-DFlash", "-k", "4", "--vllm", SIM]
    result = CliRunner().invoke(cli, [*args, "--gpu", "GB10"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert seen["labels"] == ["A · MTP off", "B · k=4 · method: vLLM detects"]
    assert seen["titles"] == ["A · MTP off", "B · DFlash k=4"]


@pytest.mark.parametrize(("version", "refused"), [("0.34.0", True), ("0.33.0", False)])
def test_twins_the_gpu_cannot_hold_now_are_refused_where_vllm_would_not(
    version: str, refused: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM 0.34 no longer refuses a share that is not free: mtpwatch reads the GPU just before the
    twins start and refuses in one line; 0.33 refuses by itself, so mtpwatch starts them."""
    from mtpwatch.core.launch.memplan import GIB, GpuMemory

    vllm = tmp_path / "vllm"
    vllm.write_text(f"#!/bin/sh\necho {version}\n")
    vllm.chmod(0o755)
    monkeypatch.setattr(
        "mtpwatch.core.launch.gpumem.local_gpu_memory",
        lambda *a, **k: GpuMemory("H100", 80 * GIB, 20 * GIB, "nvml"),
    )
    started: list[Any] = []

    def run_app(*a: Any, **k: Any) -> int:
        started.append(a)
        return 0

    monkeypatch.setattr("mtpwatch.ui.app.run_app", run_app)
    args = ["ab", "--start", E4B, "--drafter", E4B_D, "-k", "2", "--gpu", "H100 SXM", "--vllm", str(vllm)]
    result = CliRunner().invoke(cli, args)
    if refused:
        assert result.exit_code == 1 and not started
        (line,) = result.output.strip().splitlines()
        assert "GiB free now (nvml); vLLM 0.34 would start both and run short of memory" in line
    else:
        assert result.exit_code == 0 and len(started) == 1, result.output
