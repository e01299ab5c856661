"""Roofline ceilings, speed-up terms and the GPU table (`mtpwatch roofline`: tests/commands)."""

from __future__ import annotations

import json

import pytest

from mtpwatch.core.roofline.bytemodel import bytes_per_step
from mtpwatch.core.roofline.ceilings import compute_roofline
from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu
from mtpwatch.core.roofline.modelconfig import GB, ModelSpec
from tests.datadir import DataDir


def dense(data: DataDir) -> ModelSpec:
    return ModelSpec.from_config(data.path("configs/dense-bf16.json"))


def test_ceilings_and_terms_from_bytes(data: DataDir) -> None:
    target = ModelSpec.from_config(data.path("configs/gemma4-tiny.json"))
    drafter = ModelSpec.from_config(data.path("configs/gemma4-tiny-assistant.json"))
    b0 = bytes_per_step(target, 0, 100).total
    bk = bytes_per_step(target, 3, 100, drafter).total
    r = compute_roofline(
        target, peak_gbps=273, gpu="GB10", k=3, drafter=drafter, context=100, acceptance_rate=0.5
    )
    assert r.mean_acceptance_length == pytest.approx(1 + 0.5 * 3)
    assert r.ceiling_tok_s_baseline == pytest.approx(273e9 / b0)
    assert r.ceiling_tok_s_spec == pytest.approx(2.5 * 273e9 / bk)
    assert r.bandwidth_term == pytest.approx(2.5 * b0 / bk)
    assert r.bandwidth_term_naive == pytest.approx(2.5)
    assert r.break_even_acceptance_length == pytest.approx(bk / b0)
    assert r.speedup_bound == pytest.approx(min(2.5, 2.5 * b0 / bk))
    doc = r.to_json()
    for key in (
        "bytes_per_step",
        "drafter_bytes_per_step",
        "kv_bytes_per_step",
        "peak_gbps",
        "ceiling_tok_s_baseline",
        "ceiling_tok_s_spec",
    ):
        assert key in doc
    assert doc["bytes_per_step"] == bytes_per_step(target, 3, 100, drafter).target
    json.dumps(doc)


def test_heavy_drafter_is_bandwidth_bound_and_free_drafting_is_acceptance_bound(data: DataDir) -> None:
    t31 = ModelSpec.from_config("gemma-4-31B-it", weight_dtype="nvfp4")
    d31 = ModelSpec.from_config("gemma-4-31B-it-assistant")
    heavy = compute_roofline(
        t31, peak_gbps=273, gpu="GB10", k=8, drafter=d31, context=4096, mean_acceptance_length=4.0
    )
    assert heavy.binding == "bandwidth" and heavy.speedup_bound < heavy.speedup_bound_naive
    assert "bandwidth-bound" in heavy.summary
    ngram = compute_roofline(
        dense(data), peak_gbps=1000, gpu="X", k=4, context=10, mean_acceptance_length=2.0
    )
    assert ngram.binding == "acceptance" and ngram.speedup_bound == pytest.approx(2.0, rel=0.01)


def test_compute_term_binds_with_a_tiny_flop_rate(data: DataDir) -> None:
    r = compute_roofline(
        dense(data), peak_gbps=1000, gpu="X", k=4, context=10, mean_acceptance_length=3.0, peak_tflops=0.001
    )
    assert r.binding == "compute" and r.compute_term is not None and r.compute_term < 1.0
    assert "compute-bound" in r.summary
    none = compute_roofline(dense(data), peak_gbps=1000, gpu="X", k=4, mean_acceptance_length=3.0)
    assert none.compute_term is None


def test_measured_rates_give_effective_bandwidth_and_words(data: DataDir) -> None:
    spec = dense(data)
    per_step = bytes_per_step(spec, 0, 100).total
    steps = 0.84 * 273e9 / per_step  # a step rate that reads 84 % of 273 GB/s
    r = compute_roofline(spec, peak_gbps=273, gpu="GB10", context=100, steps_per_s=steps, tok_s=steps)
    assert r.effective_gbps == pytest.approx(0.84 * 273)
    assert r.pct_of_peak == pytest.approx(84.0)
    assert r.pct_of_ceiling == pytest.approx(84.0)
    assert r.summary.startswith("bandwidth-bound at 84 % of GB10's peak")
    slow = compute_roofline(spec, peak_gbps=273, gpu="GB10", context=100, steps_per_s=steps / 4)
    assert "overhead" in slow.summary
    # the summary's head in a few words, by the same threshold (BANDWIDTH_BOUND_PCT), for narrow panels
    assert (r.regime, slow.regime) == ("bandwidth-bound", "overhead-bound (below the roof)")
    idle = compute_roofline(spec, peak_gbps=273, gpu="GB10", context=100)
    assert idle.regime == "" and idle.pct_of_peak is None
    edge = compute_roofline(spec, peak_gbps=273, gpu="GB10", context=100, steps_per_s=steps * 61 / 84)
    assert edge.pct_of_peak == pytest.approx(61.0) and edge.summary.startswith("bandwidth-bound")
    assert edge.regime == "bandwidth-bound"


def test_steps_from_tok_s_and_acceptance_when_steps_unknown(data: DataDir) -> None:
    r = compute_roofline(
        dense(data), peak_gbps=500, gpu="X", k=2, context=0, mean_acceptance_length=2.0, tok_s=40.0
    )
    assert r.steps_per_s == pytest.approx(20.0)
    assert r.effective_gbps == pytest.approx(20.0 * bytes_per_step(dense(data), 2, 0).total / GB)


def test_unknown_acceptance_is_labelled_an_upper_bound(data: DataDir) -> None:
    r = compute_roofline(dense(data), peak_gbps=500, gpu="X", k=3)
    assert r.mean_acceptance_length == 4.0 and "upper bound" in r.acceptance_source


@pytest.mark.parametrize(
    "kwargs", [{"peak_gbps": 0}, {"k": -1}, {"acceptance_rate": 1.5}, {"k": 2, "mean_acceptance_length": 3.5}]
)
def test_invalid_inputs(kwargs: dict[str, float], data: DataDir) -> None:
    args: dict[str, object] = {"peak_gbps": 100.0, "gpu": "X", **kwargs}
    with pytest.raises(ValueError):
        compute_roofline(dense(data), **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "key", "peak"),
    [
        ("NVIDIA GB10", "GB10", 273),
        ("NVIDIA H200", "H200", 4800),
        ("NVIDIA GH200 480GB", "GH200", 4000),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 3350),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2000),
        ("NVIDIA L4", "L4", 300),
        ("NVIDIA L40S", "L40S", 864),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB", 1555),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 1008),
        ("h100 nvl", "H100 NVL", 3938),
        ("spark", "GB10", 273),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell", 1792),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada", 960),
        ("NVIDIA Thor", "Jetson Thor", 273),
    ],
)
def test_gpu_lookup(name: str, key: str, peak: float) -> None:
    gpu = lookup_gpu(name)
    assert (gpu.key, gpu.peak_gbps) == (key, peak)


def test_gpu_lookup_errors_list_choices() -> None:
    with pytest.raises(UnknownGpuError, match="known: GB10"):
        lookup_gpu("Radeon 7900")
    with pytest.raises(UnknownGpuError, match="ambiguous"):
        lookup_gpu("A100")
