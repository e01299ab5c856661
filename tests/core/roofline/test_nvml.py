"""NVML sampler against a fake pynvml: GPM supported / unsupported, GB10 memory, no NVML, the thread."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mtpwatch.core.roofline.nvml import ANALYTIC_ONLY, Sampler, meminfo_used_bytes


class FakeNVMLError(Exception):
    pass


class FakeNotSupported(FakeNVMLError):
    pass


class FakeMetricsGet:
    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(4)]


class FakeNvml:
    """Enough of pynvml for the sampler. GPM samples carry a counter; DRAM % = 10 × (s2 − s1)."""

    NVMLError = FakeNVMLError
    NVMLError_NotSupported = FakeNotSupported
    NVML_CLOCK_MEM = 2
    NVML_GPM_METRICS_GET_VERSION = 1
    c_nvmlGpmMetricsGet_t = FakeMetricsGet

    def __init__(
        self,
        name: str = "NVIDIA H200",
        *,
        gpm: bool = True,
        memory_info: bool = True,
        clocks: bool = True,
        init_error: bool = False,
    ) -> None:
        self.name, self.gpm, self.memory_info, self.clocks, self.init_error = (
            name,
            gpm,
            memory_info,
            clocks,
            init_error,
        )
        self.counter = 0
        self.shutdowns = 0

    def nvmlInit(self) -> None:
        if self.init_error:
            raise FakeNVMLError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"h{i}"

    def nvmlDeviceGetName(self, h: str) -> bytes:
        return self.name.encode()

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlDeviceGetMaxClockInfo(self, h: str, kind: int) -> int:
        if not self.clocks:
            raise FakeNotSupported("Not Supported")
        return 3201

    def nvmlDeviceGetMemoryBusWidth(self, h: str) -> int:
        return 6016

    def nvmlGpmQueryDeviceSupport(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(isSupportedDevice=int(self.gpm))

    def nvmlGpmSampleAlloc(self) -> SimpleNamespace:
        return SimpleNamespace(seq=None)

    def nvmlGpmSampleFree(self, s: Any) -> None:
        pass

    def nvmlGpmSampleGet(self, h: str, s: Any) -> Any:
        self.counter += 1
        s.seq = self.counter
        return s

    def nvmlGpmMetricsGet(self, mg: FakeMetricsGet) -> FakeMetricsGet:
        assert mg.metrics[0].metricId == 10
        mg.metrics[0].value = 10.0 * (mg.sample2.seq - mg.sample1.seq)
        return mg

    def nvmlDeviceGetUtilizationRates(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=97, memory=100 if self.memory_info else 0)

    def nvmlDeviceGetMemoryInfo(self, h: str) -> SimpleNamespace:
        if not self.memory_info:
            raise FakeNotSupported("Not Supported")
        return SimpleNamespace(used=9 * 2**30, total=141 * 2**30)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def test_gpm_supported_gives_measured_bandwidth() -> None:
    fake = FakeNvml()
    s = Sampler(nvml=fake, clock=Clock())
    first = s.sample()
    assert (
        first.source == "nvml+gpm"
        and first.dram_bw_util_pct is None
        and "first sample" in (first.reason or "")
    )
    second = s.sample()
    peak = 2 * 3201e6 * 6016 / 8 / 1e9
    assert second.dram_bw_util_pct == pytest.approx(10.0)  # later sample minus earlier one
    assert second.peak_gbps == pytest.approx(peak) and "NVML" in (second.peak_source or "")
    assert second.dram_gbps == pytest.approx(0.10 * peak)
    assert second.interval_s == pytest.approx(1.0)
    assert second.memory_busy_pct == 100 and second.memory_source == "nvml"
    assert second.device_name == "NVIDIA H200" and second.driver_version == "580.159.04"
    assert s.sample().dram_bw_util_pct == pytest.approx(10.0)  # buffers swap tick after tick
    s.stop()
    assert fake.shutdowns == 1


def test_gpm_unsupported_says_bandwidth_is_analytic() -> None:
    r = Sampler(nvml=FakeNvml("NVIDIA L40S", gpm=False)).sample()
    assert r.source == "nvml" and r.dram_bw_util_pct is None and r.dram_gbps is None
    assert "GPM not supported" in (r.reason or "") and "analytic" in (r.reason or "")
    assert r.memory_busy_pct == 100  # busy %, kept apart from bandwidth


def test_gb10_memory_from_proc_meminfo_and_table_peak(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       127000000 kB\nMemFree:  1 kB\nMemAvailable:    27000000 kB\n")
    fake = FakeNvml("NVIDIA GB10", gpm=False, memory_info=False, clocks=False)
    r = Sampler(nvml=fake, meminfo_path=meminfo).sample()
    assert r.memory_source == "/proc/meminfo (unified memory)"
    assert r.memory_used_bytes == (127000000 - 27000000) * 1024
    assert r.memory_total_bytes == 127000000 * 1024
    assert r.peak_gbps == 273 and r.peak_source == "table: GB10"
    assert "bandwidth on NVIDIA GB10 is analytic" in (r.reason or "")
    assert r.memory_busy_pct == 0


def test_no_nvml_driver_is_analytic_only() -> None:
    r = Sampler(nvml=FakeNvml(init_error=True)).sample()
    assert r.source == ANALYTIC_ONLY and "NVML unavailable" in (r.reason or "")


def test_pynvml_not_installed_is_analytic_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    s = Sampler()
    r = s.sample()
    assert r.source == ANALYTIC_ONLY and "not installed" in (r.reason or "")
    s.stop()


def test_background_thread_samples_and_stops() -> None:
    fake = FakeNvml()
    s = Sampler(nvml=fake, period_s=0.01)
    assert s.latest().source == ANALYTIC_ONLY  # placeholder before the first tick
    s.start()
    deadline = time.monotonic() + 30
    while s.ticks < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert s.ticks >= 3
    assert s.latest().dram_bw_util_pct == pytest.approx(10.0)
    assert not any(t.name == "mtpwatch-nvml" for t in threading.enumerate())


def test_background_thread_ends_when_nvml_is_missing() -> None:
    s = Sampler(nvml=FakeNvml(init_error=True), period_s=0.01).start()
    deadline = time.monotonic() + 30
    while s.ticks < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    assert s.ticks == 1 and s.latest().source == ANALYTIC_ONLY


def test_meminfo_missing_file(tmp_path: Path) -> None:
    assert meminfo_used_bytes(tmp_path / "absent") is None


def _cpu_cost_with_fake(seconds: float = 30.0, period: float = 1.0) -> None:
    """Not a test: `python tests/core/roofline/test_nvml.py` prints the sampler's CPU cost (fake NVML)."""
    s = Sampler(nvml=FakeNvml(), period_s=period)
    c0, t0 = time.process_time(), time.perf_counter()
    s.start()
    time.sleep(seconds)
    s.stop()
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    print(
        f"{s.ticks} ticks in {wall:.1f} s wall, {cpu * 1e3:.2f} ms CPU = {100 * cpu / wall:.4f} % of a core"
    )


if __name__ == "__main__":
    _cpu_cost_with_fake(float(sys.argv[1]) if len(sys.argv) > 1 else 30.0)
