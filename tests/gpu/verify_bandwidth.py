"""Check mtpwatch's analytic bytes-per-step model against NVML GPM on a real GPU.

Runs a randomly initialised Llama-shaped decoder (a few GB in bf16, built from code, nothing
downloaded) with greedy batch-1 decoding through Hugging Face transformers, plain and with a small
draft model (assisted generation), while `mtpwatch.core.roofline.nvml.Sampler` reads GPM DRAM_BW_UTIL.
Every forward pass is recorded by a hook (tokens in, context length), its bytes come from
`mtpwatch.core.roofline.bytemodel.bytes_per_step` on the same config, and analytic GB/s = Σ bytes / time is
compared with GPM's GB/s over exactly the same window (one GPM sample before, one after).

    python tests/gpu/verify_bandwidth.py [--out results.json]     # prints JSON
    pytest -m gpu tests/gpu/verify_bandwidth.py                   # asserts the 10 % agreement

Skips (exit status 0 with a reason, or pytest.skip) without torch+CUDA, transformers, NVML or GPM.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mtpwatch.core.roofline.bytemodel import bytes_per_step  # noqa: E402
from mtpwatch.core.roofline.ceilings import compute_roofline  # noqa: E402
from mtpwatch.core.roofline.modelconfig import GB, ModelSpec  # noqa: E402
from mtpwatch.core.roofline.nvml import Sampler  # noqa: E402

TOLERANCE = 0.10

# ~3.75 B parameters, 7.5 GB in bf16: far larger than the H200's 60 MB L2, so every pass streams.
TARGET_CONFIG: dict[str, Any] = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
}
DRAFT_CONFIG: dict[str, Any] = {
    **TARGET_CONFIG,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "head_dim": 64,
}


class SkipVerification(Exception):
    """The machine cannot run the check (no GPU, NVML, GPM, torch or transformers)."""


def _environment() -> tuple[Any, Any, Any]:
    try:
        import torch
    except ImportError as exc:
        raise SkipVerification("torch is not installed") from exc
    if not torch.cuda.is_available():
        raise SkipVerification("no CUDA GPU visible to torch")
    try:
        import transformers
    except ImportError as exc:
        raise SkipVerification("transformers is not installed") from exc
    try:
        import pynvml
    except ImportError as exc:
        raise SkipVerification("nvidia-ml-py (pynvml) is not installed") from exc
    probe = Sampler(nvml=pynvml)
    reading = probe.sample()
    probe.stop()
    if reading.source != "nvml+gpm":
        raise SkipVerification(f"no GPM bandwidth counter: {reading.reason}")
    return torch, transformers, pynvml


class CallRecorder:
    """Forward pre-hook: records (tokens in, tokens already cached) of every forward pass."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []
        self.enabled = False

    def __call__(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not self.enabled:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        n = int(ids.shape[-1]) if ids is not None else int(kwargs["inputs_embeds"].shape[1])
        cache = kwargs.get("past_key_values")
        past = int(cache.get_seq_length()) if cache is not None and hasattr(cache, "get_seq_length") else 0
        self.calls.append((n, past))


def _analytic_bytes(spec: ModelSpec, calls: list[tuple[int, int]]) -> float:
    # Each forward pass over n tokens at context `past` reads what a k = n-1 verify pass reads.
    return sum(bytes_per_step(spec, n - 1, past + n).total for n, past in calls)


def _gpm_window(pynvml: Any) -> Sampler:
    window = Sampler(nvml=pynvml, period_s=3600)
    window.sample()  # first GPM sample: the window opens here
    return window


def _run_case(
    torch: Any,
    model: Any,
    pynvml: Any,
    spec: ModelSpec,
    prompt: Any,
    new_tokens: int,
    recorders: dict[str, tuple[CallRecorder, ModelSpec]],
    **generate_kwargs: Any,
) -> dict[str, Any]:
    for rec, _ in recorders.values():
        rec.calls.clear()
        rec.enabled = True
    torch.cuda.synchronize()
    window = _gpm_window(pynvml)
    t0 = time.perf_counter()
    out = model.generate(
        prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, **generate_kwargs
    )
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    reading = window.sample()
    window.stop()
    for rec, _ in recorders.values():
        rec.enabled = False
    analytic = {name: _analytic_bytes(s, rec.calls) for name, (rec, s) in recorders.items()}
    total = sum(analytic.values())
    target_calls = recorders["target"][0].calls
    decode_steps = max(len(target_calls) - 1, 1)  # the first call is the prefill
    generated = int(out.shape[-1] - prompt.shape[-1])
    analytic_gbps = total / elapsed / GB
    return {
        "elapsed_s": elapsed,
        "generated_tokens": generated,
        "target_forward_passes": len(target_calls),
        "steps_per_s": decode_steps / elapsed,
        "tok_s": generated / elapsed,
        "tokens_per_target_pass": [n for n, _ in target_calls[1:6]],
        "draft_forward_passes": len(recorders["draft"][0].calls) if "draft" in recorders else 0,
        "analytic_bytes": analytic,
        "analytic_gbps": analytic_gbps,
        "gpm_dram_bw_util_pct": reading.dram_bw_util_pct,
        "gpm_gbps": reading.dram_gbps,
        "gpm_interval_s": reading.interval_s,
        "ratio_gpm_over_analytic": (reading.dram_gbps / analytic_gbps) if reading.dram_gbps else None,
        "memory_busy_pct_end": reading.memory_busy_pct,
    }


def _graph_case(
    torch: Any,
    model: Any,
    pynvml: Any,
    spec: ModelSpec,
    n_tokens: int,
    context: int,
    seconds: float = 3.0,
) -> dict[str, Any]:
    """The same weights run as one CUDA graph per step (no Python between kernels): near the roof.

    Each replay is a pass over `n_tokens` tokens (1 = plain decode, k+1 = a verify pass) that
    attends to a fixed KV buffer of `context` tokens and feeds its argmax back in. It uses the HF
    model's own modules; only the cache is a static buffer, so the graph can be captured.
    """
    import torch.nn.functional as F

    m, cfg = model.model, model.config
    heads, kv_heads, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    kv = [
        (
            torch.randn(1, kv_heads, context, hd, device="cuda", dtype=torch.bfloat16),
            torch.randn(1, kv_heads, context, hd, device="cuda", dtype=torch.bfloat16),
        )
        for _ in m.layers
    ]
    tok = torch.zeros(1, n_tokens, dtype=torch.long, device="cuda")

    def step() -> None:
        x = m.embed_tokens(tok)
        for layer, (kc, vc) in zip(m.layers, kv, strict=True):
            a = layer.self_attn
            h = layer.input_layernorm(x)
            q = a.q_proj(h).view(1, n_tokens, heads, hd).transpose(1, 2)
            a.k_proj(h), a.v_proj(h)  # read as in a real step; the static cache is not appended to
            o = F.scaled_dot_product_attention(q, kc, vc, enable_gqa=True)
            x = x + a.o_proj(o.transpose(1, 2).reshape(1, n_tokens, heads * hd))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        logits = model.lm_head(m.norm(x[:, -1:]))
        tok.copy_(logits.argmax(-1).expand(1, n_tokens))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    t0 = time.perf_counter()
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()
    replays = max(50, int(seconds * 20 / (time.perf_counter() - t0)))
    window = _gpm_window(pynvml)
    t0 = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    reading = window.sample()
    window.stop()
    per_step = bytes_per_step(spec, n_tokens - 1, context).total
    analytic_gbps = replays * per_step / elapsed / GB
    return {
        "elapsed_s": elapsed,
        "replays": replays,
        "tokens_per_pass": n_tokens,
        "context": context,
        "steps_per_s": replays / elapsed,
        "analytic_bytes_per_step": per_step,
        "analytic_gbps": analytic_gbps,
        "gpm_dram_bw_util_pct": reading.dram_bw_util_pct,
        "gpm_gbps": reading.dram_gbps,
        "gpm_interval_s": reading.interval_s,
        "ratio_gpm_over_analytic": (reading.dram_gbps / analytic_gbps) if reading.dram_gbps else None,
        "memory_busy_pct_end": reading.memory_busy_pct,
    }


def _sampler_cpu_cost(pynvml: Any, seconds: float = 4.0, period: float = 0.25) -> dict[str, float]:
    """CPU seconds per tick of the real sampler on an otherwise idle process, and % of a core at 1 Hz."""
    sampler = Sampler(nvml=pynvml, period_s=period)
    c0, t0 = time.process_time(), time.perf_counter()
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    per_tick = cpu / max(sampler.ticks, 1)
    return {
        "ticks": sampler.ticks,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_ms_per_tick": 1e3 * per_tick,
        "pct_of_core_at_1hz": 100.0 * per_tick / 1.0,
    }


def _hf_config(transformers: Any, cfg: dict[str, Any]) -> Any:
    skip = {"model_type", "architectures", "torch_dtype"}
    return transformers.LlamaConfig(**{key: v for key, v in cfg.items() if key not in skip})


def run_verification(new_tokens: int = 256, assisted_tokens: int = 96, k: int = 4) -> dict[str, Any]:
    torch, transformers, pynvml = _environment()
    cpu_cost = _sampler_cpu_cost(pynvml)
    target_spec = ModelSpec.from_config(TARGET_CONFIG, name="llama-3.75B-random")
    draft_spec = ModelSpec.from_config(DRAFT_CONFIG, name="llama-draft-random")
    torch.manual_seed(0)
    with torch.device("cuda"):
        prev = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            target = transformers.LlamaForCausalLM(_hf_config(transformers, TARGET_CONFIG)).eval()
            draft = transformers.LlamaForCausalLM(_hf_config(transformers, DRAFT_CONFIG)).eval()
        finally:
            torch.set_default_dtype(prev)
    params = {
        "target": sum(p.numel() for p in target.parameters()),
        "draft": sum(p.numel() for p in draft.parameters()),
    }
    for m in (target, draft):
        m.generation_config.eos_token_id = None
        m.generation_config.pad_token_id = 0
    draft.generation_config.num_assistant_tokens = k
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    if hasattr(draft.generation_config, "assistant_confidence_threshold"):
        draft.generation_config.assistant_confidence_threshold = 0.0
    rec_t, rec_d = CallRecorder(), CallRecorder()
    target.register_forward_pre_hook(rec_t, with_kwargs=True)
    draft.register_forward_pre_hook(rec_d, with_kwargs=True)
    prompt = torch.randint(0, TARGET_CONFIG["vocab_size"], (1, 128), device="cuda")

    results: dict[str, Any] = {}
    with torch.inference_mode(), Sampler(nvml=pynvml, period_s=1.0) as background:
        target.generate(prompt, max_new_tokens=8, do_sample=False)  # warm-up (kernels, allocator)
        results["plain"] = _run_case(
            torch, target, pynvml, target_spec, prompt, new_tokens, {"target": (rec_t, target_spec)}
        )
        target.generate(prompt, max_new_tokens=8, do_sample=False, assistant_model=draft)
        results["assisted"] = _run_case(
            torch,
            target,
            pynvml,
            target_spec,
            prompt,
            assisted_tokens,
            {"target": (rec_t, target_spec), "draft": (rec_d, draft_spec)},
            assistant_model=draft,
        )
        results["graph_plain"] = _graph_case(torch, target, pynvml, target_spec, 1, 1024)
        results["graph_verify_k4"] = _graph_case(torch, target, pynvml, target_spec, k + 1, 1024)
        last = background.latest()
        ticks = background.ticks
    plain = results["plain"]
    roof = compute_roofline(
        target_spec,
        peak_gbps=last.peak_gbps or 4800.0,
        gpu=last.device_name or "GPU",
        context=128 + new_tokens // 2,
        steps_per_s=plain["steps_per_s"],
        tok_s=plain["tok_s"],
    )
    graph = results["graph_plain"]
    roof_graph = compute_roofline(
        target_spec,
        peak_gbps=last.peak_gbps or 4800.0,
        gpu=last.device_name or "GPU",
        context=graph["context"],
        steps_per_s=graph["steps_per_s"],
    )
    return {
        "date": dt.date.today().isoformat(),
        "gpu": last.device_name,
        "driver": last.driver_version,
        "peak_gbps_nvml": last.peak_gbps,
        "peak_source": last.peak_source,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "params": params,
        "analytic_bytes_per_plain_step": bytes_per_step(target_spec, 0, 128 + new_tokens // 2).total,
        "analytic_draft_bytes_per_pass": bytes_per_step(draft_spec, 0, 128 + new_tokens // 2).total,
        "background_sampler_ticks": ticks,
        "background_sampler_last": last.to_json(),
        "sampler_cpu_cost": cpu_cost,
        "roofline_plain": {
            key: v for key, v in roof.to_json().items() if key not in ("step", "baseline_step")
        },
        "roofline_graph_plain": {
            key: v for key, v in roof_graph.to_json().items() if key not in ("step", "baseline_step")
        },
        "cases": results,
        "tolerance": TOLERANCE,
    }


def _within(case: dict[str, Any]) -> bool:
    ratio = case["ratio_gpm_over_analytic"]
    return ratio is not None and abs(ratio - 1.0) <= TOLERANCE


def test_gpm_matches_analytic_bytes() -> None:
    import pytest

    try:
        report = run_verification()
    except SkipVerification as exc:
        pytest.skip(str(exc))
    for name, case in report["cases"].items():
        assert _within(case), f"{name}: GPM {case['gpm_gbps']} GB/s vs analytic {case['analytic_gbps']} GB/s"


try:  # mark for pytest's `-m gpu` selection; harmless when pytest is absent
    import pytest as _pytest

    test_gpm_matches_analytic_bytes = _pytest.mark.gpu(test_gpm_matches_analytic_bytes)
except ImportError:  # pragma: no cover
    pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the JSON report here too")
    parser.add_argument("--tokens", type=int, default=256)
    args = parser.parse_args(argv)
    try:
        report = run_verification(new_tokens=args.tokens)
    except SkipVerification as exc:
        print(json.dumps({"skipped": str(exc)}))
        return 0
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    ok = all(_within(c) for c in report["cases"].values())
    print("verdict:", "within 10 %" if ok else "OUTSIDE 10 %", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
