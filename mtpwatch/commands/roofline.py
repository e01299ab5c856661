"""`mtpwatch roofline`: the analytic bandwidth ceiling of a model (and drafter) on a GPU, no server needed."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click

from mtpwatch.commands.options import gpu_option
from mtpwatch.core.roofline.ceilings import Roofline, compute_roofline
from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu
from mtpwatch.core.roofline.modelconfig import ConfigError, ModelSpec
from mtpwatch.core.roofline.nvml import local_gpu_reading
from mtpwatch.render.roofline_table import render_roofline


def _fail(message: str) -> NoReturn:
    click.echo(f"mtpwatch roofline: error: {message}", err=True)
    sys.exit(1)


POSITIVE = click.FloatRange(0.0, min_open=True)
"""Rates, sizes, bandwidths: a negative or zero one is a typo (`--tok-s -5` was '-114 % of the ceiling')."""


@click.command(name="roofline")
@click.option(
    "--config",
    required=True,
    metavar="CONFIG.json|NAME",
    help="Target config.json, a model directory, a bundled preset (e.g. gemma-4-31B-it) or a HF id "
    "already in the local cache.",
)
@gpu_option(
    "GPU for the peak-bandwidth table (e.g. GB10, 'H100 SXM', H200). Default: the local GPU through NVML."
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
    help="Speculative tokens per step.",
)
@click.option("--acceptance", type=click.FloatRange(0.0, 1.0), help="Draft acceptance rate α (τ = 1 + α·k).")
@click.option("--acceptance-length", type=float, help="Mean acceptance length τ instead of --acceptance.")
@click.option("--context", type=click.IntRange(0), default=4096, help="Tokens in the KV cache.")
@click.option("--batch", type=click.IntRange(1), default=1, help="Requests decoded together.")
@click.option(
    "--dtype",
    metavar="DTYPE",
    help="Weight dtype of linear layers: bf16, fp16, fp8, nvfp4, "
    "mxfp4, int4, int8 (default: from the config).",
)
@click.option("--kv-dtype", metavar="DTYPE", help="KV-cache dtype (default: the config's dtype).")
@click.option("--drafter-dtype", metavar="DTYPE", help="Drafter weight dtype (default: from its config).")
@click.option("--weights-gb", type=POSITIVE, help="Override: GB of target weights read per pass.")
@click.option(
    "--active-params", type=POSITIVE, help="Override: target parameters read per pass (e.g. 3.8e9)."
)
@click.option(
    "--draft-passes", type=click.IntRange(1), help="Drafter passes per step (default k; 1 for DFlash)."
)
@click.option("--peak-gbps", type=POSITIVE, help="Override the peak memory bandwidth, GB/s.")
@click.option(
    "--peak-tflops", type=POSITIVE, help="Dense TFLOP/s for the compute term (default: table, if known)."
)
@click.option("--tok-s", type=POSITIVE, help="A measured tok/s to place against the ceiling.")
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
    display, peak_gbps, tflops, peak_source = _peak(gpu, peak_gbps, peak_tflops)
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
    if as_json:
        click.echo(_json(roof, target, drafter, display, peak_gbps, peak_source))
    else:
        click.echo(render_roofline(roof, target, drafter, peak_source))


def _peak(
    gpu: str | None, peak_gbps: float | None, peak_tflops: float | None
) -> tuple[str, float, float | None, str]:
    """(GPU shown, peak GB/s, peak TFLOPS, where the peak comes from): --peak-gbps wins over the
    table, the table (--gpu, else this host's GPU) fills what is not given."""
    if gpu is None and peak_gbps is None:
        gpu = local_gpu_reading().device_name  # NVML's name, when pynvml and a GPU are there
        if gpu is None:
            _fail("no local GPU found: give --gpu NAME (e.g. GB10, 'H100 SXM') or --peak-gbps")
    try:
        spec = lookup_gpu(gpu) if gpu is not None else None
    except UnknownGpuError as exc:
        if peak_gbps is None:
            _fail(str(exc))
        spec = None
    if spec is None:
        assert peak_gbps is not None  # no GPU named (or none the table knows): --peak-gbps was given
        return gpu or "custom GPU", peak_gbps, peak_tflops, "given (--peak-gbps)"
    tflops = peak_tflops if peak_tflops is not None else spec.peak_bf16_tflops
    if peak_gbps is None:
        return spec.key, spec.peak_gbps, tflops, f"table: {spec.source}"
    return spec.key, peak_gbps, tflops, "given (--peak-gbps)"


def _json(
    roof: Roofline,
    target: ModelSpec,
    drafter: ModelSpec | None,
    display: str,
    peak_gbps: float,
    peak_source: str,
) -> str:
    """The `--json` document: the roofline, where the peak comes from, and the inputs read."""
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
    return json.dumps(with_meta(out, gpu=gpu_info), indent=2, ensure_ascii=False)
