"""`mtpwatch roofline`: the analytic bandwidth ceiling of a model (and drafter) on a GPU, no server needed."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from mtpwatch.core.roofline.bytemodel import kv_cache_bytes
from mtpwatch.core.roofline.ceilings import Roofline, compute_roofline
from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu
from mtpwatch.core.roofline.modelconfig import GB, ConfigError, ModelSpec
from mtpwatch.core.roofline.nvml import local_gpu_reading


def _fail(message: str) -> None:
    click.echo(f"mtpwatch roofline: error: {message}", err=True)
    sys.exit(1)


def _gb(x: float) -> str:
    return f"{x / GB:.3f} GB" if x < 10 * GB else f"{x / GB:.2f} GB"


def _local_gpu_name() -> str | None:
    """The local GPU's NVML name, when pynvml and a GPU are there."""
    reading = local_gpu_reading()
    return reading.device_name


def _render(r: Roofline, target: ModelSpec, drafter: ModelSpec | None, peak_source: str) -> str:
    s, b = r.step, r.baseline_step
    d = drafter
    dtypes = f"weights {target.weight_dtype}, embed/head {target.embed_dtype}, KV {target.kv_dtype}"
    lines = [
        "mtpwatch roofline: every figure is analytic (config shapes × dtypes ÷ peak bandwidth; no server, "
        "no hardware counter)",
        f"  model    {target.name} ({dtypes}; {target.source})",
    ]
    if d is not None:
        lines.append(f"  drafter  {d.name} (weights {d.weight_dtype}; {r.step.draft_passes} passes per step)")
    lines.append(f"  GPU      {r.gpu}, peak {r.peak_gbps:.0f} GB/s ({peak_source})")
    lines.append(
        f"  step     k={r.k}, context {r.context} tokens, batch {r.batch}, "
        f"τ {r.mean_acceptance_length:.2f} ({r.acceptance_source})"
    )
    lines.append("")
    rows: list[tuple[str, str, str]] = []
    union = f", {s.experts_per_layer:.1f} experts/layer" if s.experts_per_layer is not None else ""
    rows.append(("target bytes / verify pass", _gb(s.target), f"{s.tokens_per_pass} tokens{union}"))
    if r.k:
        per = s.drafter / s.draft_passes if s.draft_passes else 0.0
        rows.append(("drafter bytes / step", _gb(s.drafter), f"{s.draft_passes} × {_gb(per)}"))
    rows.append(
        ("KV bytes read / step", _gb(s.kv), f"target {_gb(s.kv_target)}, drafter {_gb(s.kv_drafter)}")
    )
    rows.append(
        ("KV cache resident", _gb(kv_cache_bytes(target, r.context, r.batch)), "KV-shared layers own none")
    )
    rows.append(("total bytes / step", _gb(s.total), f"plain step {_gb(b.total)}"))
    rows.append(
        (
            "ceiling, plain decoding",
            f"{r.ceiling_tok_s_baseline:.1f} tok/s",
            f"{r.batch} × {r.peak_gbps:.0f} GB/s ÷ {_gb(b.total)}",
        )
    )
    if r.k:
        rows.append(
            (
                "ceiling, speculative",
                f"{r.ceiling_tok_s_spec:.1f} tok/s",
                f"τ {r.mean_acceptance_length:.2f} × {r.ceiling_steps_per_s:.1f} steps/s",
            )
        )
        rows.append(("break-even τ", f"{r.break_even_acceptance_length:.3f}", "bytes_k ÷ bytes_0"))
        comp = f"{r.compute_term:.1f}×" if r.compute_term is not None else "n/a (no FLOP rate)"
        rows.append(
            (
                "speed-up terms",
                f"{r.speedup_bound:.2f}×",
                f"acceptance {r.acceptance_term:.2f}×, bandwidth {r.bandwidth_term:.2f}×, compute {comp}",
            )
        )
        rows.append(
            (
                "naive rule (drafter free)",
                f"{r.speedup_bound_naive:.2f}×",
                "min(1 + α·k, …) as usually quoted",
            )
        )
    if r.tok_s is not None:
        rows.append(("given tok/s", f"{r.tok_s:.1f}", f"{r.pct_of_ceiling:.0f} % of the ceiling"))
    if r.effective_gbps is not None:
        rows.append(
            (
                "effective bandwidth",
                f"{r.effective_gbps:.0f} GB/s",
                f"{r.pct_of_peak:.0f} % of peak ({r.steps_per_s:.2f} steps/s × {_gb(s.total)})",
            )
        )
    w1 = max(len(a) for a, _, _ in rows)
    w2 = max(len(v) for _, v, _ in rows)
    lines += [f"  {a:<{w1}}  {v:>{w2}}  analytic: {c}" for a, v, c in rows]
    lines += ["", f"  {r.summary}"]
    for note in (*target.notes, *(d.notes if d else ())):
        lines.append(f"  note: {note}")
    return "\n".join(lines)


