"""A k sweep's pieces: the settling arm's wait for GPU memory, the k=0 row's baseline."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from mtpwatch.core.ab.http_arm import LaunchedArm
from mtpwatch.core.launch.memplan import GIB, GpuMemory
from mtpwatch.core.sweeps import sweep


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


def _report(baseline: float, treatment: float) -> Any:
    """The parts of a `BenchReport` a sweep row reads."""

    def rate(x: float) -> SimpleNamespace:
        return SimpleNamespace(median=x)

    overall = SimpleNamespace(
        arms={
            "a": SimpleNamespace(rate=rate(baseline)),
            "b": SimpleNamespace(rate=rate(treatment), acceptance=None),
        },
        speedup=None,
    )
    return SimpleNamespace(primary=SimpleNamespace(overall=overall, categories={}))


def test_sweep_baseline_is_the_median_of_the_baselines() -> None:
    """Two ks: the k=0 row is the middle of their two baseline medians, not the larger one."""
    report = sweep.sweep_from_reports({1: _report(100.0, 120.0), 2: _report(110.0, 125.0)})
    assert report.rows[0].k == 0
    assert report.rows[0].decode_tok_s == pytest.approx(105.0)
    three = sweep.sweep_from_reports({1: _report(100.0, 1), 2: _report(130.0, 1), 3: _report(110.0, 1)})
    assert three.rows[0].decode_tok_s == pytest.approx(110.0)
