"""The GPU memory a plan works against: read locally (NVML, or /proc/meminfo on a GB10) or from the table.

- A discrete GPU with NVML: ``nvmlDeviceGetMemoryInfo`` total and free.
- A GB10 (DGX Spark): NVML answers NOT_SUPPORTED for memory; its 128 GB are the system's memory,
  so total is ``MemTotal`` and free is ``MemAvailable`` from /proc/meminfo (the OS, the desktop and
  mtpwatch itself count against it, as they do for vLLM).
- ``--gpu NAME`` (planning for a box you are not on): the table's size; on a unified-memory box
  `UNIFIED_OS_RESERVE` is assumed taken by the OS and desktop, on a discrete GPU
  `DISCRETE_RESERVE` by the driver. ``--gpu-memory``/``--gpu-free`` override either figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import re
import time
from typing import Any

from mtpwatch.core.launch.memplan import GIB, GpuMemory, PlanError, with_gpu_overrides
from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu
from mtpwatch.core.roofline.nvml import meminfo_used_bytes

__all__ = ["UNIFIED_OS_RESERVE", "gpu_from_table", "local_gpu_memory", "resolve_gpu_memory"]

UNIFIED_OS_RESERVE = 8.0 * GIB
"""Memory assumed used by the OS, desktop and tools on a unified-memory box planned from afar
(a DGX Spark at its desktop idles at roughly this; measure with `free -g` on yours)."""
DISCRETE_RESERVE = 0.6 * GIB
"""A discrete GPU's memory that the driver and CUDA context of other tools keep."""
UNIFIED_VISIBLE = 0.94
"""Share of a unified box's nominal memory the OS reports as MemTotal (firmware, carve-outs)."""


def gpu_from_table(name: str) -> GpuMemory:
    """The table's memory for a GPU name ('GB10', 'H100 SXM', …).

    Raises:
        PlanError: unknown name, or the table has no memory size for it.
    """
    try:
        spec = lookup_gpu(name)
    except UnknownGpuError as exc:
        raise PlanError(f"--gpu: {exc}") from None
    match = re.search(r"(\d+(?:\.\d+)?)\s*GB", spec.memory)
    if not match:
        raise PlanError(f"--gpu {name}: no memory size known for {spec.key}; give --gpu-memory GIB")
    size = float(match.group(1))
    unified = "unified" in spec.memory.lower()
    if unified:
        total = size * 1e9 * UNIFIED_VISIBLE
        free = total - UNIFIED_OS_RESERVE
        source = (
            f"table: {spec.key} {spec.memory}; {UNIFIED_VISIBLE:.0%} visible to the OS, "
            f"{UNIFIED_OS_RESERVE / GIB:.0f} GiB assumed used by the OS"
        )
    else:
        total = size * GIB
        free = total - DISCRETE_RESERVE
        source = f"table: {spec.key} {spec.memory}"
    return GpuMemory(spec.key, total, free, source, unified)


def local_gpu_memory(nvml: Any | None = None, meminfo: str = "/proc/meminfo") -> GpuMemory | None:
    """GPU 0 of this machine, or None when there is no NVIDIA GPU (NVML missing or no device)."""
    if nvml is None:
        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return None
    try:
        nvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None
    try:
        if int(nvml.nvmlDeviceGetCount()) < 1:
            return None
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        raw = nvml.nvmlDeviceGetName(handle)
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            info = nvml.nvmlDeviceGetMemoryInfo(handle)
            return GpuMemory(name, float(info.total), float(info.free), "nvml")
        except nvml.NVMLError:
            pass  # GB10: NOT_SUPPORTED — the memory is the system's
        mem = meminfo_used_bytes(meminfo)
        if mem is None:
            return None
        used, total = mem
        return GpuMemory(name, float(total), float(total - used), "/proc/meminfo (MemAvailable)", True)
    except nvml.NVMLError:
        return None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def resolve_gpu_memory(
    gpu: str | None,
    *,
    total_gib: float | None = None,
    free_gib: float | None = None,
    nvml: Any | None = None,
) -> GpuMemory | None:
    """The device to plan for: `gpu` from the table when named, else this machine's GPU 0.

    With only overrides and no GPU anywhere, a device of that size named 'GPU' is planned.
    """
    base = gpu_from_table(gpu) if gpu else local_gpu_memory(nvml)
    if base is None:
        if total_gib is None:
            return None
        free = total_gib if free_gib is None else free_gib
        return GpuMemory("GPU", total_gib * GIB, free * GIB, "given")
    if total_gib is None and free_gib is None:
        return base
    if free_gib is not None and total_gib is not None and free_gib > total_gib:
        raise PlanError(f"--gpu-free {free_gib:g} GiB is more than --gpu-memory {total_gib:g} GiB")
    return with_gpu_overrides(base, total_gib=total_gib, free_gib=free_gib)


async def wait_memory_back(
    expected_free_bytes: float | None,
    *,
    timeout_s: float = 30.0,
    poll_s: float = 0.5,
    read: Any = None,
) -> float | None:
    """After a server stopped: wait until NVML's free memory is back (≥ `expected_free_bytes`, or
    steady over two reads), at most `timeout_s`. Returns the free bytes seen; None without NVML.

    `read` (tests) returns free bytes or None; default: `local_gpu_memory`.
    """

    def default_read() -> float | None:
        gpu = local_gpu_memory()
        return None if gpu is None or gpu.source != "nvml" else gpu.free_bytes

    reader = read or default_read
    free = await asyncio.to_thread(reader)
    if free is None:
        return None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if expected_free_bytes is not None and free >= expected_free_bytes:
            return float(free)
        await asyncio.sleep(poll_s)
        now = await asyncio.to_thread(reader)
        if now is None:
            return float(free)
        if expected_free_bytes is None and abs(now - free) <= 0.005 * max(free, 1.0):
            return float(now)
        free = now
    return float(free)