@click.command(name="roofline")
@click.option(
    "--config",
    "config",
    required=True,
    metavar="CONFIG.json|NAME",
    help="Target config.json, a model directory, a bundled preset (e.g. gemma-4-31B-it) or a HF id "
    "already in the local cache.",
)
@click.option(
    "--gpu",
    metavar="NAME",
    help="GPU for the peak-bandwidth table (e.g. GB10, 'H100 SXM', H200). "
    "Default: the local GPU through NVML.",
)
@click.option(
    "--drafter-config", metavar="CONFIG.json|NAME", help="Draft model config (e.g. gemma-4-31B-it-assistant)."
)
@click.option(
    "-k",
    "--num-speculative-tokens",
    "k",
    type=click.IntRange(0, 64),
    default=0,
    show_default=True,
    help="Speculative tokens per step.",
)
@click.option("--acceptance", type=click.FloatRange(0.0, 1.0), help="Draft acceptance rate α (τ = 1 + α·k).")
@click.option("--acceptance-length", type=float, help="Mean acceptance length τ instead of --acceptance.")
@click.option(
    "--context", type=click.IntRange(0), default=4096, show_default=True, help="Tokens in the KV cache."
)
@click.option(
    "--batch", type=click.IntRange(1), default=1, show_default=True, help="Requests decoded together."
)
@click.option(
    "--dtype",
    "dtype",
    metavar="DTYPE",
    help="Weight dtype of linear layers: bf16, fp16, fp8, nvfp4, "
    "mxfp4, int4, int8 (default: from the config).",
)
@click.option("--kv-dtype", metavar="DTYPE", help="KV-cache dtype (default: the config's dtype).")
@click.option("--drafter-dtype", metavar="DTYPE", help="Drafter weight dtype (default: from its config).")
@click.option("--weights-gb", type=float, help="Override: GB of target weights read per pass.")
@click.option("--active-params", type=float, help="Override: target parameters read per pass (e.g. 3.8e9).")
@click.option(
    "--draft-passes", type=click.IntRange(1), help="Drafter passes per step (default k; 1 for DFlash)."
)
@click.option("--peak-gbps", type=float, help="Override the peak memory bandwidth, GB/s.")
@click.option(
    "--peak-tflops", type=float, help="Dense TFLOP/s for the compute term (default: table, if known)."
)
@click.option("--tok-s", type=float, help="A measured tok/s to place against the ceiling.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of the table.")
def command(
    config: str,
    gpu: str | None,
    drafter_config: str | None,
    k: int,
    acceptance: float | None,
    acceptance_length: float | None,
    context: int,
    batch: int,
    dtype: str | None,
    kv_dtype: str | None,
    drafter_dtype: str | None,
    weights_gb: float | None,
    active_params: float | None,
    draft_passes: int | None,
    peak_gbps: float | None,
    peak_tflops: float | None,
    tok_s: float | None,
    as_json: bool,
) -> None:
    """Bandwidth ceiling for a model config on a GPU, without a server."""
    if acceptance is not None and acceptance_length is not None:
        _fail("give --acceptance or --acceptance-length, not both")
    if peak_gbps is not None and peak_gbps <= 0:
        _fail("--peak-gbps must be > 0")
    try:
        target = ModelSpec.from_config(
            config, weight_dtype=dtype, kv_dtype=kv_dtype, weights_gb=weights_gb, active_params=active_params
        )
        drafter = (
            ModelSpec.from_config(drafter_config, weight_dtype=drafter_dtype, kv_dtype=kv_dtype)
            if drafter_config
            else None
        )
    except ConfigError as exc:
        _fail(str(exc))
        return
    gpu_name = gpu
    peak_source = "given (--peak-gbps)"
    tflops = peak_tflops
    if gpu_name is None and peak_gbps is None:
        gpu_name = _local_gpu_name()
        if gpu_name is None:
            _fail("no local GPU found: give --gpu NAME (e.g. GB10, 'H100 SXM') or --peak-gbps")
            return
    display = gpu_name or "custom GPU"
    if gpu_name is not None:
        try:
            spec = lookup_gpu(gpu_name)
        except UnknownGpuError as exc:
            if peak_gbps is None:
                _fail(str(exc))
                return
        else:
            display = spec.key
            tflops = tflops if tflops is not None else spec.peak_bf16_tflops
            if peak_gbps is None:
                peak_gbps = spec.peak_gbps
                peak_source = f"table: {spec.source}"
    assert peak_gbps is not None
    try:
        roof = compute_roofline(
            target,
            peak_gbps=peak_gbps,
            gpu=display,
            k=k,
            drafter=drafter,
            context=context,
            batch=batch,
            mean_acceptance_length=acceptance_length,
            acceptance_rate=acceptance,
            tok_s=tok_s,
            peak_tflops=tflops,
            draft_passes=draft_passes,
        )
    except ValueError as exc:
        _fail(str(exc))
        return
    if as_json:
        out: dict[str, Any] = roof.to_json()
        out["peak_source"] = peak_source
        out["inputs"] = {
            "config": target.source,
            "drafter_config": drafter.source if drafter else None,
            "weight_dtype": target.weight_dtype,
            "embed_dtype": target.embed_dtype,
            "kv_dtype": target.kv_dtype,
            "drafter_weight_dtype": drafter.weight_dtype if drafter else None,
            "checkpoint_bytes": target.checkpoint_bytes,
        }
        from mtpwatch.core.provenance import GpuInfo, with_meta

        gpu_info = GpuInfo(display, peak_gbps, peak_source)
        click.echo(json.dumps(with_meta(out, gpu=gpu_info), indent=2, ensure_ascii=False))
    else:
        click.echo(_render(roof, target, drafter, peak_source))
