"""A model's shapes and dtypes (`ModelSpec`, Gemma 4 `text_config` nesting included), from a Hugging
Face `config.json` found offline (`resolve_config`); dtype names and their bytes per element.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

GB = 1e9
"""Bytes in a GB: bandwidth is quoted in decimal GB/s everywhere in mtpwatch."""

#: Bytes per element, scales included.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,  # per-tensor/per-channel scales are negligible
    "int8": 1.0,
    "nvfp4": 0.5 + 1.0 / 16,  # FP4 E2M1 + one FP8 (UE4M3) scale per 16 elements = 4.5 bit
    "mxfp4": 0.5 + 1.0 / 32,  # FP4 + one E8M0 scale per 32 elements = 4.25 bit
    "int4": 0.5 + 2.5 / 128,  # AWQ/GPTQ-style: 4 bit + fp16 scale + 4-bit zero per group of 128
}

_DTYPE_ALIASES: dict[str, str] = {
    **dict.fromkeys(("float32", "float"), "fp32"),
    "bfloat16": "bf16",
    **dict.fromkeys(("float16", "half"), "fp16"),
    **dict.fromkeys(("float8", "fp8_e4m3", "fp8_e5m2", "float8_e4m3fn", "e4m3"), "fp8"),
    "fp4": "nvfp4",
    **dict.fromkeys(("w4a16", "awq", "gptq", "q4"), "int4"),
    "w8a8": "int8",
}

PRESET_DIR = Path(__file__).resolve().parents[2] / "data" / "configs"
"""Bundled Gemma 4 configs (reconstructions for this model; see the README there)."""


class ConfigError(ValueError):
    """A model config could not be found, read or understood (one line a user can act on)."""


def normalize_dtype(name: str) -> str:
    """Canonical dtype key of `DTYPE_BYTES` for a user or config spelling ('bfloat16' -> 'bf16')."""
    key = name.strip().lower().removeprefix("torch.")
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise ConfigError(f"unknown dtype {name!r}; known: {', '.join(DTYPE_BYTES)}")
    return key


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """The shapes and dtypes of one decoder that decide how many bytes a decode pass reads."""

    name: str
    model_type: str
    hidden_size: int
    num_layers: int
    vocab_size: int
    num_heads: int
    head_dim: int
    num_kv_heads: int
    layer_types: tuple[str, ...]
    """'sliding' or 'full' per layer."""
    sliding_window: int | None = None
    global_head_dim: int = 0
    """Head dim of full-attention layers (Gemma 4: 512); equals head_dim elsewhere."""
    num_global_kv_heads: int = 0
    global_k_eq_v: bool = False
    """Gemma 4 full layers with `attention_k_eq_v`: one tensor serves as K and V (no v_proj)."""
    num_kv_shared_layers: int = 0
    """The last N layers reuse an earlier layer's cache (Gemma 3n/4 E models; all of an assistant)."""
    intermediate_sizes: tuple[int, ...] = ()
    """Dense MLP width per layer (0 = none)."""
    gated_mlp: bool = True
    """gate+up+down (3 matrices) as in Llama/Qwen/Gemma; False = up+down."""
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    """Total width of always-on shared experts in a MoE layer (0 = none)."""
    moe_layers: tuple[bool, ...] = ()
    tie_word_embeddings: bool = False
    ple_dim: int = 0
    """Gemma per-layer-embedding width (`hidden_size_per_layer_input`); 0 = none."""
    backbone_hidden_size: int = 0
    """Drafters (Gemma 4 assistant): width of the target they read hidden states from."""
    kv_from_target: bool = False
    """Drafter attends to the target's KV cache (Gemma 4 assistant: Q-only attention)."""
    num_centroids: int = 0
    centroid_top_k: int = 0
    use_ordered_embeddings: bool = False
    weight_dtype: str = "bf16"
    """Dtype of the linear layers (attention, MLP, experts, projections)."""
    embed_dtype: str = "bf16"
    """Dtype of embeddings, LM head and routers (quantised checkpoints keep these in BF16)."""
    kv_dtype: str = "bf16"
    max_position_embeddings: int = 0
    """The context length vLLM serves without ``--max-model-len``; 0: the config gives none."""
    weights_bytes_override: float | None = None
    """`weights_gb` given by the user: bytes of weights read per pass, replacing the computed ones."""
    active_params_override: float | None = None
    """`active_params` given by the user: parameters read per pass, at `weight_dtype`."""
    checkpoint_bytes: float | None = None
    """`metadata.total_size` of the safetensors index (a footprint: all experts, towers, tables)."""
    source: str = "dict"
    notes: tuple[str, ...] = ()

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any] | str | os.PathLike[str],
        *,
        name: str | None = None,
        weight_dtype: str | None = None,
        kv_dtype: str | None = None,
        weights_gb: float | None = None,
        active_params: float | None = None,
    ) -> ModelSpec:
        """A spec from a config dict, a config.json path, a preset name or a HF model id; ConfigError
        (one line): unreadable or unsupported. Dtypes default to the config's (`torch_dtype`/`dtype`,
        `quantization_config`); `weights_gb`/`active_params` (positive: `mtpwatch roofline` checks)
        override the computed weight bytes per pass (the KV cache is still computed)."""
        source = "dict"
        checkpoint: float | None = None
        if isinstance(config, Mapping):
            raw: Mapping[str, Any] = config
        else:
            path = resolve_config(str(config))
            raw = read_json(path)
            source = str(path)
            checkpoint = checkpoint_total_bytes(path.parent)
        spec = _parse(raw, name=name or _default_name(raw, source), source=source)
        return replace(
            spec,
            weight_dtype=normalize_dtype(weight_dtype) if weight_dtype else spec.weight_dtype,
            kv_dtype=normalize_dtype(kv_dtype) if kv_dtype else spec.kv_dtype,
            checkpoint_bytes=checkpoint,
            weights_bytes_override=None if weights_gb is None else weights_gb * GB,
            active_params_override=None if active_params is None else float(active_params),
        )

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and any(self.moe_layers)

    def layer_is_kv_shared(self, i: int) -> bool:
        """True when layer i reuses another layer's cache (no k/v projections, no own cache)."""
        return self.kv_from_target or (
            self.num_kv_shared_layers > 0 and i >= self.num_layers - self.num_kv_shared_layers
        )

    def attention_geometry(self, layer_type: str) -> tuple[int, int, bool]:
        """(kv_heads, head_dim, k_eq_v) of a 'sliding' or 'full' layer."""
        if layer_type == "full":
            return self.num_global_kv_heads, self.global_head_dim, self.global_k_eq_v
        return self.num_kv_heads, self.head_dim, False


