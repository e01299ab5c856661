"""The GPU memory a plan works against: read here (NVML, nvidia-smi, /proc/meminfo on a GB10) or the table.

- A discrete GPU with NVML: ``nvmlDeviceGetMemoryInfo`` total and free (``pynvml``, from
  nvidia-ml-py, imported only here and only when asked).
- No usable NVML (no driver library, an old or missing nvidia-ml-py): ``nvidia-smi``'s CSV
  (`SMI_QUERY`; MiB) for GPU 0.
- A GB10 (DGX Spark): NVML answers NOT_SUPPORTED for memory and nvidia-smi prints ``[N/A]`` or
  ``Not Supported`` for it; its 128 GB are the system's memory, so total is ``MemTotal`` and free is
  ``MemAvailable`` from /proc/meminfo (the OS, the desktop and mtpwatch itself count against it, as
  they do for vLLM).
- ``--gpu NAME`` (planning for a box you are not on): the table's size; on a unified-memory box
  `UNIFIED_OS_RESERVE` is assumed taken by the OS and desktop, on a discrete GPU
  `DISCRETE_RESERVE` by the driver. ``--gpu-memory``/``--gpu-free`` override either figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, replace
from typing import Any

from mtpwatch.core.launch.memplan import GIB, GpuMemory, PlanError
from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu
from mtpwatch.core.roofline.nvml import meminfo_used_bytes, nvml_text

UNIFIED_OS_RESERVE = 8.0 * GIB
"""Memory assumed used by the OS, desktop and tools on a unified-memory box planned from afar
(a DGX Spark at its desktop idles at roughly this; measure with `free -g` on yours)."""
DISCRETE_RESERVE = 0.6 * GIB
"""A discrete GPU's memory that the driver and CUDA context of other tools keep."""
UNIFIED_VISIBLE = 0.94
"""Share of a unified box's nominal memory the OS reports as MemTotal (firmware, carve-outs)."""


def gpu_from_table(name: str) -> GpuMemory:
    """The table's memory for a GPU name ('GB10', 'H100 SXM', …); raises `PlanError` for an unknown
    name, or one the table has no memory size for."""
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


SMI_QUERY = ("--query-gpu=index,name,memory.total,memory.free", "--format=csv,noheader,nounits")
"""nvidia-smi's arguments for the fallback: one CSV row per GPU, memory in MiB without units."""
MIB = float(2**20)


@dataclass(frozen=True, slots=True)
class SmiGpu:
    """One row of nvidia-smi's CSV (`SMI_QUERY`); memory None where it printed no number (GB10)."""

    index: int
    name: str
    total_mib: float | None
    free_mib: float | None


def _mib(text: str) -> float | None:
    """A memory field: a number of MiB, or None for '[N/A]', 'Not Supported', '[Unknown Error]'."""
    try:
        value = float(text.strip().removesuffix("MiB").strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def parse_smi_csv(text: str) -> list[SmiGpu]:
    """The rows of nvidia-smi's CSV for `SMI_QUERY`; lines that are not four comma-separated fields
    with an integer index are skipped (nvidia-smi prints its errors, e.g. "No devices were found", on
    stdout)."""
    rows: list[SmiGpu] = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 4 or not fields[0].isdigit():
            continue
        # a GPU name never holds a comma today; if one did, the memory fields are still the last two
        name = ", ".join(fields[1:-2])
        rows.append(SmiGpu(int(fields[0]), name, _mib(fields[-2]), _mib(fields[-1])))
    return rows


def _unified(name: str, meminfo: str) -> GpuMemory | None:
    """A GPU whose memory is the system's (GB10): MemTotal and MemAvailable, None when unreadable."""
    mem = meminfo_used_bytes(meminfo)
    if mem is None:
        return None
    used, total = mem
    return GpuMemory(name, float(total), float(total - used), "/proc/meminfo (MemAvailable)", True)


def smi_gpu_memory(exe: str = "nvidia-smi", meminfo: str = "/proc/meminfo") -> GpuMemory | None:
    """GPU 0 as nvidia-smi reports it, a row without memory figures (GB10: ``[N/A]``) as unified
    memory (/proc/meminfo); None when nvidia-smi is missing, fails or lists no GPU."""
    path = shutil.which(exe)
    if path is None:
        return None
    try:
        done = subprocess.run([path, *SMI_QUERY], capture_output=True, text=True, timeout=15.0, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    gpu = min(parse_smi_csv(done.stdout), key=lambda r: r.index, default=None)
    if gpu is None:
        return None
    if gpu.total_mib is None or gpu.free_mib is None or gpu.total_mib <= 0:
        return _unified(gpu.name, meminfo)
    return GpuMemory(gpu.name, gpu.total_mib * MIB, gpu.free_mib * MIB, "nvidia-smi")


def local_gpu_memory(
    nvml: Any | None = None, meminfo: str = "/proc/meminfo", smi: str | None = "nvidia-smi"
) -> GpuMemory | None:
    """GPU 0 of this machine: NVML, else nvidia-smi (`smi`; None: not asked); None when neither
    finds an NVIDIA GPU whose memory can be read."""
    try:
        nvml = nvml or importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception:  # no nvidia-ml-py; NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return smi_gpu_memory(smi, meminfo) if smi else None
    try:
        if int(nvml.nvmlDeviceGetCount()) < 1:
            return None
        handle = nvml.nvmlDeviceGetHandleByIndex(0)
        name = nvml_text(nvml.nvmlDeviceGetName(handle))
        try:
            info = nvml.nvmlDeviceGetMemoryInfo(handle)
        except nvml.NVMLError:  # GB10: NOT_SUPPORTED — the memory is the system's
            return _unified(name, meminfo)
        return GpuMemory(name, float(info.total), float(info.free), "nvml")
    except Exception:  # any NVMLError (or an nvidia-ml-py that lacks a function): ask nvidia-smi
        return smi_gpu_memory(smi, meminfo) if smi else None
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


DEVICE_SOURCES = frozenset({"nvml", "nvidia-smi"})
"""Readings of the device's own memory, whose free figure drops while a server holds it (not
/proc/meminfo's, where the OS and every process count, nor a table's)."""


def device_free_bytes(gpu: GpuMemory | None) -> float | None:
    """The free bytes of a reading of the device itself (`DEVICE_SOURCES`), else None."""
    return gpu.free_bytes if gpu is not None and gpu.source in DEVICE_SOURCES else None


def resolve_gpu_memory(
    gpu: str | None, *, total_gib: float | None = None, free_gib: float | None = None, nvml: Any | None = None
) -> GpuMemory | None:
    """The device to plan for: `gpu` from the table when named, else this machine's GPU 0; with only
    overrides and no GPU anywhere, a device of that size named 'GPU'."""
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
    total = base.total_bytes if total_gib is None else total_gib * GIB
    # without --gpu-free (so with --gpu-memory), the new total keeps what others use of the old one
    free = total - (base.total_bytes - base.free_bytes) if free_gib is None else free_gib * GIB
    return replace(base, total_bytes=total, free_bytes=max(0.0, free), source=base.source + " + override")


async def wait_memory_back(
    expected_free_bytes: float | None, *, timeout_s: float = 30.0, poll_s: float = 0.5, read: Any = None
) -> float | None:
    """After a server stopped: wait until the GPU's free memory (NVML or nvidia-smi) is back
    (≥ `expected_free_bytes`, or steady over two reads), at most `timeout_s`. Returns the free bytes
    seen; None when neither reads it. `read` (tests) returns free bytes or None."""
    reader = read or (lambda: device_free_bytes(local_gpu_memory()))
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
