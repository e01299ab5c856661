"""The memory plan: twins that fit get their own shares, twins that do not go one at a time, and
an impossible plan is refused with the numbers; the user's flags always win."""

from __future__ import annotations

import json

import pytest

from mtpwatch.core.launch.gpumem import gpu_from_table, local_gpu_memory, resolve_gpu_memory
from mtpwatch.core.launch.llamacpp_cmd import llamacpp_key_env
from mtpwatch.core.launch.memplan import GIB, GpuMemory, MemoryFlags, PlanError, ServerNeed, plan_memory
from mtpwatch.core.launch.servers import PlannedServer, plan_sweep, plan_twins, shell_line
from mtpwatch.core.launch.vllm_cmd import server_env

E4B, E4B_D = "google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant"
B26, B26_D = "google/gemma-4-26B-A4B-it", "google/gemma-4-26B-A4B-it-assistant"
B31, B31_D = "google/gemma-4-31B-it", "google/gemma-4-31B-it-assistant"
PORTS = (8001, 8002)


def _util(argv: tuple[str, ...]) -> float:
    return float(argv[argv.index("--gpu-memory-utilization") + 1])


def test_gb10_e4b_twins_fit_with_their_own_shares() -> None:
    gpu = gpu_from_table("GB10")
    plan = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, api_key="s3cret")
    assert plan.schedule == "alternate"
    a, b = plan.servers
    assert "--speculative-config" not in a.argv and "-k" not in a.argv  # the baseline has none of B's flags
    assert json.loads(b.argv[b.argv.index("--speculative-config") + 1]) == {
        "method": "mtp",
        "model": E4B_D,
        "num_speculative_tokens": 2,
    }
    # both shares fit the free memory together, and each covers its server's needs
    total = gpu.total_bytes
    assert (_util(a.argv) + _util(b.argv)) * total <= gpu.free_bytes
    for server, mem in zip(plan.servers, plan.memory.servers, strict=True):
        assert mem.need is not None and _util(server.argv) * total >= mem.need.total
    # the key travels in the environment, masked in every printout
    assert all("s3cret" not in arg for s in plan.servers for arg in s.argv)
    assert a.env == {"VLLM_API_KEY": "s3cret"}
    text = "\n".join(plan.lines()) + json.dumps(plan.to_json())
    assert "s3cret" not in text and "VLLM_API_KEY=***" in text


def test_gb10_31b_bf16_twins_go_one_at_a_time_and_say_why() -> None:
    plan = plan_twins(B31, ports=PORTS, drafter=B31_D, k=2, gpu=gpu_from_table("GB10"))
    assert plan.schedule == "restart"
    assert "both at once need" in plan.memory.why and "GiB" in plan.memory.why
    doc = plan.to_json()
    assert doc["schedule"] == "restart" and doc["why"] == plan.memory.why
    assert [s["argv"][:3] for s in doc["servers"]] == [["vllm", "serve", B31]] * 2


def test_h100_31b_bf16_one_at_a_time_each_with_a_share_that_covers_it() -> None:
    gpu = gpu_from_table("H100 SXM")
    plan = plan_twins(B31, ports=PORTS, drafter=B31_D, k=8, gpu=gpu, extra=["--max-model-len", "262144"])
    assert plan.schedule == "restart"
    for server, mem in zip(plan.servers, plan.memory.servers, strict=True):
        assert mem.need is not None and _util(server.argv) * gpu.total_bytes >= mem.need.total
        assert _util(server.argv) * gpu.total_bytes <= gpu.free_bytes


def test_no_restart_allowed_refuses_with_numbers() -> None:
    with pytest.raises(PlanError, match=r"need \d+\.\d\d GiB.*GiB free"):
        plan_twins(B31, ports=PORTS, drafter=B31_D, k=2, gpu=gpu_from_table("GB10"), restart=False)


def test_a_model_that_cannot_fit_alone_is_refused() -> None:
    small = GpuMemory("GPU", 24 * GIB, 23 * GIB, "given")
    with pytest.raises(PlanError, match=r"A · MTP off needs \d+\.\d\d GiB"):
        plan_twins(B31, ports=PORTS, drafter=B31_D, k=2, gpu=small)


def test_user_flags_win_and_are_checked() -> None:
    gpu = gpu_from_table("H100 SXM")
    plan = plan_twins(
        E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, extra=["--gpu-memory-utilization", "0.3"]
    )
    assert [_util(s.argv) for s in plan.servers] == [0.3, 0.3]
    assert all(s.argv.count("--gpu-memory-utilization") == 1 for s in plan.servers)
    assert all(m.user_set for m in plan.memory.servers)
    # the user's shares cannot both fit: one at a time, and the reason names the flag
    plan = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, extra=["--gpu-memory-utilization=0.8"])
    assert plan.schedule == "restart" and "your --gpu-memory-utilization" in plan.memory.why
    # a share that is not free even alone is refused before anything starts
    busy = GpuMemory("GPU", 80 * GIB, 40 * GIB, "given")
    with pytest.raises(PlanError, match=r"asks for 72\.00 GiB but the GPU has 40\.00 GiB free"):
        plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=busy, b_args=["--gpu-memory-utilization", "0.9"])