def _default_name(raw: Mapping[str, Any], source: str) -> str:
    if source != "dict":
        p = Path(source)
        if p.parent.name and p.parent.parent.name == "snapshots":  # HF cache: models--org--name
            return p.parent.parent.parent.name.removeprefix("models--").replace("--", "/")
        return p.stem if p.name != "config.json" else p.parent.name
    return str(raw.get("_name_or_path") or raw.get("model_type") or "model")


def _get(cfg: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        value = cfg.get(key)
        if value is not None:
            return value
    return default


def _int(cfg: Mapping[str, Any], *keys: str, default: int | None = None) -> int:
    value = _get(cfg, *keys)
    if value is None:
        if default is None:
            raise ConfigError(f"config has no {keys[0]!r}: not a decoder config mtpwatch can model")
        return default
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config field {keys[0]!r} is not a number: {value!r}") from exc


def _layer_types(cfg: Mapping[str, Any], n_layers: int, model_type: str) -> tuple[str, ...]:
    raw = cfg.get("layer_types")
    if isinstance(raw, list) and raw:
        out = tuple("sliding" if "sliding" in str(t) or "chunk" in str(t) else "full" for t in raw)
        if len(out) != n_layers:
            raise ConfigError(f"layer_types has {len(out)} entries for {n_layers} layers")
        return out
    window = cfg.get("sliding_window")
    pattern = cfg.get("sliding_window_pattern")
    if window and isinstance(pattern, int) and pattern > 1:  # Gemma 3: every N-th layer is global
        return tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(n_layers))
    if window and (cfg.get("use_sliding_window") or model_type in ("mistral", "mixtral")):
        return ("sliding",) * n_layers
    return ("full",) * n_layers


