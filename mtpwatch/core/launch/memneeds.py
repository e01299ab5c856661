"""What one vLLM server needs in memory, estimated offline from the model's config or checkpoint.

Weights: the safetensors size when the model is a local folder (or in the local Hugging Face cache)
— the footprint vLLM loads, towers included — else the text decoder's stored parameters from
`config.json` × the weight dtype (vision/audio towers not counted). The drafter the same way. KV
cache: one full ``max_model_len`` sequence (vLLM refuses to start with less), sliding-window layers
capped at their window, KV-shared layers owning none, with `bytemodel.kv_cache_bytes`. Overheads:
the fixed allowances of `memplan`, plus the profiling pass's activations."""

from __future__ import annotations

from mtpwatch.core.launch.memplan import ACTIVATION_TOKENS, GIB, OVERHEAD_FIXED, OVERHEAD_GRAPHS, ServerNeed
from mtpwatch.core.roofline.bytemodel import kv_cache_bytes, stored_params
from mtpwatch.core.roofline.modelconfig import DTYPE_BYTES, ConfigError, ModelSpec

#: Methods whose drafter is a separate model that keeps its own KV cache (EAGLE heads, DFlash/DSpark
#: drafters and draft models have attention layers of their own; an MTP assistant reads the target's).
_OWN_KV_METHODS = frozenset({"draft_model", "eagle", "eagle3", "dflash", "dspark"})
UNCOUNTED = "drafter not counted: give --drafter-gib or a local path"  # `ServerNeed.drafter_uncounted`


def model_weight_bytes(spec: ModelSpec) -> tuple[float, str]:
    """(bytes, how they were found) for a model's weights in memory."""
    if spec.checkpoint_bytes:
        return spec.checkpoint_bytes, "checkpoint size"
    w = DTYPE_BYTES[spec.weight_dtype]
    return stored_params(spec) * w, f"config: stored parameters × {spec.weight_dtype}"


def _activation_bytes(spec: ModelSpec) -> float:
    """vLLM's profiling pass: hidden states and the widest MLP intermediate for ACTIVATION_TOKENS."""
    width = max([spec.hidden_size, *spec.intermediate_sizes, spec.moe_intermediate_size * 2])
    return ACTIVATION_TOKENS * (spec.hidden_size + 2 * width) * 2.0


def estimate_need(
    model: str,
    *,
    method: str | None = None,
    drafter: str | None = None,
    max_model_len: int | None = None,
    enforce_eager: bool = False,
    drafter_gib: float | None = None,
) -> ServerNeed | None:
    """The memory a server of `model` needs; None if unknown. `method` is the one vLLM is expected to
    run (`specrule.MethodChoice.expected`; None: one offline knowledge cannot name); `drafter_gib`,
    the user's ``--drafter-gib``, wins over the drafter's weights found offline."""
    try:
        target = ModelSpec.from_config(model)
    except ConfigError:
        return None
    weights, source = model_weight_bytes(target)
    length = max_model_len or target.max_position_embeddings or 8192  # vLLM's without --max-model-len
    kv = kv_cache_bytes(target, length)
    drafter_bytes = 0.0
    uncounted: str | None = None
    if drafter and method != "ngram":
        try:
            dspec: ModelSpec | None = ModelSpec.from_config(drafter)
        except ConfigError:
            dspec = None
        if dspec is not None:
            drafter_bytes, how = model_weight_bytes(dspec)
            source += f"; drafter {drafter}: {how}"
            if method in _OWN_KV_METHODS and not dspec.kv_from_target:
                kv += kv_cache_bytes(dspec, length)
        if drafter_gib is not None:
            drafter_bytes = drafter_gib * GIB
            source += f"; drafter {drafter}: {drafter_gib:g} GiB (--drafter-gib)"
        elif dspec is None:
            uncounted = UNCOUNTED
    overhead = OVERHEAD_FIXED + (0.0 if enforce_eager else OVERHEAD_GRAPHS) + _activation_bytes(target)
    return ServerNeed(
        weights=weights,
        drafter=drafter_bytes,
        kv=kv,
        overhead=overhead,
        max_model_len=length,
        source=source,
        drafter_uncounted=uncounted,
    )
