"""Analytic bytes per step: each expected value is written as arithmetic from the config's numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtpwatch.core.roofline.bytemodel import bytes_per_step, expected_experts, kv_cache_bytes
from mtpwatch.core.roofline.modelconfig import GB, ConfigError, ModelSpec, preset_names, resolve_config
from tests.datadir import DataDir

# dense-bf16.json: hidden 1024, 4 layers, 8 heads × 128, 2 KV heads, MLP 4096 (gated), vocab 32000, untied
DENSE_ATTN = 4 * (2 * 1024 * 8 * 128 + 2 * 1024 * 2 * 128)  # q,o + k,v
DENSE_MLP = 4 * 3 * 1024 * 4096
DENSE_HEAD = 32000 * 1024
DENSE_KV_PER_TOKEN = 4 * 2 * 128 * 2 * 2  # layers × kv heads × head dim × (K,V) × bf16


def spec(data: DataDir, name: str, **kw: object) -> ModelSpec:
    return ModelSpec.from_config(data.path(f"configs/{name}"), **kw)  # type: ignore[arg-type]


def test_dense_bf16_plain_step(data: DataDir) -> None:
    s = bytes_per_step(spec(data, "dense-bf16.json"), k=0, context=100)
    assert s.target == (DENSE_ATTN + DENSE_MLP) * 2 + DENSE_HEAD * 2 + 1 * 1024 * 2
    assert s.kv == DENSE_KV_PER_TOKEN * 100
    assert s.drafter == 0 and s.draft_passes == 0
    assert s.total == s.target + s.kv


def test_dense_verify_pass_reads_weights_once_and_gathers_k_plus_1_rows(data: DataDir) -> None:
    s0 = bytes_per_step(spec(data, "dense-bf16.json"), k=0, context=0)
    s4 = bytes_per_step(spec(data, "dense-bf16.json"), k=4, context=0)
    assert s4.target - s0.target == 4 * 1024 * 2  # four more embedding rows, nothing else
    assert s4.tokens_per_pass == 5


def test_fp8_weights_keep_head_in_bf16(data: DataDir) -> None:
    s = bytes_per_step(spec(data, "dense-fp8.json"), k=0, context=0)
    assert s.target == (DENSE_ATTN + DENSE_MLP) * 1 + DENSE_HEAD * 2 + 1024 * 2


def test_nvfp4_counts_one_fp8_scale_per_16_weights(data: DataDir) -> None:
    s = bytes_per_step(spec(data, "dense-nvfp4.json"), k=0, context=0)
    assert s.target == pytest.approx((DENSE_ATTN + DENSE_MLP) * (4.5 / 8) + DENSE_HEAD * 2 + 1024 * 2)


def test_dtype_override_and_unknown_dtype(data: DataDir) -> None:
    s = bytes_per_step(spec(data, "dense-bf16.json", weight_dtype="int4"), k=0, context=0)
    assert s.target == pytest.approx((DENSE_ATTN + DENSE_MLP) * (0.5 + 2.5 / 128) + DENSE_HEAD * 2 + 2048)
    with pytest.raises(ConfigError, match="unknown dtype"):
        spec(data, "dense-bf16.json", weight_dtype="q9")


def test_moe_union_of_experts_for_k_plus_1_tokens(data: DataDir) -> None:
    # moe-bf16.json: hidden 512, 2 layers, 4 heads × 128, 4 KV heads, 8 experts top-2 × 256,
    # shared expert 512, vocab 1000 tied.
    s = bytes_per_step(spec(data, "moe-bf16.json"), k=3, context=0)
    union = 8 * (1 - (1 - 2 / 8) ** 4)
    assert s.experts_per_layer == pytest.approx(union)
    attn = 2 * (2 * 512 * 4 * 128 + 2 * 512 * 4 * 128)
    experts = 2 * union * 3 * 512 * 256
    shared = 2 * 3 * 512 * 512
    router = 2 * 512 * 8
    expected = (attn + experts + shared + router) * 2 + 1000 * 512 * 2 + 4 * 512 * 2
    assert s.target == pytest.approx(expected)
    one = bytes_per_step(spec(data, "moe-bf16.json"), k=0, context=0)
    assert one.experts_per_layer == pytest.approx(2.0)


def test_expected_experts_limits() -> None:
    assert expected_experts(128, 8, 1) == pytest.approx(8)
    assert expected_experts(128, 8, 5) == pytest.approx(35.3, abs=0.05)  # bandwidth.md §2.3
    assert expected_experts(128, 8, 10_000) == pytest.approx(128)
    assert expected_experts(0, 8, 4) == 0


def test_gemma4_nested_text_config_sliding_and_k_eq_v(data: DataDir) -> None:
    s = spec(data, "gemma4-tiny.json")
    assert s.hidden_size == 256 and s.layer_types == ("sliding", "sliding", "sliding", "full")
    step = bytes_per_step(s, k=0, context=100)
    sliding = 2 * 256 * 4 * 64 + 2 * 256 * 2 * 64
    full = 2 * 256 * 4 * 128 + 256 * 1 * 128  # K = V: no v_proj
    mlp = 4 * 3 * 256 * 512
    assert step.target == (3 * sliding + full + mlp) * 2 + 4096 * 256 * 2 + 256 * 2
    kv_sliding = 2 * 64 * 2 * 2 * 16  # window 16 < context 100
    kv_full = 1 * 128 * 1 * 2 * 100  # one tensor for K and V
    assert step.kv == 3 * kv_sliding + kv_full


def test_gemma4_drafter_centroid_head_and_target_kv(data: DataDir) -> None:
    target, drafter = spec(data, "gemma4-tiny.json"), spec(data, "gemma4-tiny-assistant.json")
    assert drafter.kv_from_target
    step = bytes_per_step(target, k=3, context=100, drafter=drafter)
    q_o = 2 * 64 * 2 * 64 + 2 * 64 * 2 * 128  # Q-only attention: no k/v projections
    mlp = 2 * 3 * 64 * 128
    projections = 2 * 256 * 64 + 64 * 256  # pre (2·backbone -> h) and post (h -> backbone)
    head = (4 * 4096 // 64) * 64 + 64 * 64  # centroid-selected rows + centroid matrix
    one_pass = (q_o + mlp + projections + head) * 2 + 1 * 256 * 2
    assert step.draft_passes == 3
    assert step.drafter == 3 * one_pass
    drafter_kv = 2 * 64 * 2 * 2 * 16 + 1 * 128 * 1 * 2 * 100  # reads the target's sliding + full cache
    assert step.kv_drafter == 3 * drafter_kv
    assert step.total == step.target + step.drafter + step.kv_target + step.kv_drafter
    block = bytes_per_step(target, k=3, context=100, drafter=drafter, draft_passes=1)
    assert block.drafter == one_pass


def test_batch_scales_kv_and_tokens_not_weights(data: DataDir) -> None:
    s1 = bytes_per_step(spec(data, "dense-bf16.json"), k=0, context=50, batch=1)
    s4 = bytes_per_step(spec(data, "dense-bf16.json"), k=0, context=50, batch=4)
    assert s4.kv == 4 * s1.kv
    assert s4.target - s1.target == 3 * 1024 * 2


def test_overrides(data: DataDir) -> None:
    s = bytes_per_step(spec(data, "dense-bf16.json", weights_gb=2.5), k=0, context=10)
    assert s.target == 2.5 * GB and s.kv == DENSE_KV_PER_TOKEN * 10
    a = bytes_per_step(spec(data, "dense-bf16.json", active_params=1e9, weight_dtype="fp8"), k=0, context=0)
    assert a.target == 1e9


def test_kv_shared_layers_read_but_do_not_own_cache(data: DataDir) -> None:
    cfg = json.loads(data.text("configs/gemma4-tiny.json"))
    cfg["text_config"]["num_kv_shared_layers"] = 2
    s = ModelSpec.from_config(cfg)
    assert kv_cache_bytes(s, 100) == 2 * (2 * 64 * 2 * 2 * 16)  # layers 0, 1 (sliding) own a cache
    assert bytes_per_step(s, 0, 100).kv == 3 * (2 * 64 * 2 * 2 * 16) + 128 * 2 * 100


def test_presets_match_research_note_derivations() -> None:
    # bandwidth.md §4.1 (derived independently there): 31B 61.4 GB BF16, 19.3 GB NVFP4 (head BF16);
    # E4B 9.29 GB; 26B-A4B 7.64 GB, 17.4 GB at k=4 (expert union)
    assert bytes_per_step(ModelSpec.from_config("gemma-4-31B-it"), 0, 0).target / GB == pytest.approx(
        61.4, abs=0.05
    )
    nv = ModelSpec.from_config("gemma-4-31B-it", weight_dtype="nvfp4")
    assert bytes_per_step(nv, 0, 0).target / GB == pytest.approx(19.3, abs=0.05)
    assert bytes_per_step(ModelSpec.from_config("gemma-4-E4B-it"), 0, 0).target / GB == pytest.approx(
        9.29, abs=0.02
    )
    moe = ModelSpec.from_config("gemma-4-26B-A4B-it")
    assert bytes_per_step(moe, 0, 0).target / GB == pytest.approx(7.64, abs=0.02)
    assert bytes_per_step(moe, 4, 0).target / GB == pytest.approx(17.4, abs=0.05)
    d31 = ModelSpec.from_config("gemma-4-31B-it-assistant")
    assert bytes_per_step(ModelSpec.from_config("gemma-4-31B-it"), 1, 0, d31).drafter / GB == pytest.approx(
        0.94, abs=0.01
    )
    assert {"gemma-4-E2B-it", "gemma-4-E4B-it-assistant"} <= set(preset_names())


def test_resolve_config_paths_presets_and_hf_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: DataDir
) -> None:
    assert resolve_config(str(data.path("configs/dense-bf16.json"))).name == "dense-bf16.json"
    assert resolve_config("GEMMA-4-31b-IT").stem == "gemma-4-31B-it"
    snap = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(data.text("configs/dense-bf16.json"))
    (snap / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123456}}))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    s = ModelSpec.from_config("acme/tiny")
    assert s.name == "acme/tiny" and s.checkpoint_bytes == 123456
    with pytest.raises(ConfigError, match="not in the local Hugging Face cache"):
        resolve_config("acme/absent")


def test_bad_configs_give_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError) as info:
        ModelSpec.from_config(bad)
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="hidden_size"):
        ModelSpec.from_config({"model_type": "x", "vocab_size": 10})
    with pytest.raises(ConfigError, match="MLA"):
        ModelSpec.from_config(
            {
                "hidden_size": 8,
                "num_hidden_layers": 1,
                "num_attention_heads": 1,
                "vocab_size": 8,
                "kv_lora_rank": 4,
            }
        )