def _dtypes(raw: Mapping[str, Any], tc: Mapping[str, Any]) -> tuple[str, str, str, list[str]]:
    """(weight, embed, kv) dtypes and notes from torch_dtype and quantization_config."""
    notes: list[str] = []
    base_raw = _get(tc, "torch_dtype", "dtype") or _get(raw, "torch_dtype", "dtype") or "bfloat16"
    try:
        base = normalize_dtype(str(base_raw))
    except ConfigError:
        base = "bf16"
    if base in ("fp8", "int8", "nvfp4", "int4", "mxfp4"):
        base = "bf16"
    weight, kv = base, base
    q = raw.get("quantization_config") or tc.get("quantization_config")
    if isinstance(q, Mapping):
        method = str(q.get("quant_method", "")).lower()
        algo = str(q.get("quant_algo", "")).lower()
        text = json.dumps(q).lower()
        bits = q.get("bits") or q.get("w_bit")
        if method == "fp8" or algo == "fp8":
            weight = "fp8"
        elif algo in ("nvfp4", "fp4") or "nvfp4" in text:
            weight = "nvfp4"
        elif method == "mxfp4":
            weight = "mxfp4"
        elif method in ("awq", "gptq", "autoround", "auto-round", "bitsandbytes", "hqq"):
            weight = "int8" if bits == 8 or q.get("load_in_8bit") else "int4"
        elif method == "compressed-tensors":
            groups = q.get("config_groups") or {}
            nb = {g.get("weights", {}).get("num_bits") for g in groups.values() if isinstance(g, Mapping)}
            kinds = {g.get("weights", {}).get("type") for g in groups.values() if isinstance(g, Mapping)}
            if 4 in nb:
                weight = "nvfp4" if "float" in kinds else "int4"
            elif 8 in nb:
                weight = "fp8" if "float" in kinds else "int8"
            else:
                notes.append("compressed-tensors scheme not recognised: weights counted at " + base)
            scheme = q.get("kv_cache_scheme")
            if isinstance(scheme, Mapping) and scheme.get("num_bits") == 8:
                kv = "fp8"
        else:
            notes.append(f"quantization {method or '?'} not recognised: weights counted at {base}")
    return weight, base, kv, notes


def _mlp(
    tc: Mapping[str, Any], h: int, n_layers: int, n_shared: int
) -> tuple[int, int, int, int, list[int], list[bool]]:
    """(experts, experts per token, expert width, shared-expert width, dense MLP width per layer,
    MoE per layer) from the config's MLP and MoE keys."""
    # MoE: Gemma 4 (enable_moe_block, dense MLP in parallel), Mixtral (experts are the MLP),
    # Qwen2/3-MoE (moe_intermediate_size, optional shared expert, dense layers by mlp_only_layers).
    n_exp = _int(tc, "num_experts", "num_local_experts", "n_routed_experts", default=0)
    top_k = _int(tc, "top_k_experts", "num_experts_per_tok", "moe_top_k", default=0)
    inter = _int(tc, "intermediate_size", "ffn_dim", "n_inner", default=4 * h)
    moe_inter = _int(tc, "moe_intermediate_size", default=0)
    shared_inter = _int(tc, "shared_expert_intermediate_size", default=0)
    shared_inter += _int(tc, "n_shared_experts", "num_shared_experts", default=0) * moe_inter
    widths = [inter] * n_layers
    moe_layers = [False] * n_layers
    if n_exp and top_k:
        if tc.get("enable_moe_block"):
            moe_layers = [True] * n_layers
        elif moe_inter == 0:  # Mixtral-style: intermediate_size is the expert width
            moe_inter, moe_layers, widths = inter, [True] * n_layers, [0] * n_layers
        else:
            step = _int(tc, "decoder_sparse_step", default=1) or 1
            dense_only = set(tc.get("mlp_only_layers") or [])
            first_dense = _int(tc, "first_k_dense_replace", default=0)
            for i in range(n_layers):
                if i not in dense_only and i >= first_dense and (i + 1) % step == 0:
                    moe_layers[i], widths[i] = True, 0
    if tc.get("use_double_wide_mlp") and n_shared:  # Gemma E2B: KV-shared layers have 2× MLP
        widths = [w * 2 if i >= n_layers - n_shared else w for i, w in enumerate(widths)]
    return n_exp, top_k, moe_inter, shared_inter, widths, moe_layers


