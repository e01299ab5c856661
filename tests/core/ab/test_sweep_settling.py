"""SettlingArm waits for the GPU's memory after a stop wherever the device's own memory is read."""

from __future__ import annotations

import asyncio

import pytest

from mtpwatch.core.ab import sweep
from mtpwatch.core.ab.http_arm import LaunchedArm
from mtpwatch.core.launch.memplan import GIB, GpuMemory


@pytest.mark.parametrize(
    ("source", "waits_for"),
    [("nvml", 0.98 * 40 * GIB), ("nvidia-smi", 0.98 * 40 * GIB), ("/proc/meminfo (MemAvailable)", None)],
)
def test_settling_arm_waits_on_every_device_reading(
    source: str, waits_for: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu = GpuMemory("H200", 140 * GIB, 40 * GIB, source, source.startswith("/proc"))
    waited: list[float] = []

    async def started(self: LaunchedArm) -> None:
        self._launch = object()  # type: ignore[assignment]  # a running server, for stop()

    async def stopped(self: LaunchedArm) -> None:
        self._launch = None

    async def wait(expected: float | None) -> float | None:
        assert expected is not None
        waited.append(expected)
        return expected

    monkeypatch.setattr(sweep, "local_gpu_memory", lambda: gpu)
    monkeypatch.setattr(sweep, "wait_memory_back", wait)
    monkeypatch.setattr(LaunchedArm, "start", started)
    monkeypatch.setattr(LaunchedArm, "stop", stopped)

    async def go() -> None:
        arm = sweep.SettlingArm("http://127.0.0.1:9", ["vllm", "serve", "m"])
        try:
            await arm.start()
            await arm.stop()
        finally:
            await arm.aclose()

    asyncio.run(go())
    assert waited == ([] if waits_for is None else [pytest.approx(waits_for)])
