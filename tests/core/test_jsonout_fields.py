"""`jsonout.JsonFields` writes each converted class's JSON byte for byte as its hand-written
`to_json` did (the old bodies are kept below as the reference), and the encoder's own rules."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pytest

from mtpwatch.core.jsonout import JsonFields, dumps, key
from mtpwatch.core.launch.memplan import GIB, GpuMemory
from mtpwatch.core.launch.specrule import VllmVersion
from mtpwatch.core.provenance import ArmInfo, GpuInfo
from mtpwatch.core.roofline.bytemodel import StepBytes
from mtpwatch.core.roofline.nvml import HardwareReading
from mtpwatch.core.sweeps.engine import EngineFlag, EngineMode, engine_mode
from mtpwatch.core.sweeps.resolve import Choice
from mtpwatch.core.sweeps.sweep import SweepRow


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def old_step_bytes(s: StepBytes) -> dict[str, Any]:
    return {
        "target": s.target,
        "drafter": s.drafter,
        "kv": s.kv,
        "total": s.total,
        "kv_target": s.kv_target,
        "kv_drafter": s.kv_drafter,
        "draft_passes": s.draft_passes,
        "tokens_per_pass": s.tokens_per_pass,
        "experts_per_layer": s.experts_per_layer,
        "detail": dict(s.detail),
    }


def old_engine_flag(f: EngineFlag) -> dict[str, Any]:
    return {"name": f.name, "what": f.what, "advice": f.advice, "lossless": f.lossless}


def old_engine_mode(m: EngineMode) -> dict[str, Any]:
    return {
        "method": m.method,
        "k": m.k,
        "vllm_version": m.vllm_version,
        "verification": m.verification,
        "lossless": m.lossless,
        "truncation_holds": m.truncation_holds,
        "schedule": [list(r) for r in m.schedule] if m.schedule else None,
        "source": m.source,
        "flags": [f.to_json() for f in m.flags],
    }


def old_choice(c: Choice) -> dict[str, Any]:
    return {
        "best": c.best,
        "resolved": c.resolved,
        "within_noise": list(c.within),
        "k": c.k,
        "weak_interval": c.weak,
    }


def old_vllm_version(v: VllmVersion) -> dict[str, Any]:
    return {"version": v.text, "source": v.source}


def old_gpu_memory(g: GpuMemory) -> dict[str, Any]:
    return {
        "name": g.name,
        "total_gib": round(g.total_bytes / GIB, 2),
        "free_gib": round(g.free_bytes / GIB, 2),
        "source": g.source,
        "unified": g.unified,
    }


def old_sweep_row(r: SweepRow) -> dict[str, Any]:
    return {
        "k": r.k,
        "decode_tok_s": _r(r.decode_tok_s),
        "baseline_decode_tok_s": _r(r.baseline_tok_s),
        "speedup": _r(r.speedup, 4),
        "speedup_ci": [round(x, 4) for x in r.ci] if r.ci else None,
        "pairs": r.pairs,
        "acceptance_rate": _r(r.acceptance_rate, 4),
        "mean_acceptance_length": _r(r.mean_acceptance_length, 4),
        "per_position": [round(x, 4) for x in r.per_position] if r.per_position else None,
        "categories": dict(r.categories),
    }


def _row(**over: Any) -> SweepRow:
    base: dict[str, Any] = dict(
        k=3,
        decode_tok_s=123.45678,
        baseline_tok_s=61.23456,
        speedup=2.0163789,
        ci=(1.91234567, 2.1298765),
        pairs=11,
        acceptance_rate=0.712345678,
        mean_acceptance_length=3.1372549,
        per_position=(0.91234567, 0.71111111, 0.51234567),
        categories={"code": {"speedup": 2.3}, "chat": {"speedup": 1.7}},
    )
    return SweepRow(**{**base, **over})


CASES: list[tuple[Any, Any]] = [
    (
        StepBytes(1.5e9, 2.5e8, 3.25e7, 1.78e9, 3e7, 2.5e6, 4, 5, 3.75, {"attention": 1e8, "mlp": 1.2e9}),
        old_step_bytes,
    ),
    (StepBytes(1.0, 0.0, 0.0, 1.0), old_step_bytes),
    (EngineFlag("fly", "lossy verification", "none", "differs by design"), old_engine_flag),
    (VllmVersion("0.34.0", "vllm --version"), old_vllm_version),
    (Choice(2, (2,)), old_choice),
    (Choice(3, (1, 2, 3), weak=True), old_choice),
    (Choice(0, (0, 1)), old_choice),
    (engine_mode(None), old_engine_mode),
    (engine_mode({"method": "ngram", "num_speculative_tokens": 4}, vllm_version="0.34.0"), old_engine_mode),
    (
        engine_mode(
            {
                "method": "dflash",
                "rejection_sample_method": "fly",
                "num_speculative_tokens_per_batch_size": [[1, 8, 4], [9, 64, 2]],
            }
        ),
        old_engine_mode,
    ),
    (VllmVersion(None, "no vllm on PATH"), old_vllm_version),
    (GpuMemory("NVIDIA GB10", 128.5 * GIB + 12345, 101.123 * GIB, "nvml", True), old_gpu_memory),
    (GpuMemory("H100", 85e9, 0.0, "--gpu"), old_gpu_memory),
    (_row(), old_sweep_row),
    (
        _row(decode_tok_s=None, baseline_tok_s=None, speedup=None, ci=None, pairs=0, per_position=None),
        old_sweep_row,
    ),
    (_row(acceptance_rate=None, mean_acceptance_length=None, categories={}), old_sweep_row),
    (HardwareReading("nvml", timestamp=12.5, device_name="H100", dram_gbps=2100.5), asdict),
    (HardwareReading("off", reason="no NVML"), asdict),
    (
        ArmInfo(
            "http://127.0.0.1:8000",
            model="m",
            k=4,
            engine={"v": "1"},
            launch_argv=["vllm", "serve"],
            spec_config={"method": "ngram", "from_log": {"num_speculative_tokens": 4}},
            errors=["x"],
        ),
        asdict,
    ),
    (ArmInfo("http://b"), asdict),
    (GpuInfo("H100", 3350.0, "nvml"), asdict),
    (GpuInfo(None, None, "unknown"), asdict),
]


@pytest.mark.parametrize(
    ("obj", "old"), CASES, ids=[f"{type(o).__name__}-{i}" for i, (o, _) in enumerate(CASES)]
)
def test_same_json_as_the_hand_written_method(obj: Any, old: Any) -> None:
    assert isinstance(obj, JsonFields)
    new = obj.to_json()
    assert dumps(new) == dumps(old(obj))
    assert dumps(new, indent=2) == dumps(old(obj), indent=2)


def test_key_renames_scales_rounds_and_omits() -> None:
    @dataclass(frozen=True)
    class Inner(JsonFields):
        x: int

    @dataclass(frozen=True)
    class Doc(JsonFields):
        plain: tuple[float, ...]
        ms: float = field(metadata=key("ms_out", times=1000, nd=1))
        gib: float = field(default=3 * GIB + 1, metadata=key(per=GIB, nd=2))
        hidden: str = field(default="secret", metadata=key(omit=True))
        inner: Inner = Inner(7)
        flag: bool = True
        table: dict[str, tuple[int, ...]] = field(default_factory=lambda: {"a": (1, 2)})

    assert Doc((0.5, 2.0), 0.0123456).to_json() == {
        "plain": [0.5, 2.0],
        "ms_out": 12.3,
        "gib": 3.0,
        "inner": {"x": 7},
        "flag": True,
        "table": {"a": [1, 2]},
    }
