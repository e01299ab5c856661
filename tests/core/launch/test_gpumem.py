"""Where the memory plan gets the GPU's memory: NVML, else nvidia-smi's CSV, else /proc/meminfo (GB10).

NVML is a fake `pynvml` module (present, absent, failing, NOT_SUPPORTED for memory as on a GB10);
nvidia-smi is a fake script on PATH that prints the real captures of an H200 (tests/data/nvidia-h200),
or what a GB10 prints ([N/A] / Not Supported), or fails.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from mtpwatch.core.launch.gpumem import local_gpu_memory, parse_smi_csv, resolve_gpu_memory, smi_gpu_memory
from mtpwatch.core.launch.memplan import GIB, MemoryFlags, NoGpuMemoryError, ServerNeed, plan_memory
from tests.datadir import DataDir

MIB = 2**20
MEMINFO = "MemTotal:       125000000 kB\nMemFree: 1 kB\nMemAvailable:   100000000 kB\n"


class NVMLError(Exception):
    pass


def fake_pynvml(
    *, init_fails: bool = False, memory: bool = True, name: str = "NVIDIA H200"
) -> types.ModuleType:
    """A `pynvml` module; figures from tests/data/nvidia-h200/pynvml.txt (the real H200)."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = NVMLError  # type: ignore[attr-defined]
    calls: list[str] = []

    def init() -> None:
        calls.append("init")
        if init_fails:
            raise NVMLError("NVML Shared Library Not Found")

    def meminfo(handle: int) -> object:
        if not memory:
            raise NVMLError("Not Supported")
        return types.SimpleNamespace(total=150754820096, free=150109880320, used=644939776)

    mod.nvmlInit = init  # type: ignore[attr-defined]
    mod.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    mod.nvmlDeviceGetCount = lambda: 1  # type: ignore[attr-defined]
    mod.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    mod.nvmlDeviceGetName = lambda h: name.encode()  # type: ignore[attr-defined]
    mod.nvmlDeviceGetMemoryInfo = meminfo  # type: ignore[attr-defined]
    mod.calls = calls  # type: ignore[attr-defined]
    return mod


@pytest.fixture
def meminfo(tmp_path: Path) -> str:
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO, encoding="ascii")
    return str(path)


@pytest.fixture
def smi_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder that is the whole PATH; `fake_smi` puts an nvidia-smi in it."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


def fake_smi(folder: Path, stdout: str, status: int = 0) -> Path:
    """An nvidia-smi that prints `stdout` when asked exactly mtpwatch's query (else exits 99)."""
    out = folder / "stdout.txt"
    out.write_text(stdout, encoding="utf-8")
    exe = folder / "nvidia-smi"
    exe.write_text(
        "#!/bin/sh\n"
        '[ "$1" = "--query-gpu=index,name,memory.total,memory.free" ] || exit 99\n'
        '[ "$2" = "--format=csv,noheader,nounits" ] || exit 99\n'
        f"exec /bin/cat {out}\n"
        if status == 0
        else f"/bin/cat {out}\nexit {status}\n",
        encoding="utf-8",
    )
    exe.chmod(0o755)
    return exe


