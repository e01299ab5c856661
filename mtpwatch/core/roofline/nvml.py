"""Hardware readings of the local GPU through NVML (optional): GPM DRAM bandwidth, memory busy, memory used.

`Sampler` reads NVML about once a second on a background thread. `pynvml` (package nvidia-ml-py) is
imported lazily; without it, without a GPU, or for a remote server, readings say
`source="analytic only"` with the reason, and mtpwatch shows `core.roofline`'s analytic estimate.

* Bandwidth: NVML GPM metric `DRAM_BW_UTIL` (id 10), % of the theoretical DRAM bandwidth between
  two GPM samples, on devices where `nvmlGpmQueryDeviceSupport` says so (Hopper and newer). GB/s =
  % × peak, peak from NVML (2 · max memory clock · bus width, GPM's own denominator) or the table
  in `core.roofline.gpus`.
* `nvmlDeviceGetUtilizationRates().memory` is the share of time device memory was read or written.
  It saturates near 90 % of real bandwidth and over-reads below, so it is exposed only as
  `memory_busy_pct` ("memory busy %"), never as bandwidth.
* Memory in use: `nvmlDeviceGetMemoryInfo`; on unified-memory parts where it is NOT_SUPPORTED
  (DGX Spark GB10) it comes from /proc/meminfo (MemTotal − MemAvailable), and the reading says
  plainly that bandwidth is analytic there.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpwatch.core.jsonout import JsonFields
from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu

ANALYTIC_ONLY = "analytic only"
GPM_DRAM_BW_UTIL = 10
"""NVML_GPM_METRIC_DRAM_BW_UTIL: % of DRAM bandwidth used vs theoretical maximum (pynvml.py)."""


@dataclass(frozen=True, slots=True)
class HardwareReading(JsonFields):
    """One sample of the local GPU, or the reason there is none."""

    source: str
    """'nvml+gpm' (measured bandwidth), 'nvml' (no bandwidth counter) or 'analytic only'."""
    reason: str | None = None
    """Why a figure is missing, in words."""
    timestamp: float = 0.0
    device_name: str | None = None
    driver_version: str | None = None
    dram_bw_util_pct: float | None = None
    """GPM DRAM_BW_UTIL over the last sampling interval, 0-100."""
    dram_gbps: float | None = None
    """dram_bw_util_pct × peak_gbps / 100."""
    peak_gbps: float | None = None
    peak_source: str | None = None
    memory_busy_pct: float | None = None  # utilization.memory: not bandwidth (module docstring)
    gpu_util_pct: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    memory_source: str | None = None
    """'nvml' or '/proc/meminfo (unified memory)'."""
    interval_s: float | None = None
    """Seconds between the two GPM samples behind dram_bw_util_pct."""


def meminfo_used_bytes(path: str | Path = "/proc/meminfo") -> tuple[int, int] | None:
    """(used, total) bytes from /proc/meminfo as MemTotal − MemAvailable, or None if unreadable."""
    values: dict[str, int] = {}
    try:
        for line in Path(path).read_text(encoding="ascii", errors="replace").splitlines():
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                values[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if "MemTotal" not in values or "MemAvailable" not in values:
        return None
    return values["MemTotal"] - values["MemAvailable"], values["MemTotal"]


def nvml_text(value: Any) -> str:
    """A string NVML returned: bytes in older nvidia-ml-py, str in newer."""
    return value.decode() if isinstance(value, bytes) else str(value)


class Sampler:
    """Reads the local GPU every `period_s` on a daemon thread (`start()`/`stop()` or a `with` block;
    `sample()` takes one reading now); `latest()` never blocks on NVML. `nvml` injects a pynvml-like
    module (tests), else `pynvml` is imported on the first sample. Each tick's GPM sample pairs with
    the previous one, so the bandwidth figure covers the interval between ticks."""

    def __init__(
        self,
        *,
        period_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        nvml: Any | None = None,
        meminfo_path: str | Path = "/proc/meminfo",
        peak_gbps: float | None = None,
    ) -> None:
        self._period = period_s
        self._clock = clock
        self._nvml = nvml
        self._meminfo = meminfo_path
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._latest = HardwareReading(source=ANALYTIC_ONLY, reason="not sampled yet")
        self._ready = False
        self._failed: str | None = None
        self._handle: Any = None
        self._name: str | None = None
        self._driver: str | None = None
        self._peak = peak_gbps
        self._peak_source = "given" if peak_gbps else None
        self._gpm_reason: str | None = None
        self._samples: list[Any] = []
        self._prev_t: float | None = None
        self._metrics_get: Any = None  # GPM's DRAM_BW_UTIL query; None: no GPM bandwidth
        self.ticks = 0

    def latest(self) -> HardwareReading:
        """The newest reading (an 'analytic only' placeholder before the first one)."""
        with self._lock:
            return self._latest

    def start(self) -> Sampler:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="mtpwatch-nvml", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._shutdown()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def sample(self) -> HardwareReading:
        """One reading now (initialising NVML on the first call)."""
        reading = self._read()
        with self._lock:
            self._latest = reading
            self.ticks += 1
        return reading

    def _run(self) -> None:
        while True:
            self.sample()
            if self._failed is not None or self._stop.wait(self._period):
                return

    def _init(self) -> None:
        self._ready = True
        try:
            nvml = self._nvml = self._nvml or importlib.import_module("pynvml")
        except ImportError:
            self._failed = "nvidia-ml-py (pynvml) is not installed"
            return
        try:
            nvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self._failed = f"NVML unavailable: {exc}"
            return
        try:
            count = int(nvml.nvmlDeviceGetCount())
            if count < 1:
                self._failed = f"no GPU 0 (NVML sees {count})"
                return
            self._handle = nvml.nvmlDeviceGetHandleByIndex(0)
            self._name = nvml_text(nvml.nvmlDeviceGetName(self._handle))
        except nvml.NVMLError as exc:
            self._failed = f"NVML error: {exc}"
            return
        with contextlib.suppress(nvml.NVMLError):
            self._driver = nvml_text(nvml.nvmlSystemGetDriverVersion())
        if not self._peak:
            self._peak, self._peak_source = self._find_peak(nvml)
        if (why_not := self._open_gpm(nvml)) is not None:
            self._gpm_reason = f"{why_not}: bandwidth on {self._name} is analytic (no hardware counter)"

    def _open_gpm(self, nvml: Any) -> str | None:
        """Allocate GPM's two samples and the DRAM_BW_UTIL query; why not, when there is no GPM."""
        try:
            if not nvml.nvmlGpmQueryDeviceSupport(self._handle).isSupportedDevice:
                return "GPM not supported on this GPU (Hopper or newer needed)"
        except (nvml.NVMLError, AttributeError) as exc:
            return f"GPM query failed ({exc})"
        try:
            self._samples = [nvml.nvmlGpmSampleAlloc(), nvml.nvmlGpmSampleAlloc()]
            mg = nvml.c_nvmlGpmMetricsGet_t()
            mg.version = nvml.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = 1
            mg.metrics[0].metricId = GPM_DRAM_BW_UTIL
        except nvml.NVMLError as exc:
            return f"GPM sample allocation failed ({exc})"
        self._metrics_get = mg
        return None

    def _find_peak(self, nvml: Any) -> tuple[float | None, str | None]:
        with contextlib.suppress(nvml.NVMLError, AttributeError):
            clock = float(nvml.nvmlDeviceGetMaxClockInfo(self._handle, nvml.NVML_CLOCK_MEM))
            bus = float(nvml.nvmlDeviceGetMemoryBusWidth(self._handle))
            if clock > 0 and bus > 0:
                return 2 * clock * 1e6 * bus / 8 / 1e9, "NVML 2·memory clock·bus width"
        try:
            gpu = lookup_gpu(self._name or "")
        except UnknownGpuError:
            return None, None
        return gpu.peak_gbps, f"table: {gpu.key}"

    def _gpm_tick(self, nvml: Any, now: float) -> tuple[float | None, float | None, str | None]:
        """One GPM sample; the metric between it and the previous one, or why there is none."""
        cur, prev = self._samples[1], self._samples[0]
        try:
            nvml.nvmlGpmSampleGet(self._handle, cur)
        except nvml.NVMLError as exc:
            return None, None, f"GPM sample failed ({exc})"
        prev_t, self._prev_t = self._prev_t, now
        self._samples.reverse()  # cur becomes prev for the next tick
        if prev_t is None:
            return None, None, "GPM: first sample, bandwidth from the next tick"
        mg = self._metrics_get
        mg.sample1, mg.sample2 = prev, cur
        interval = now - prev_t
        try:
            nvml.nvmlGpmMetricsGet(mg)
        except nvml.NVMLError as exc:
            return None, interval, f"GPM metrics failed ({exc})"
        metric = mg.metrics[0]
        if int(metric.nvmlReturn) != 0:
            return None, interval, f"GPM DRAM_BW_UTIL returned NVML error {int(metric.nvmlReturn)}"
        return float(metric.value), interval, None

    def _read(self) -> HardwareReading:
        now = self._clock()
        if not self._ready:
            self._init()
        if self._failed is not None:
            return HardwareReading(source=ANALYTIC_ONLY, reason=self._failed, timestamp=now)
        nvml: Any = self._nvml
        reason = self._gpm_reason
        util_pct = interval = None
        if self._metrics_get is not None:
            util_pct, interval, reason = self._gpm_tick(nvml, now)
        busy = gpu_util = None
        with contextlib.suppress(nvml.NVMLError):
            rates = nvml.nvmlDeviceGetUtilizationRates(self._handle)
            busy, gpu_util = float(rates.memory), float(rates.gpu)
        used = total = mem_source = None
        try:
            info = nvml.nvmlDeviceGetMemoryInfo(self._handle)
            used, total, mem_source = int(info.used), int(info.total), "nvml"
        except nvml.NVMLError:
            # GB10 and other unified-memory parts: NOT_SUPPORTED; the GPU shares system memory.
            got = meminfo_used_bytes(self._meminfo)
            if got is not None:
                used, total = got
                mem_source = "/proc/meminfo (unified memory)"
        gbps = util_pct * self._peak / 100.0 if util_pct is not None and self._peak else None
        return HardwareReading(
            source="nvml" if self._metrics_get is None else "nvml+gpm",
            reason=reason,
            timestamp=now,
            device_name=self._name,
            driver_version=self._driver,
            dram_bw_util_pct=util_pct,
            dram_gbps=gbps,
            peak_gbps=self._peak,
            peak_source=self._peak_source,
            memory_busy_pct=busy,
            gpu_util_pct=gpu_util,
            memory_used_bytes=used,
            memory_total_bytes=total,
            memory_source=mem_source,
            interval_s=interval,
        )

    def _shutdown(self) -> None:
        nvml = self._nvml
        if not self._ready or self._failed is not None or nvml is None:
            return
        for s in self._samples:
            with contextlib.suppress(Exception):
                nvml.nvmlGpmSampleFree(s)
        self._samples = []
        self._metrics_get = None
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
        self._ready = False
        self._prev_t = None


def local_gpu_reading() -> HardwareReading:
    """One reading without bandwidth (GPM needs two samples): name, memory, peak; for a quick probe."""
    sampler = Sampler()
    try:
        return sampler.sample()
    finally:
        sampler.stop()
