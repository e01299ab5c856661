"""What a simulated server writes to its log and checks as it starts: vLLM's start-up lines, the memory
check against the simulated GPU (`SimStartupError` when it fails), and the periodic `Engine 000:` /
`SpecDecoding metrics:` lines.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from mtpwatch.sim.engine import Engine
from mtpwatch.sim.faults import Faults
from mtpwatch.sim.metrics import SimMetrics
from mtpwatch.sim.options import SimOptions, claimed_version
from mtpwatch.sim.physics import Physics
from mtpwatch.sim.presets import Preset

_TAGS: dict[str, tuple[str, str]] = {
    "banner": ("api_server.py:1880", "startup.py:38"),
    "args": ("utils.py:253", "startup.py:96"),
    "arch": ("model.py:637", "model.py:761"),
    "len": ("model.py:1880", "model.py:2214"),
    "engine": ("core.py:133", "core.py:153"),
    "mtp_k": ("speculative.py:1381", "config.py:94"),
    "weights": ("default_loader.py:291", "default_loader.py:543"),
    "centroids": ("gemma4_mtp.py:536", "gemma4_mtp.py:510"),
    "loaded": ("gpu_model_runner.py:4246", "model_runner.py:441"),
    "kv": ("gpu_worker.py:436", "gpu_worker.py:795"),
    "kv_size": ("kv_cache_utils.py:1308", "kv_cache_utils.py:1168"),
    "graphs": ("gpu_model_runner.py:5104", "model_runner.py:1216"),
    "init": ("core.py:276", "core.py:458"),
}
"""The `[file:line]` tag of each start-up line shared by the two flavours: (vLLM 0.32's CPU build, as in
tests/data's real log; the 0.34.0 wheel on a GPU, docs/vllm-startup-lines.md)."""


class SimStartupError(RuntimeError):
    """The simulated engine refused to start (vLLM's message; the CLI exits with status 1)."""


@dataclass
class SimLog:
    """vLLM-style log lines: ``INFO 11-29 21:06:39 [file.py:NN] message``."""

    stream: TextIO | None

    def __call__(self, where: str, message: str, level: str = "INFO") -> None:
        self.raw(f"{level} {time.strftime('%m-%d %H:%M:%S')} [{where}] {message}")

    def raw(self, line: str) -> None:
        if self.stream is not None:
            self.stream.write(line + "\n")
            self.stream.flush()


class ServerParts:
    """What `SimServer` holds, as its mixins (`StartupLog`, `routes.InfoRoutes`,
    `completions.CompletionRoutes`) read it; set in `SimServer.__init__`."""

    options: SimOptions
    preset: Preset
    physics: Physics
    engine: Engine
    metrics: SimMetrics
    faults: Faults
    log: SimLog
    port: int
    url: str
    """Base URL (http://host:port), set when the socket is bound."""
    model_name: str
    fingerprint: str
    created: int
    _worker: Any


class StartupLog(ServerParts):
    """The start-up log, the GPU memory check and the stats lines (a mixin of `SimServer`)."""

    def _claim_gpu(self) -> None:
        """vLLM's start-up memory check against the simulated GPU; raises `SimStartupError`."""
        from mtpwatch.core.launch.memplan import OVERHEAD_FIXED, OVERHEAD_GRAPHS
        from mtpwatch.sim.gpu import SimGpu, spawn_worker

        opts, p = self.options, self.preset
        gpu = SimGpu.for_gpu(p.gpu, Path(opts.gpu_ledger_dir) if opts.gpu_ledger_dir else None)
        self._worker = spawn_worker()
        weights = self._weights_bytes()
        overhead = OVERHEAD_FIXED + (0.0 if opts.enforce_eager else OVERHEAD_GRAPHS)  # the planner's
        share = gpu.total_bytes * opts.gpu_memory_utilization
        kv_bytes = opts.kv_cache_memory_bytes
        holds = share if kv_bytes is None else weights + overhead + kv_bytes
        error = gpu.claim(
            utilization=opts.gpu_memory_utilization, holds=holds, pid=self._worker.pid, label=self.url
        )
        kv_need = self.physics.kv_bytes(p.max_model_len)
        kv_have = (share - weights - overhead) if kv_bytes is None else float(kv_bytes)
        if error is None and kv_have < kv_need:
            error = (
                f"To serve at least one request with the models's max seq len ({p.max_model_len}), "
                f"({kv_need / 2**30:.2f} GiB KV cache is needed, which is larger than the available KV cache "
                f"memory ({max(0.0, kv_have) / 2**30:.2f} GiB). Try increasing `gpu_memory_utilization` or "
                "decreasing `max_model_len` when initializing the engine."
            )
        if error is None:
            self.log(
                "gpu_worker.py:267",
                f"Memory: {round(holds / 2**30, 2)} GiB of {gpu.name} taken by this server",
            )
            return
        self._worker.terminate()
        self.log("core.py:1091", "EngineCore failed to start.", level="ERROR")
        self.log.raw("Traceback (most recent call last):")
        self.log.raw('  File "vllm/v1/worker/utils.py", line 457, in request_memory')
        self.log.raw(f"ValueError: {error}")
        self.log.raw(
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore_DP0': 1}"
        )
        raise SimStartupError(error)

    async def _startup_log(self, delay_s: float) -> None:
        """The start-up log of the `SimOptions.vllm_log` flavour, spread over `delay_s` seconds. vLLM
        0.32's CPU build (Model Runner V1, tests/data's real log) prints its drafter and MTP lines; 0.34
        on a GPU (Model Runner V2, the 0.34.0 wheel's tags) one `Loading model from scratch...`, the
        drafter loaded inside it without a line of its own, no `Detected MTP model`."""
        p, opts, log = self.preset, self.options, self.log
        gpu = opts.vllm_log == "0.34-gpu"
        tag = {line: tags[gpu] for line, tags in _TAGS.items()}
        weights_s, drafter_s, kv_s, graphs_s = (delay_s * f for f in (0.6, 0.1, 0.15, 0.15))
        version = claimed_version(opts)
        if gpu:
            log(tag["banner"], f"vLLM server version {version}, serving model {p.model}")
        else:
            log(tag["banner"], f"vLLM API server version {version}")
        self._log_engine_config(tag)
        if gpu:
            log("model_runner.py:412", "Loading model from scratch...")
            log(
                "weight_utils.py:1154",
                f"Filesystem type for checkpoints: EXT4. Checkpoint size: {p.weights_gib:.2f} GiB. "
                "Available RAM: 119.70 GiB.",
            )
        else:
            log("gpu_model_runner.py:4162", f"Starting to load model {p.model}...")
        await asyncio.sleep(weights_s)
        log(tag["weights"], f"Loading weights took {weights_s:.2f} seconds")
        if opts.spec:
            if not gpu:
                log("gpu_model_runner.py:4187", "Loading drafter model...")
            await asyncio.sleep(drafter_s)
            if not gpu:
                log(
                    "llm_base_proposer.py:1469",
                    "Detected MTP model. Sharing target model embedding weights with the draft model.",
                )
            if p.centroids:
                log(
                    tag["centroids"],
                    "Gemma4 MTP: centroids masking enabled "
                    "(num_centroids=2048, top_k=32, active_tokens=4096/262144).",
                )
        gib = self._weights_bytes() / 2**30
        # 0.34's format_gib (vllm/utils/mem_utils.py:31): round(x, 2)
        log(
            tag["loaded"],
            f"Model loading took {round(gib, 2) if gpu else f'{gib:.4f}'} GiB memory and "
            f"{weights_s + drafter_s:.6f} seconds",
        )
        await asyncio.sleep(kv_s)
        kv_gib = p.kv_cache_tokens * max(p.kv_bytes_per_token, 1.0) / 2**30
        log(tag["kv"], f"Available KV cache memory: {kv_gib:.2f} GiB")
        log(
            tag["kv_size"],
            f"GPU KV cache size: {p.kv_cache_tokens:,} tokens, Maximum concurrency "
            f"for {p.max_model_len:,} tokens per request: {p.kv_cache_tokens / p.max_model_len:.2f}x",
        )
        if gpu:
            log.raw(
                "Capturing CUDA graphs (PIECEWISE): 100%|██████████| 51/51 "
                f"[00:0{min(9, int(graphs_s))}<00:00]"
            )
        await asyncio.sleep(graphs_s)
        log(tag["graphs"], f"Graph capturing finished in {graphs_s:.0f} secs, took 0.52 GiB")
        log(
            tag["init"],
            "init engine (profile, create kv cache, warmup model) took "
            f"{kv_s + graphs_s:.2f} {'s' if gpu else 'seconds'}",
        )

    def _weights_bytes(self) -> float:
        """The weights this server loads: the target's and, speculating, the drafter's."""
        return self.preset.weights_gib * 2**30 + (self.preset.drafter_bytes if self.options.spec else 0.0)

    def _log_engine_config(self, tag: dict[str, str]) -> None:
        """The lines up to the engine's config: non-default args, architecture, model length,
        `Initializing a V1 LLM engine` and the MTP warning of k > 1 (0.32 CPU's for any method)
        (the same text in 0.32, 0.33 and 0.34); then the GPU memory check."""
        p, opts, k = self.preset, self.options, self.physics.k
        args: dict[str, Any] = {"model_tag": p.model, "host": opts.host, "port": self.port, "model": p.model}
        if opts.served_model_name:
            args["served_model_name"] = [opts.served_model_name]
        if opts.spec:
            spec_json: dict[str, Any] = {"method": p.method, "model": p.drafter, "num_speculative_tokens": k}
            if opts.k_schedule:
                spec_json["num_speculative_tokens_per_batch_size"] = [list(r) for r in opts.k_schedule]
            args["speculative_config"] = spec_json
        self.log(tag["args"], f"non-default args: {args}")
        self.log(tag["arch"], "Resolved architecture: Gemma4ForConditionalGeneration")
        self.log(tag["len"], f"Using max model len {p.max_model_len}")
        # SpeculativeConfig.__repr__ (vllm/config/speculative.py) is the same in 0.32, 0.33 and 0.34
        spec_repr = (
            f"SpeculativeConfig(method='{p.method}', model='{p.drafter}', num_spec_tokens={k})"
            if opts.spec
            else "None"
        )
        quant = p.quantization if p.quantization != "bf16" else None
        self.log(
            tag["engine"],
            f"Initializing a V1 LLM engine (v{claimed_version(opts)}) with config: model='{p.model}', "
            f"speculative_config={spec_repr}, tokenizer='{p.model}', dtype=torch.bfloat16, "
            f"max_seq_len={p.max_model_len}, quantization={quant}",
        )
        if opts.spec and k > 1 and (opts.vllm_log == "0.32-cpu" or p.method == "mtp"):
            self.log(
                tag["mtp_k"],
                "Enabling num_speculative_tokens > 1 will run multiple times of "
                "forward on same MTP layer,which may result in lower acceptance rate",
                level="WARNING",
            )
        if opts.gpu_memory and self._worker is None:
            self._claim_gpu()

    def _log_serving(self, *, restarted: bool = False) -> None:
        """The lines that say the server is up: vLLM 0.32's launcher and uvicorn, 0.34's
        `Starting vLLM server on` (vllm/entrypoints/launchers/api_server/entry.py:139) and uvicorn, or
        the Rust frontend's ready line (rust/src/server/src/lib.rs:352: no uvicorn)."""
        opts = self.options
        if opts.frontend == "rust":
            # tracing writes the fields after the message, strings Debug-quoted
            self._rust_log(
                "server/src/lib.rs:352",
                f'OpenAI server is ready to accept requests bind_address="{opts.host}:{self.port}" '
                f'scheme="http" model="{self.model_name}"',
            )
            return
        if opts.vllm_log == "0.34-gpu":
            self.log("entry.py:139", f"Starting vLLM server on {self.url}")
        else:
            self.log("launcher.py:48", f"Starting vLLM API server 0 on {self.url}")
        if not restarted:
            self.log.raw(f"INFO:     Started server process [{os.getpid()}]")
            self.log.raw("INFO:     Waiting for application startup.")
        self.log.raw("INFO:     Application startup complete.")

    async def _stats_loop(self) -> None:
        had_activity = False
        while True:
            await asyncio.sleep(self.options.log_interval_s)
            stats = self.engine.take_interval()
            elapsed = max(1e-9, time.monotonic() - stats.start)
            running, waiting = len(self.engine.running), len(self.engine.waiting)
            active = bool(stats.prompt_tokens or stats.generation_tokens or running or waiting)
            if not (active or had_activity):
                continue
            had_activity = active
            rust = self.options.frontend == "rust"
            emit = self._rust_log if rust else self.log
            prompt, generation = stats.prompt_tokens / elapsed, stats.generation_tokens / elapsed
            kv = self.engine.kv_usage * 100
            if rust:
                # rust/src/llm/src/log_stats.rs:262-300 (vLLM 0.34.0 sdist)
                emit(
                    "log_stats.rs:300",
                    f"Avg prompt tput: {prompt:.1f} toks/s, Avg generation tput: {generation:.1f} toks/s, "
                    f"Reqs Running: {running}, Waiting: {waiting}, GPU KV cache used: {kv:.1f}%, "
                    "Prefix cache hit rate: 0.0%",
                )
            else:
                emit(
                    "loggers.py:335",
                    f"Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, "
                    f"Avg generation throughput: {generation:.1f} tokens/s, "
                    f"Running: {running} reqs, Waiting: {waiting} reqs, "
                    f"GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%",
                )
            if stats.drafts:
                mean_len = 1 + stats.accepted / stats.drafts
                per_pos = ", ".join(f"{n / stats.drafts:.3f}" for n in stats.per_pos)
                rate = stats.accepted / stats.draft_tokens * 100  # drafts > 0: k >= 1 drafted
                # the same text from vllm/v1/spec_decode/metrics.py:120 and log_stats.rs:302-329
                emit(
                    "log_stats.rs:329" if rust else "metrics.py:120",
                    f"SpecDecoding metrics: Mean acceptance length: {mean_len:.2f}, "
                    f"Accepted throughput: {stats.accepted / elapsed:.2f} tokens/s, "
                    f"Drafted throughput: {stats.draft_tokens / elapsed:.2f} tokens/s, "
                    f"Accepted: {stats.accepted} tokens, Drafted: {stats.draft_tokens} tokens, "
                    f"Per-position acceptance rate: {per_pos}, Avg Draft acceptance rate: {rate:.1f}%",
                )

    def _rust_log(self, where: str, message: str) -> None:
        """A line of the Rust frontend's log (`rust/src/tracing/src/lib.rs`: its process label, level,
        time and shortened file:line)."""
        stamp = time.strftime("%m-%d %H:%M:%S")
        self.log.raw(f"(RustFrontend pid={os.getpid()}) INFO {stamp} [{where}] {message}")
