"""The simulator standing in for vLLM: `vllm serve`'s command line, and one simulated GPU's memory
shared by several servers (vLLM's start-up check, its message and exit status, the lingering worker)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import httpx
import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.core.launch.process import ServerProcess, StartupError, group_members
from mtpwatch.core.launch.servers import plan_twins
from mtpwatch.sim.gpu import SimGpu
from mtpwatch.sim.vllm_args import ServeArgsError, parse_serve_args, preset_for_model, served_method

E4B, E4B_D = "google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant"
SIM = f"{sys.executable} -m mtpwatch sim --speed 20"


def held(gpu: SimGpu) -> float:
    """Bytes the live servers hold on `gpu` now (its ledger)."""
    with gpu._locked() as data:
        return float(sum(e["bytes"] for e in data["servers"]))


def test_parse_serve_args() -> None:
    args = parse_serve_args(
        [
            "serve", E4B, "--speculative-config", '{"method":"ngram","num_speculative_tokens":3}',
            "--gpu-memory-utilization=0.4", "--max-model-len", "8k", "--enforce-eager", "--dtype", "bfloat16",
            "--disable-hybrid-kv-cache-manager",
        ]
    )  # fmt: skip
    assert args is not None
    assert args.model == E4B and args.speculative_config == {"method": "ngram", "num_speculative_tokens": 3}
    assert (args.gpu_memory_utilization, args.max_model_len, args.enforce_eager) == (0.4, 8000, True)
    assert args.ignored == ("--enforce-eager", "--dtype", "bfloat16", "--disable-hybrid-kv-cache-manager")
    api = parse_serve_args(["--model", "/models/x", "--kv-cache-memory-bytes", "2G"])
    assert api is not None and api.model == "/models/x" and api.kv_cache_memory_bytes == 2_000_000_000
    assert parse_serve_args([]) is None
    for bad in (["serve"], ["serve", "m", "--speculative-config", "[1]"], ["serve", "m", "stray"]):
        with pytest.raises(ServeArgsError):
            parse_serve_args(bad)
    assert preset_for_model("google/gemma-4-31B-it") == "gemma4-31b-h100"
    assert preset_for_model("/x/gemma-4-26B-A4B-it") == "gemma4-26b-a4b-gb10"


@pytest.mark.parametrize(
    "flags",
    [
        ["-sc", '{"method":"mtp","num_speculative_tokens":2}'],  # vLLM's short form
        ['-sc={"method":"mtp","num_speculative_tokens":2}'],
        ['--speculative-config={"method":"mtp","num_speculative_tokens":2}'],
        ["--speculative_config", '{"method":"mtp","num_speculative_tokens":2}'],  # underscores, as vLLM
        ['--speculative_config={"method":"mtp","num_speculative_tokens":2}'],
    ],
)
def test_every_spelling_of_the_speculative_config_is_read(flags: list[str]) -> None:
    args = parse_serve_args(["serve", E4B, *flags, "--gpu_memory_utilization", "0.4"])
    assert args is not None and args.ignored == ()
    assert args.speculative_config == {"method": "mtp", "num_speculative_tokens": 2}
    assert args.gpu_memory_utilization == 0.4


async def _start(argv: list[str], ledger: Path, linger: float = 0.6) -> ServerProcess:
    env = {"MTPWATCH_SIM_GPU_DIR": str(ledger), "MTPWATCH_SIM_WORKER_LINGER": str(linger)}
    return await ServerProcess.start(argv, env)


def _sim_argv(port: int, *flags: str) -> list[str]:
    return [*SIM.split(), "serve", E4B, "--host", "127.0.0.1", "--port", str(port), *flags]


async def test_twins_at_vllms_default_collide_like_vllm(tmp_path: Path) -> None:
    first = await _start(_sim_argv(free_port()), tmp_path)
    port = free_port()
    try:
        await first.wait_healthy(f"http://127.0.0.1:{first_port(first)}", timeout=60)
        second = await _start(_sim_argv(port), tmp_path)
        with pytest.raises(StartupError) as info:
            await second.wait_healthy(f"http://127.0.0.1:{port}", timeout=60)
        assert info.value.returncode == 1
        log = "\n".join(second.tail())
        assert "Free memory on device cuda:0 (" in log
        assert "on startup is less than desired GPU memory utilization (0.9, 100.85 GiB)" in log
        assert "Engine core initialization failed" in log
        await second.stop()
    finally:
        await first.stop()


def first_port(proc: ServerProcess) -> int:
    return int(proc.argv[proc.argv.index("--port") + 1])


async def test_the_plan_makes_twins_fit_and_the_ledger_counts_both(tmp_path: Path) -> None:
    from mtpwatch.core.launch.gpumem import gpu_from_table

    plan = plan_twins(
        E4B, ports=(free_port(), free_port()), drafter=E4B_D, k=2, vllm=SIM, gpu=gpu_from_table("GB10")
    )
    procs = [await _start(list(s.argv), tmp_path) for s in plan.servers]
    try:
        for proc, server in zip(procs, plan.servers, strict=True):
            await proc.wait_healthy(server.url, timeout=60)
        gpu = SimGpu.for_gpu("GB10", tmp_path)
        shares = [float(s.argv[s.argv.index("--gpu-memory-utilization") + 1]) for s in plan.servers]
        assert held(gpu) == pytest.approx(sum(shares) * gpu.total_bytes)
        async with httpx.AsyncClient() as http:
            info = [(await http.get(s.url + "/sim/info")).json() for s in plan.servers]
        assert [i["spec"] for i in info] == [False, True]
        assert info[1]["drafter"] == E4B_D and info[1]["k"] == 2
    finally:
        for proc in procs:
            await proc.stop()
    assert held(SimGpu.for_gpu("GB10", tmp_path)) == 0.0


async def test_a_stopped_server_frees_its_memory_only_when_its_worker_is_gone(tmp_path: Path) -> None:
    """The API server exits first; its worker holds the memory a while longer (as vLLM's does).

    The worker lingers 120 s here (a GPU worker freeing tens of GB): longer than the next simulator's
    start on any machine (4 s was not, on a loaded one), and `stop` escalates to SIGKILL to end it.
    """
    port = free_port()
    first = await _start(_sim_argv(port), tmp_path, linger=120.0)
    await first.wait_healthy(f"http://127.0.0.1:{port}", timeout=60)
    members = group_members(first.pgid)
    assert len(members) >= 2, "the simulator runs a worker process in its group"
    gpu = SimGpu.for_gpu("GB10", tmp_path)
    first._stopping = True
    import os
    import signal

    os.kill(first.pid, signal.SIGTERM)
    await first.wait()
    assert held(gpu) > 0, "the worker still holds the memory right after the leader exited"
    # the next server started now collides, exactly as on a GPU whose worker has not let go
    early_port = free_port()
    early = await _start(_sim_argv(early_port), tmp_path)
    with pytest.raises(StartupError):
        await early.wait_healthy(f"http://127.0.0.1:{early_port}", timeout=30)
    await early.stop()
    # ServerProcess.stop waits for every process of the group: afterwards the memory is free
    await first.stop(timeout=2)
    assert group_members(first.pgid) == []
    assert held(gpu) == 0.0
    late_port = free_port()
    late = await _start(_sim_argv(late_port), tmp_path)
    try:
        await late.wait_healthy(f"http://127.0.0.1:{late_port}", timeout=60)
    finally:
        await late.stop()


async def test_too_small_a_share_for_max_model_len_is_refused(tmp_path: Path) -> None:
    port = free_port()
    proc = await _start(_sim_argv(port, "--gpu-memory-utilization", "0.15"), tmp_path)
    with pytest.raises(StartupError):
        await proc.wait_healthy(f"http://127.0.0.1:{port}", timeout=60)
    assert "KV cache is needed, which is larger than the available KV cache memory" in "\n".join(proc.tail())
    await proc.stop()
    await asyncio.sleep(0)
    assert (
        json.loads((tmp_path / "GB10.json").read_text())["servers"] == []
        or held(SimGpu.for_gpu("GB10", tmp_path)) == 0
    )


def test_start_headless_with_the_simulator_as_vllm(tmp_path: Path) -> None:
    """`mtpwatch start … --vllm "mtpwatch sim"`: the whole start path, the key only in the environment."""
    import os
    import signal
    import subprocess

    port = free_port()
    env = {**os.environ, "MTPWATCH_SIM_GPU_DIR": str(tmp_path), "VLLM_API_KEY": "start-secret"}
    argv = [
        sys.executable, "-m", "mtpwatch", "start", E4B, "--method", "ngram", "-k", "3", "--headless",
        "--port", str(port), "--vllm", SIM, "--status-interval", "0.5", "--", "--max-model-len", "4096",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            lines.append(line)
            if "ready in" in line or time.monotonic() > deadline:
                break
        assert any("ready in" in line for line in lines), "".join(lines)
        info = httpx.get(f"http://127.0.0.1:{port}/sim/info", timeout=5).json()
        assert info["method"] == "ngram" and info["k"] == 3 and info["max_model_len"] == 4096
        unauth = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5)
        assert unauth.status_code == 401  # the key reached the server through its environment
        starting = next(line for line in lines if "starting:" in line)
        assert "start-secret" not in starting and "--api-key" not in starting
        assert held(SimGpu.for_gpu("GB10", tmp_path)) > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert held(SimGpu.for_gpu("GB10", tmp_path)) == 0.0


def test_the_simulator_detects_the_method_as_vllm_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``--speculative-config`` without a method: the drafter's config.json (offline), else its name."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert served_method({"model": "z-lab/gemma-4-E4B-it-DFlash", "num_speculative_tokens": 4}) == "dflash"
    assert served_method({"model": E4B_D}) == "mtp"  # the bundled assistant config declares Gemma 4 MTP
    assert served_method({"model": "acme/plain"}) is None  # the preset's method
    assert served_method({"method": "eagle3", "model": "z-lab/x-DFlash"}) == "eagle3"  # a named one is kept
    assert served_method(None) is None


def test_the_simulator_answers_version_like_vllm() -> None:
    """`vllm --version` prints the bare version (argparse); the simulator the one it imitates."""
    import subprocess

    from mtpwatch.sim.replies import VLLM_VERSION

    done = subprocess.run(
        [sys.executable, "-m", "mtpwatch", "sim", "--speed", "10", "--version"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (0, VLLM_VERSION + "\n")