def test_kv_cache_bytes_still_need_a_share_that_passes_the_startup_check() -> None:
    gpu = gpu_from_table("H100 SXM")
    plan = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, extra=["--kv-cache-memory-bytes", "4G"])
    assert plan.schedule == "alternate"
    for server, mem in zip(plan.servers, plan.memory.servers, strict=True):
        assert mem.kv_cache_memory_bytes == 4_000_000_000
        # vLLM still checks utilisation × total at start-up: the plan asks only for what is held
        assert mem.asks(gpu.total_bytes) >= mem.takes(gpu.total_bytes) - 0.01 * gpu.total_bytes
        assert _util(server.argv) < 0.5


def test_memory_flags_from_argv() -> None:
    flags = MemoryFlags.from_argv(
        ["--max-model-len", "32k", "--enforce-eager", "--gpu-memory-utilization=0.5"]
    )
    assert flags == MemoryFlags(0.5, None, 32_000, True)
    with pytest.raises(PlanError, match="must be in"):
        MemoryFlags.from_argv(["--gpu-memory-utilization", "1.5"])
    with pytest.raises(PlanError, match="not a number"):
        MemoryFlags.from_argv(["--kv-cache-memory-bytes", "lots"])


def test_sweep_plans_one_server_per_k() -> None:
    plan = plan_sweep(E4B, [0, 1, 2, 4], ports=[1, 2, 3, 4], drafter=E4B_D, gpu=gpu_from_table("GB10"))
    assert plan.schedule == "restart"
    assert [s.k for s in plan.servers] == [0, 1, 2, 4]
    assert "--speculative-config" not in plan.servers[0].argv
    ngram = plan_sweep(E4B, [0, 2], ports=[1, 2], method="ngram", gpu=None)
    spec = json.loads(ngram.servers[1].argv[ngram.servers[1].argv.index("--speculative-config") + 1])
    assert spec["method"] == "ngram" and spec["num_speculative_tokens"] == 2


def test_plan_with_only_a_total_and_no_gpu() -> None:
    need = ServerNeed(weights=10 * GIB)
    plan = plan_memory(
        resolve_gpu_memory(None, total_gib=40.0, nvml=_NoNvml()),
        [("A", need, MemoryFlags()), ("B", need, MemoryFlags())],
    )
    assert plan.schedule == "alternate" and plan.gpu is not None and plan.gpu.total_bytes == 40 * GIB


class _NoNvml:
    class NVMLError(Exception):
        pass

    def nvmlInit(self) -> None:
        raise self.NVMLError("no driver")


class _Gb10Nvml(_NoNvml):
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetName(self, h: int) -> str:
        return "NVIDIA GB10"

    def nvmlDeviceGetMemoryInfo(self, h: int) -> None:
        raise self.NVMLError("Not Supported")


def test_local_gpu_reads_unified_memory_from_meminfo(tmp_path: object) -> None:
    from pathlib import Path

    meminfo = Path(str(tmp_path)) / "meminfo"
    meminfo.write_text("MemTotal:       125000000 kB\nMemFree: 1 kB\nMemAvailable:   100000000 kB\n")
    gpu = local_gpu_memory(_Gb10Nvml(), meminfo=str(meminfo))
    assert gpu is not None and gpu.unified and gpu.name == "NVIDIA GB10"
    assert gpu.total_bytes == 125000000 * 1024 and gpu.free_bytes == 100000000 * 1024
    assert local_gpu_memory(_NoNvml(), smi=None) is None


async def test_wait_memory_back_polls_until_the_memory_is_free() -> None:
    from mtpwatch.core.launch.gpumem import wait_memory_back

    reads = iter([10 * GIB, 30 * GIB, 60 * GIB, 79 * GIB, 79 * GIB])
    free = await wait_memory_back(78 * GIB, poll_s=0.01, read=lambda: next(reads))
    assert free == 79 * GIB
    steady = iter([50 * GIB, 70 * GIB, 70 * GIB, 99 * GIB])
    assert await wait_memory_back(None, poll_s=0.01, read=lambda: next(steady)) == 70 * GIB
    assert await wait_memory_back(1.0, read=lambda: None) is None


@pytest.mark.parametrize(
    ("host", "url_host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("0.0.0.0", "127.0.0.1"),
        ("::", "127.0.0.1"),
        ("::1", "[::1]"),
        ("[::1]", "[::1]"),
    ],
)
def test_a_planned_server_s_url_is_the_one_a_client_here_connects_to(host: str, url_host: str) -> None:
    # a wildcard bind through loopback, an IPv6 address in brackets (`core.launch.ports.connect_url`)
    plan = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu_from_table("GB10"), host=host)
    assert [s.url for s in plan.servers] == [f"http://{url_host}:{port}" for port in PORTS]


def test_every_server_key_is_masked_in_a_plan_line() -> None:
    """llama-server takes its key as LLAMA_API_KEY (`llamacpp_key_env`): masked like vLLM's."""
    env = {**llamacpp_key_env("s3cret"), **server_env("t0ken")}
    server = PlannedServer(label="A", role="baseline", k=0, argv=("llama-server", "-m", "m"), env=env)
    text = shell_line(server.argv, server.env) + json.dumps(server.to_json())
    assert "s3cret" not in text and "t0ken" not in text and "LLAMA_API_KEY=***" in text
