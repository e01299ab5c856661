"""The roofline panel's inputs and numbers: model config, drafter and peak bandwidth, resolved once
(`BandwidthModel.load`), and a window's rates priced with them (`BandwidthModel.view`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

import httpx

from mtpwatch.config import DisplaySettings
from mtpwatch.core.metrics.rates import Rates
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.core.roofline.ceilings import compute_roofline
from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu
from mtpwatch.core.roofline.modelconfig import PRESET_DIR, ConfigError, ModelSpec, resolve_config
from mtpwatch.core.roofline.nvml import local_gpu_reading
from mtpwatch.session.views import BandwidthView

PLAIN_INPUTS = ("gpu", "peak_gbps", "error", "simulated", "clock_speed", "method", "sources")
"""`BandwidthModel` attributes a recording holds as they are (`to_json`; the model specs beside them)."""


class BandwidthModel:
    """The roofline panel's numbers: `core.roofline.compute_roofline` on a window's rates."""

    def __init__(self, display: DisplaySettings) -> None:
        self.display = display
        self.spec: ModelSpec | None = None
        self.drafter: ModelSpec | None = None
        self.gpu: str | None = None
        self.peak_gbps: float | None = display.peak_gbps
        self.error = ""
        self.simulated = False
        self.clock_speed = 1.0
        """The simulator's clock speed-up (/sim/info `speed`); 1 for a real vLLM."""
        self.method: str | None = None
        """The speculation method the simulator's /sim/info names (None for a real vLLM)."""
        self.sources = ""
        """Where the config, drafter and peak came from, in words (shown in the panel)."""
        self._loaded = False

    def to_json(self) -> dict[str, Any]:
        """What `load` resolved, as plain JSON (a recording's 'server' record: the replay prices
        steps the same way without asking anything again)."""
        specs = {"spec": self.spec, "drafter": self.drafter}
        plain = {key: getattr(self, key) for key in PLAIN_INPUTS}
        return {**{k: None if s is None else dataclasses.asdict(s) for k, s in specs.items()}, **plain}

    def restore(self, info: dict[str, Any]) -> None:
        """Take what `to_json` wrote instead of loading (a replay: no network)."""
        self.spec = spec_from_json(info.get("spec"))
        self.drafter = spec_from_json(info.get("drafter"))
        for key in PLAIN_INPUTS:  # one a recording predates keeps `__init__`'s (`clock_speed`: a real clock)
            setattr(self, key, info.get(key, getattr(self, key)))
        self._loaded = True

    async def load(
        self,
        base_url: str,
        *,
        refs: tuple[str, ...] = (),
        drafter_ref: str | None = None,
        local: bool = False,
    ) -> None:
        """Resolve the model spec and the peak once (a failure becomes a one-line note).

        Model config, in order: --model-config; each of `refs` (the /v1/models entry's `root`, then
        its id: a local directory with config.json, a bundled preset or the local HF cache, never the
        network); the simulator's /sim/info. Drafter: --drafter-config, `drafter_ref` (the speculative
        config in the server log), /sim/info. Peak: --peak-gbps, --gpu, /sim/info, else the local GPU
        through NVML when the server is on loopback.
        """
        if self._loaded:
            return
        self._loaded = True
        info = await _sim_info(base_url)
        self.simulated = bool(info)
        with contextlib.suppress(TypeError, ValueError):
            speed = float(info.get("speed") or 1.0)
            self.clock_speed = speed if speed > 0 else 1.0
        self.method = str(info["method"]) if info.get("method") else None
        sources: list[str] = []
        config = self.display.model_config
        found = (config, "--model-config") if config else _find_config(refs)
        path, where = found or (info.get("model_config"), "from the simulator")
        try:
            if path:
                self.spec = ModelSpec.from_config(str(path))
                sources.append(f"config {where}")
        except (ConfigError, ValueError, OSError) as exc:
            self.error = f"model config: {str(exc).splitlines()[0]}"
        for ref, where in (
            (self.display.drafter_config, "--drafter-config"),
            (drafter_ref, "server log"),
            (info.get("drafter") if info.get("spec") else None, "simulator"),
        ):
            if not ref:
                continue
            with contextlib.suppress(ConfigError, ValueError, OSError):
                self.drafter = ModelSpec.from_config(str(ref))  # resolved as `_find_config` does
                sources.append(f"drafter {where}")
                break
        if self.display.gpu is not None:
            with contextlib.suppress(UnknownGpuError):
                gpu = lookup_gpu(self.display.gpu)
                self.gpu = gpu.key
                self.peak_gbps = self.peak_gbps or gpu.peak_gbps
                sources.append("peak --gpu")
        elif info.get("gpu"):
            self.gpu = str(info["gpu"]) + " (simulated)"
            self.peak_gbps = self.peak_gbps or float(info.get("peak_gbps") or 0) or None
            sources.append("peak simulator")
        elif local and self.peak_gbps is None:
            name, peak = await asyncio.to_thread(_local_gpu)
            if peak is not None:
                self.gpu, self.peak_gbps = name, peak
                sources.append("peak local GPU (NVML)")
        if self.display.peak_gbps is not None:
            sources.append("peak --peak-gbps")
        self.sources = " · ".join(sources)

    @staticmethod
    def context(snap: MetricsSnapshot | None, request_tokens: int | None) -> tuple[int, str]:
        """KV context tokens for the roofline and where they came from, in words: the engine's KV-cache
        occupancy (`kv_cache_usage` × `num_gpu_blocks` × `block_size` of `cache_config_info`) when it
        is known and non-zero, else the last console prompt's prompt + generated tokens."""
        if snap is not None and snap.kv_cache_usage:
            with contextlib.suppress(KeyError, ValueError):
                size = int(snap.cache_config["num_gpu_blocks"]) * int(snap.cache_config["block_size"])
                if size > 0:
                    return round(snap.kv_cache_usage * size), "KV-cache occupancy, engine-wide"
        if request_tokens:
            return request_tokens, "last prompt: prompt + generated"
        return 0, "KV cache empty"

    def view(
        self,
        rates: Rates | None,
        k: int,
        snap: MetricsSnapshot | None,
        request_tokens: int | None,
        *,
        hardware: str = "",
    ) -> BandwidthView:
        """The panel for `rates` at `k` speculative tokens (pure: a note when an input is missing)."""
        if self.spec is None:
            note = self.error or (
                "no model config: pass --model-config PATH/config.json (and --gpu NAME for a remote server)"
            )
            return BandwidthView(note=note, hardware=hardware)
        if self.peak_gbps is None:
            return BandwidthView(
                note="unknown GPU: pass --gpu NAME or --peak-gbps X for % of peak", hardware=hardware
            )
        tau = rates.mean_acceptance_length if rates is not None and k else None
        if tau is not None:
            tau = min(max(tau, 1.0), k + 1.0)
        context, source = self.context(snap, request_tokens)
        steps, tok = _busy_rates(rates)
        try:
            roof = compute_roofline(
                self.spec,
                peak_gbps=self.peak_gbps,
                gpu=self.gpu or "GPU",
                k=k,
                drafter=self.drafter if k else None,
                context=context,
                mean_acceptance_length=tau,
                # idle (no steps): no "now" figures, so the summary says what the roof allows
                steps_per_s=steps,
                tok_s=tok,
            )
        except ValueError as exc:
            return BandwidthView(note=f"roofline: {exc}", hardware=hardware)
        return BandwidthView(
            gpu=self.gpu,
            peak_gbps=roof.peak_gbps,
            effective_gbps=roof.effective_gbps,
            percent_of_peak=roof.pct_of_peak,
            k=k,
            tau=roof.mean_acceptance_length if k else None,
            tau_source="measured" if tau is not None else roof.acceptance_source,
            ceiling_baseline_tok_s=roof.ceiling_tok_s_baseline,
            ceiling_spec_tok_s=roof.ceiling_tok_s_spec if k else None,
            tok_s=roof.tok_s,
            pct_of_ceiling=roof.pct_of_ceiling,
            acceptance_term=roof.acceptance_term if k else None,
            bandwidth_term=roof.bandwidth_term if k else None,
            compute_term=roof.compute_term if k else None,
            binding=roof.binding if k else "",
            summary=roof.summary,
            regime=roof.regime,
            context_tokens=context,
            context_source=source,
            hardware=hardware,
            config_source=self.sources,
            clock_speed=self.clock_speed,
        )