def test_nvml_present_gives_its_own_figures(smi_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(smi_bin, "0, Wrong GPU, 1, 1\n")  # never asked: NVML answered
    nvml = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    gpu = local_gpu_memory()
    assert gpu is not None and gpu.source == "nvml" and gpu.name == "NVIDIA H200"
    assert gpu.total_bytes == 150754820096 and gpu.free_bytes == 150109880320 and not gpu.unified
    assert nvml.calls == ["init", "shutdown"]


def test_nvml_absent_reads_nvidia_smi(data: DataDir, smi_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    fake_smi(smi_bin, data.text("nvidia-h200/nvidia-smi-index-noheader-nounits.csv"))
    gpu = local_gpu_memory()
    assert gpu is not None and gpu.source == "nvidia-smi" and gpu.name == "NVIDIA H200"
    assert gpu.total_bytes == 143771 * MIB and gpu.free_bytes == 143156 * MIB and not gpu.unified
    # the same GPU as NVML saw it, to the MiB (nvidia-smi rounds down)
    assert abs(gpu.total_bytes - 150754820096) < MIB and abs(gpu.free_bytes - 150109880320) < MIB


def test_nvml_without_a_driver_reads_nvidia_smi(
    data: DataDir, smi_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_smi(smi_bin, data.text("nvidia-h200/nvidia-smi-index-noheader-nounits.csv"))
    gpu = local_gpu_memory(fake_pynvml(init_fails=True))
    assert gpu is not None and gpu.source == "nvidia-smi"


def test_nvml_not_supported_is_unified_memory(smi_bin: Path, meminfo: str) -> None:
    fake_smi(smi_bin, "0, Wrong GPU, 1, 1\n")
    gpu = local_gpu_memory(fake_pynvml(memory=False, name="NVIDIA GB10"), meminfo=meminfo)
    assert gpu is not None and gpu.unified and gpu.name == "NVIDIA GB10"
    assert gpu.total_bytes == 125000000 * 1024 and gpu.free_bytes == 100000000 * 1024


@pytest.mark.parametrize("na", ["[N/A]", "Not Supported", "[Not Supported]"])
def test_nvidia_smi_without_memory_figures_is_unified_memory(smi_bin: Path, meminfo: str, na: str) -> None:
    fake_smi(smi_bin, f"0, NVIDIA GB10, {na}, {na}\n")
    gpu = local_gpu_memory(fake_pynvml(init_fails=True), meminfo=meminfo)
    assert gpu is not None and gpu.unified and gpu.name == "NVIDIA GB10"
    assert gpu.source.startswith("/proc/meminfo")
    assert gpu.free_bytes == 100000000 * 1024
    # and without a readable /proc/meminfo nothing is known
    assert local_gpu_memory(fake_pynvml(init_fails=True), meminfo=meminfo + ".missing") is None


def test_nvidia_smi_absent_or_failing_knows_nothing(
    data: DataDir, smi_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert local_gpu_memory() is None  # no nvidia-smi on PATH
    fake_smi(smi_bin, "No devices were found\n", status=6)
    assert local_gpu_memory() is None
    fake_smi(smi_bin, data.text("nvidia-h200/bogus.txt"), status=2)
    assert local_gpu_memory() is None
    fake_smi(smi_bin, "")
    assert smi_gpu_memory() is None
    # a caller may forbid the fallback
    fake_smi(smi_bin, data.text("nvidia-h200/nvidia-smi-index-noheader-nounits.csv"))
    assert local_gpu_memory(smi=None) is None and local_gpu_memory() is not None


def test_parse_smi_csv_rows(data: DataDir) -> None:
    rows = parse_smi_csv(data.text("nvidia-h200/nvidia-smi-index-noheader-nounits.csv"))
    assert [(r.index, r.name, r.total_mib, r.free_mib) for r in rows] == [(0, "NVIDIA H200", 143771, 143156)]
    # units kept (--format=csv,noheader) read the same
    (units,) = parse_smi_csv(data.text("nvidia-h200/nvidia-smi-index-noheader.csv"))
    assert (units.total_mib, units.free_mib) == (143771, 143156)
    two = parse_smi_csv("1, NVIDIA GB10, [N/A], [N/A]\n0, NVIDIA H200, 143771, 143156\nwarning: x\n")
    assert [(r.index, r.total_mib) for r in two] == [(1, None), (0, 143771)]


def test_resolve_without_any_gpu_is_none_and_plans_nothing_together(
    smi_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert resolve_gpu_memory(None) is None
    need = ServerNeed(weights=10 * GIB)
    twins = [("A", need, MemoryFlags()), ("B", need, MemoryFlags())]
    with pytest.raises(NoGpuMemoryError) as refused:
        plan_memory(None, twins)
    message = str(refused.value)
    assert "\n" not in message
    assert all(flag in message for flag in ("--gpu NAME", "--gpu-memory GIB", "--restart"))
    # one at a time needs no plan; nor do twins whose every share the user gave
    assert plan_memory(None, twins, together=False).schedule == "restart"
    mine = [("A", need, MemoryFlags(0.4)), ("B", need, MemoryFlags(0.4))]
    assert plan_memory(None, mine).schedule == "alternate"
    # --gpu-memory alone is a plan
    sized = resolve_gpu_memory(None, total_gib=80.0)
    assert sized is not None and plan_memory(sized, twins).schedule == "alternate"