def _parse(raw: Mapping[str, Any], *, name: str, source: str) -> ModelSpec:
    tc_raw = raw.get("text_config")
    tc: Mapping[str, Any] = tc_raw if isinstance(tc_raw, Mapping) else raw
    top_type = str(raw.get("model_type", ""))
    model_type = str(tc.get("model_type") or top_type or "unknown")
    if _get(tc, "kv_lora_rank") is not None:
        raise ConfigError("multi-head latent attention (DeepSeek MLA) is not modelled; use --weights-gb")
    h = _int(tc, "hidden_size", "n_embd", "d_model")
    n_layers = _int(tc, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(tc, "num_attention_heads", "n_head")
    kv_heads = _int(tc, "num_key_value_heads", default=heads)
    head_dim = _int(tc, "head_dim", default=h // heads)
    vocab = _int(tc, "vocab_size", default=_int(raw, "vocab_size", default=0))
    if vocab <= 0:
        raise ConfigError("config has no 'vocab_size'")
    layer_types = _layer_types(tc, n_layers, model_type)
    is_assistant = "assistant" in top_type or top_type.endswith("_mtp")
    n_shared = _int(tc, "num_kv_shared_layers", default=0)

    n_exp, top_k, moe_inter, shared_inter, widths, moe_layers = _mlp(tc, h, n_layers, n_shared)
    act = str(_get(tc, "hidden_act", "hidden_activation", "activation_function", default="silu"))
    gated = model_type not in ("gpt2", "gpt_neox", "opt", "gptj", "phi") and act != "relu"

    weight, embed, kv, notes = _dtypes(raw, tc)
    return ModelSpec(
        name=name,
        model_type=top_type or model_type,
        hidden_size=h,
        num_layers=n_layers,
        vocab_size=vocab,
        num_heads=heads,
        head_dim=head_dim,
        num_kv_heads=kv_heads,
        layer_types=layer_types,
        sliding_window=_get(tc, "sliding_window"),
        global_head_dim=_int(tc, "global_head_dim", default=head_dim),
        num_global_kv_heads=_int(tc, "num_global_key_value_heads", default=kv_heads),
        global_k_eq_v=bool(tc.get("attention_k_eq_v", False)),
        num_kv_shared_layers=n_layers if is_assistant else n_shared,  # assistants read the target's cache
        intermediate_sizes=tuple(widths),
        gated_mlp=gated,
        num_experts=n_exp if any(moe_layers) else 0,
        experts_per_token=top_k if any(moe_layers) else 0,
        moe_intermediate_size=moe_inter if any(moe_layers) else 0,
        shared_expert_intermediate_size=shared_inter if any(moe_layers) else 0,
        moe_layers=tuple(moe_layers),
        tie_word_embeddings=bool(
            _get(raw, "tie_word_embeddings", default=_get(tc, "tie_word_embeddings", default=False))
        ),
        ple_dim=_int(tc, "hidden_size_per_layer_input", default=0),
        backbone_hidden_size=_int(raw, "backbone_hidden_size", default=0) if is_assistant else 0,
        kv_from_target=is_assistant,
        num_centroids=_int(raw, "num_centroids", default=0),
        centroid_top_k=_int(raw, "centroid_intermediate_top_k", default=0),
        use_ordered_embeddings=bool(raw.get("use_ordered_embeddings", False)),
        weight_dtype=weight,
        embed_dtype=embed,
        kv_dtype=kv,
        max_position_embeddings=_int(
            tc, "max_position_embeddings", default=_int(raw, "max_position_embeddings", default=0)
        ),
        source=source,
        notes=tuple(notes),
    )


def preset_names() -> list[str]:
    """Names of the bundled configs (file stems in mtpwatch/data/configs)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


def _hf_cache_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(Path(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        dirs.append(Path(os.environ["HF_HOME"]) / "hub")
    dirs.append(Path.home() / ".cache" / "huggingface" / "hub")
    return dirs


def resolve_config(ref: str) -> Path:
    """The config.json of, in this order: a file; a directory holding one; a preset (case-insensitive
    stem, with or without a leading 'google/'); a HF model id in the local HF cache
    (`models--ORG--NAME/snapshots/*/config.json`, newest snapshot). Never touches the network."""
    path = Path(ref).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        if (path / "config.json").is_file():
            return path / "config.json"
        raise ConfigError(f"{ref}: directory has no config.json")
    stem = ref.split("/")[-1].removesuffix(".json").lower()
    for p in PRESET_DIR.glob("*.json"):
        if p.stem.lower() == stem:
            return p
    if "/" in ref and not ref.startswith((".", "/", "~")):
        repo = "models--" + ref.strip("/").replace("/", "--")
        for cache in _hf_cache_dirs():
            snaps = sorted(
                (cache / repo / "snapshots").glob("*/config.json"), key=lambda p: p.stat().st_mtime
            )
            if snaps:
                return snaps[-1]
    raise ConfigError(
        f"no config for {ref!r}: not a file, not a preset ({', '.join(preset_names())}), "
        "not in the local Hugging Face cache"
    )


def read_json(path: Path) -> Mapping[str, Any]:
    """A config file's JSON object; `ConfigError` (one line) when it is unreadable or not an object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a JSON object")
    return data


def checkpoint_total_bytes(model_dir: Path) -> float | None:
    """Checkpoint size from `model.safetensors.index.json` (metadata.total_size) or a single file's
    header: a footprint (all experts, vision/audio towers, per-layer tables, drafter heads), never
    bytes per step; the weights a server holds (`memneeds`), and a cross-check of the byte model."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            meta = json.loads(index.read_text(encoding="utf-8")).get("metadata") or {}
            total = meta.get("total_size")
            return float(total) if total else None
        except (OSError, ValueError):
            return None
    single = model_dir / "model.safetensors"
    if single.is_file():
        try:
            with single.open("rb") as fh:
                (length,) = struct.unpack("<Q", fh.read(8))
                if length > 100_000_000:
                    return None
                header = json.loads(fh.read(length))
            ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
            return float(max(ends)) if ends else None
        except (OSError, ValueError, KeyError, struct.error):
            return None
    return None