def _busy_rates(rates: Rates | None) -> tuple[float | None, float | None]:
    """Verify steps/s and tok/s *while decoding*, so idle seconds in a window do not read as slack.

    vLLM's inter-token latency is the time between a request's successive engine steps: its mean
    is the step time, and Δgeneration_tokens / ΔITL-sum is the decode rate of a stream. Without
    ITL observations, fall back to plain window rates (diluted by idle time).
    """
    if rates is None:
        return None, None
    if rates.mean_step_s and rates.tokens_per_step:
        return 1.0 / rates.mean_step_s, rates.tokens_per_step / rates.mean_step_s
    return rates.steps_per_s or None, rates.server_tok_s or None


def _find_config(refs: tuple[str, ...]) -> tuple[str, str] | None:
    """The first of `refs` that resolves to a config.json without the network, and where it was found."""
    for ref in refs:
        try:
            path = resolve_config(ref)
        except (ConfigError, ValueError, OSError):
            continue
        if path.parent == PRESET_DIR:
            where = f"bundled for {ref}"
        elif "models--" in str(path):
            where = f"HF cache ({ref})"
        else:
            where = f"served model path {path.parent}"
        return str(path), where
    return None


def _local_gpu() -> tuple[str | None, float | None]:
    """NVML's name and peak GB/s of the local GPU (table first, then NVML's clock × bus width)."""
    try:
        reading = local_gpu_reading()
    except Exception:  # no NVML, no driver: the panel asks for --gpu instead
        return None, None
    name = reading.device_name
    if name:
        with contextlib.suppress(UnknownGpuError):
            gpu = lookup_gpu(name)
            return gpu.key, gpu.peak_gbps
    return name, reading.peak_gbps


async def _sim_info(base_url: str) -> dict[str, Any]:
    """The simulator's /sim/info, or {} for a real vLLM (404) or any failure."""
    with contextlib.suppress(httpx.HTTPError, ValueError):
        async with httpx.AsyncClient(timeout=2.0) as http:
            response = await http.get(base_url.rstrip("/") + "/sim/info")
            if response.status_code == 200:
                data = response.json()
                return data if isinstance(data, dict) else {}
    return {}


def spec_from_json(obj: dict[str, Any] | None) -> ModelSpec | None:
    """A model spec `BandwidthModel.to_json` wrote (JSON lists back to tuples)."""
    if obj is None:
        return None
    fields = {f.name for f in dataclasses.fields(ModelSpec)}
    clean: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in obj.items() if k in fields}
    return ModelSpec(**clean)
