"""Analytic bytes read from DRAM per decode step (`bytes_per_step` -> `StepBytes`) of a `ModelSpec`
(a Hugging Face `config.json` that `modelconfig` reads and finds).

What is counted, per step of `batch` requests each verifying n = k + 1 tokens:

* target weights that stream every pass: attention and dense-MLP projections, per-layer-embedding
  projections (Gemma E models), MoE routers, the LM head in full (tied or not);
* embedding tables only as gathered rows (n rows per request; Gemma's per-layer embedding table too);
* MoE experts: the expected union touched by the N = batch·n tokens of the pass,
  U(N) = E·(1 − (1 − top_k/E)^N) per layer. This assumes each token picks its experts uniformly
  and independently; real routers are skewed and correlated between neighbouring tokens, so the
  true union is usually smaller: U(N) is an upper-ish estimate. Shared experts are always read;
* the drafter once per draft pass (`draft_passes`, k for MTP/EAGLE which draft token by token, 1 for
  a block drafter such as DFlash). Gemma 4 E2B/E4B assistants score only the centroid-selected
  candidates: top_k × vocab / num_centroids rows of their LM head plus the centroid matrix;
* KV-cache reads: every attention layer reads its keys and values for the current context, sliding
  layers min(context, window). Gemma's KV-shared layers own no cache and no k/v projections but
  still read their source layer's cache, so they add reads, not resident bytes (`kv_cache_bytes`
  gives the resident size). Gemma 4 global layers with `attention_k_eq_v` store one tensor for K
  and V. A Gemma 4 assistant reads the target's cache (Q-only attention), once per draft pass.

Not counted (each < 1 % at batch 1): norms, biases, activations, logits written, sampling, KV
writes: they show up as "achieved < ceiling". Weights count parameters × bytes per element of the
dtype, quantised formats' scales included (`DTYPE_BYTES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from mtpwatch.core.jsonout import JsonFields
from mtpwatch.core.roofline.modelconfig import DTYPE_BYTES, ModelSpec


@dataclass(frozen=True, slots=True)
class StepBytes(JsonFields):
    """Bytes read from DRAM by one decode step (one target verify pass and its draft passes)."""

    target: float
    """Target verify pass: weights (MoE expert union included), LM head, gathered embedding rows."""
    drafter: float
    """All draft passes of the step together (draft_passes × one drafter pass)."""
    kv: float
    """KV-cache reads of the target pass (`kv_target`) and of the draft passes (`kv_drafter`)."""
    total: float
    kv_target: float = 0.0
    kv_drafter: float = 0.0
    draft_passes: int = 0
    tokens_per_pass: int = 1
    """Tokens the target processes in the verify pass: batch × (k + 1)."""
    experts_per_layer: float | None = None
    """Expected distinct experts read per MoE layer (None for dense models)."""
    detail: Mapping[str, float] = field(default_factory=dict)
    """Target weight bytes by part: attention, mlp, experts, router, ple, lm_head, embed_rows."""


def expected_experts(num_experts: int, top_k: int, n_tokens: int) -> float:
    """U(N) = E · (1 − (1 − top_k/E)^N), the module's expert union (N = 1 gives top_k; large N, E)."""
    if num_experts <= 0 or top_k <= 0 or n_tokens <= 0:
        return 0.0
    p = min(1.0, top_k / num_experts)
    return num_experts * (1.0 - (1.0 - p) ** n_tokens)


def weight_bytes_per_pass(spec: ModelSpec, n_tokens: int) -> dict[str, float]:
    """Bytes of weights one forward pass over n_tokens tokens reads, by part."""
    w = DTYPE_BYTES[spec.weight_dtype]
    e = DTYPE_BYTES[spec.embed_dtype]
    h = spec.hidden_size
    attn = mlp = experts = router = ple = 0.0
    u = expected_experts(spec.num_experts, spec.experts_per_token, n_tokens)
    for i, lt in enumerate(spec.layer_types):
        kvh, hd, k_eq_v = spec.attention_geometry(lt)
        params = 2 * h * spec.num_heads * hd  # q_proj + o_proj
        if not spec.layer_is_kv_shared(i):
            params += h * kvh * hd * (1 if k_eq_v else 2)  # k_proj (+ v_proj)
        attn += params * w
        width = spec.intermediate_sizes[i] if i < len(spec.intermediate_sizes) else 0
        mlp += (3 if spec.gated_mlp else 2) * h * width * w
        if spec.moe_layers and spec.moe_layers[i]:
            experts += u * 3 * h * spec.moe_intermediate_size * w
            experts += 3 * h * spec.shared_expert_intermediate_size * w
            router += h * spec.num_experts * e
        if spec.ple_dim:
            ple += 2 * h * spec.ple_dim * w  # per-layer input gate + projection
    if spec.ple_dim:
        ple += h * spec.num_layers * spec.ple_dim * w  # per_layer_model_projection
        ple += n_tokens * spec.num_layers * spec.ple_dim * e  # gathered rows of the PLE table
    if spec.backbone_hidden_size:  # drafter: pre_projection (2·backbone -> h) and post_projection
        attn += 3 * spec.backbone_hidden_size * h * w
    if spec.use_ordered_embeddings and spec.num_centroids:
        rows = spec.centroid_top_k * spec.vocab_size / spec.num_centroids
        lm_head = (rows * h + spec.num_centroids * h) * e
    else:
        lm_head = spec.vocab_size * h * e
    embed_rows = n_tokens * (spec.backbone_hidden_size or h) * e
    return {
        "attention": attn,
        "mlp": mlp,
        "experts": experts,
        "router": router,
        "ple": ple,
        "lm_head": lm_head,
        "embed_rows": embed_rows,
    }


