"""The memory plan under each vLLM version's rule (0.34: default share 1.0 with the extensible KV
cache and no start-up check of free memory), GB10's total share, and a drafter of unknown size
said on the plan line, or counted when its config.json is found offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mtpwatch.core.launch.gpumem import gpu_from_table
from mtpwatch.core.launch.memneeds import UNCOUNTED, estimate_need
from mtpwatch.core.launch.memplan import (
    GB10_TOTAL_SHARE,
    GIB,
    RULE_034,
    RULE_PRE_034,
    GpuMemory,
    PlanError,
    memory_rule,
)
from mtpwatch.core.launch.servers import plan_twins
from mtpwatch.core.launch.specrule import VllmVersion

E4B, E4B_D = "google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant"
DFLASH = "z-lab/gemma-4-E4B-it-DFlash"
PORTS = (8001, 8002)
DATA = Path(__file__).resolve().parents[2] / "data" / "drafters"


def _util(argv: tuple[str, ...]) -> float:
    return float(argv[argv.index("--gpu-memory-utilization") + 1])


@pytest.fixture
def empty_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    return tmp_path / "hub"


def test_the_rule_per_version() -> None:
    # 0.32/0.33: default 0.92 and the start-up check; 0.34 (and unknown): neither
    assert memory_rule((0, 32)) == memory_rule((0, 33)) == RULE_PRE_034
    assert RULE_PRE_034.default_utilization == 0.92 and RULE_PRE_034.checks_free
    assert memory_rule((0, 34)) == memory_rule(None) == RULE_034
    assert RULE_034.default_utilization == 1.0 and not RULE_034.checks_free


def test_gb10_twins_stay_within_the_recipes_share() -> None:
    """vllm-project/recipes#632: 0.92 runs out of memory at start on a GB10; 0.85 starts."""
    gpu = gpu_from_table("GB10")
    for version in (VllmVersion("0.33.0", "t"), VllmVersion("0.34.0", "t"), VllmVersion(None, "t")):
        plan = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, version=version)
        assert plan.schedule == "alternate"
        shares = [_util(s.argv) for s in plan.servers]
        assert sum(shares) <= GB10_TOTAL_SHARE
        for share, mem in zip(shares, plan.memory.servers, strict=True):
            assert mem.need is not None and share * gpu.total_bytes >= mem.need.total
        assert "recipes#632" in plan.memory.why
    # one at a time on a GB10: one server's share too
    alone = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, restart=True)
    assert all(_util(s.argv) <= GB10_TOTAL_SHARE for s in alone.servers)


def test_the_plan_says_which_rule_it_followed() -> None:
    gpu = gpu_from_table("H100 SXM")
    new = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, version=VllmVersion("0.34.0", "t"))
    text = "\n".join(new.lines())
    assert text.splitlines()[0] == "vLLM 0.34.0 (t)"
    assert "note: vLLM 0.34: default share 1.0 with the extensible KV cache" in text
    old = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, version=VllmVersion("0.33.0", "t"))
    assert (
        "note: vLLM 0.32/0.33: default share 0.92; refuses to start when its share is not free"
        in "\n".join(old.lines())
    )
    assert new.to_json()["vllm"] == {"version": "0.34.0", "source": "t"}


def test_a_share_that_is_not_free_is_refused_under_every_rule() -> None:
    busy = GpuMemory("GPU", 80 * GIB, 40 * GIB, "given")
    b_args = ["--gpu-memory-utilization", "0.9"]
    with pytest.raises(PlanError, match="vLLM would refuse to start"):
        plan_twins(
            E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=busy, b_args=b_args, version=VllmVersion("0.33.0", "t")
        )
    # 0.34 starts it anyway (its check is skipped): mtpwatch refuses in its place, in one line
    with pytest.raises(
        PlanError, match=r"vLLM 0\.34 would not check it and run short of memory, so mtpwatch refuses"
    ):
        plan_twins(
            E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=busy, b_args=b_args, version=VllmVersion("0.34.0", "t")
        )


def test_a_drafter_of_unknown_size_is_said_on_the_plan_line(empty_hf_cache: Path) -> None:
    gpu = gpu_from_table("GB10")
    plan = plan_twins(E4B, ports=PORTS, drafter=DFLASH, k=4, gpu=gpu)
    b_line = next(line for line in plan.lines() if line.startswith("B · "))
    assert UNCOUNTED in b_line and UNCOUNTED == "drafter not counted: give --drafter-gib or a local path"
    b_mem = plan.to_json()["servers"][1]["memory"]["need"]
    assert b_mem["drafter_gib"] == 0 and b_mem["drafter_uncounted"] == UNCOUNTED
    # --drafter-gib counts it
    given = plan_twins(E4B, ports=PORTS, drafter=DFLASH, k=4, gpu=gpu, drafter_gib=1.5)
    need = given.memory.servers[1].need
    assert need is not None and need.drafter == 1.5 * GIB and not need.drafter_uncounted
    assert all(UNCOUNTED not in line for line in given.lines())


def test_a_drafter_found_offline_is_counted_with_its_kv(empty_hf_cache: Path) -> None:
    snap = empty_hf_cache / "models--acme--qwen3-drafter" / "snapshots" / "1"
    snap.mkdir(parents=True)
    shutil.copy(DATA / "dflash-qwen3.json", snap / "config.json")
    (snap / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 3 * 2**30}}))
    with_kv = estimate_need(E4B, method="dflash", drafter="acme/qwen3-drafter", max_model_len=8192)
    bare = estimate_need(E4B, max_model_len=8192)
    assert with_kv is not None and bare is not None
    assert with_kv.drafter == 3 * GIB and not with_kv.drafter_uncounted  # the checkpoint's size
    assert with_kv.kv > bare.kv  # a DFlash drafter keeps a KV cache of its own
    # the plan names the method from the same config.json and counts the drafter
    plan = plan_twins(E4B, ports=PORTS, drafter="acme/qwen3-drafter", k=4, gpu=gpu_from_table("H100 SXM"))
    spec = json.loads(plan.servers[1].argv[plan.servers[1].argv.index("--speculative-config") + 1])
    assert spec["method"] == "dflash"
    need = plan.memory.servers[1].need
    assert need is not None and need.drafter == 3 * GIB


def test_twins_that_the_gpu_cannot_hold_now_are_refused_where_vllm_would_not() -> None:
    from mtpwatch.core.launch.memplan import free_now_refusal

    gpu = gpu_from_table("H100 SXM")
    new = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, version=VllmVersion("0.34.0", "t"))
    old = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, version=VllmVersion("0.33.0", "t"))
    busy = GpuMemory("H100", gpu.total_bytes, 20 * GIB, "nvml")
    line = free_now_refusal(new.memory, busy)
    assert line is not None and "\n" not in line
    assert (
        "GiB free now (nvml); vLLM 0.34 would start both and run short of memory instead of refusing" in line
    )
    assert free_now_refusal(old.memory, busy) is None  # 0.33 refuses by itself
    assert free_now_refusal(new.memory, None) is None  # nothing read here
    assert free_now_refusal(new.memory, GpuMemory("H100", gpu.total_bytes, gpu.total_bytes, "nvml")) is None
    turns = plan_twins(E4B, ports=PORTS, drafter=E4B_D, k=2, gpu=gpu, restart=True)
    assert free_now_refusal(turns.memory, busy) is None  # one at a time