def _weights_total(spec: ModelSpec, n_tokens: int) -> tuple[float, dict[str, float]]:
    parts = weight_bytes_per_pass(spec, n_tokens)
    if spec.weights_bytes_override is not None:
        return spec.weights_bytes_override, parts
    if spec.active_params_override is not None:
        return spec.active_params_override * DTYPE_BYTES[spec.weight_dtype], parts
    return sum(parts.values()), parts


def kv_bytes_per_token(spec: ModelSpec, layer_type: str) -> float:
    """KV bytes one cached token occupies in one layer of the given type."""
    kvh, hd, k_eq_v = spec.attention_geometry(layer_type)
    return kvh * hd * (1 if k_eq_v else 2) * DTYPE_BYTES[spec.kv_dtype]


def tokens_seen(spec: ModelSpec, layer_type: str, context: int) -> int:
    return min(context, spec.sliding_window) if layer_type == "sliding" and spec.sliding_window else context


def kv_cache_bytes(spec: ModelSpec, context: int, batch: int = 1) -> float:
    """Resident KV cache for `context` tokens: KV-shared layers own none."""
    return batch * sum(
        kv_bytes_per_token(spec, lt) * tokens_seen(spec, lt, context)
        for i, lt in enumerate(spec.layer_types)
        if not spec.layer_is_kv_shared(i)
    )


def _kv_read(reader: ModelSpec, target: ModelSpec, context: int, batch: int) -> float:
    """KV bytes one pass of `reader` (the target, or a drafter) reads over its visible context: the
    target's cache (Gemma 4 assistant) or its own, within the reader's window, else the cache's."""
    owner = target if reader.kv_from_target else reader
    windowed = reader if reader.sliding_window else owner
    return batch * sum(
        kv_bytes_per_token(owner, lt) * tokens_seen(windowed, lt, context) for lt in reader.layer_types
    )


def bytes_per_step(
    spec: ModelSpec,
    k: int,
    context: int,
    drafter: ModelSpec | None = None,
    batch: int = 1,
    draft_passes: int | None = None,
) -> StepBytes:
    """Bytes one decode step reads: a target pass over batch·(k+1) tokens plus the draft passes;
    `context`: tokens already cached per request; `drafter` None: drafting free of weights (ngram) or
    off (k = 0: no draft passes); `draft_passes` default k (token-by-token drafting)."""
    if k < 0 or context < 0 or batch < 1:
        raise ValueError("k and context must be >= 0 and batch >= 1")
    n = batch * (k + 1)
    target, parts = _weights_total(spec, n)
    kv_t = _kv_read(spec, spec, context, batch)
    passes = 0 if (k == 0 or drafter is None) else (k if draft_passes is None else draft_passes)
    drafter_bytes = kv_d = 0.0
    if passes and drafter is not None:
        one, _ = _weights_total(drafter, batch)
        drafter_bytes = passes * one
        kv_d = passes * _kv_read(drafter, spec, context, batch)
    kv = kv_t + kv_d
    u = expected_experts(spec.num_experts, spec.experts_per_token, n) if spec.is_moe else None
    return StepBytes(
        target=target,
        drafter=drafter_bytes,
        kv=kv,
        total=target + drafter_bytes + kv,
        kv_target=kv_t,
        kv_drafter=kv_d,
        draft_passes=passes,
        tokens_per_pass=n,
        experts_per_layer=u,
        detail=parts,
    )


def active_params(spec: ModelSpec, n_tokens: int = 1) -> float:
    """Parameters read per pass (embedding rows excluded), for FLOP estimates: 2 FLOP/param/token."""
    if spec.active_params_override is not None:
        return spec.active_params_override
    parts = weight_bytes_per_pass(spec, n_tokens)
    w, e = DTYPE_BYTES[spec.weight_dtype], DTYPE_BYTES[spec.embed_dtype]
    ple_rows = n_tokens * spec.num_layers * spec.ple_dim * e  # the gathered PLE rows are no parameters read
    linear = parts["attention"] + parts["mlp"] + parts["experts"] + (parts["ple"] - ple_rows)
    return linear / w + (parts["lm_head"] + parts["router"]) / e


def stored_params(spec: ModelSpec) -> float:
    """Parameters the text decoder stores (all experts, full tables): to cross-check a checkpoint size."""
    full = replace(spec, kv_from_target=False, num_kv_shared_layers=0, use_ordered_embeddings=False)
    parts = weight_bytes_per_pass(full, 0)
    w, e = DTYPE_BYTES[spec.weight_dtype], DTYPE_BYTES[spec.embed_dtype]
    n_moe = sum(spec.moe_layers) if spec.moe_layers else 0
    experts = n_moe * spec.num_experts * 3 * spec.hidden_size * spec.moe_intermediate_size
    # parts["experts"] holds only the shared experts here (no tokens routed).
    params = (parts["attention"] + parts["mlp"] + parts["ple"] + parts["experts"]) / w + experts
    params += (parts["lm_head"] + parts["router"]) / e
    if not spec.tie_word_embeddings:
        params += spec.vocab_size * spec.hidden_size
    if spec.ple_dim:
        params += spec.vocab_size * spec.num_layers * spec.ple_dim
    return params
