"""The simulator's HTTP server (aiohttp): vLLM 0.32's OpenAI endpoints, /metrics, logs and faults.

`SimServer` owns the listening socket, the `Engine`, the `SimMetrics` registry and the vLLM-like log
lines. `running_sim(**options)` runs one in the current event loop for async tests; `SimThread`
runs one in a background thread for sync tests. Every response carries ``server: mtpwatch-sim``
and ``x-mtpwatch-sim: 1`` so tools can tell a simulator from a real vLLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import os
import random
import socket
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, TextIO
from urllib.parse import parse_qs

from aiohttp import web

from mtpwatch.sim import METRICS_FILTER_MODES
from mtpwatch.sim.corpus import TextSource, Token, prompt_token_ids, stable_hash
from mtpwatch.sim.engine import Engine, Output, SimRequest
from mtpwatch.sim.metrics import SimMetrics
from mtpwatch.sim.physics import Physics
from mtpwatch.sim.presets import DEFAULT_PRESET, Preset, get_preset

_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
VLLM_VERSION = "0.32.0"
SIM_HEADERS = {"server": "mtpwatch-sim", "x-mtpwatch-sim": "1"}
LOAD_PROMPTS = (
    "Summarise the history of the printing press in a few paragraphs.",
    "Write a Python function that merges two sorted lists, with comments.",
    "Explain how a transformer decodes one token at a time.",
)
"""Prompts of the background traffic (`SimOptions.load`), used in turn."""
CHAT_TEMPLATE_TOKENS = 4
"""Tokens the chat template adds per message (turn markers), as Gemma's template roughly does."""


@dataclass
class Faults:
    """Fault switches; set from CLI flags or POST /sim/fault."""

    cut_stream_after: int | None = None
    """Drop the connection of each stream after this many tokens."""
    metrics_status: int | None = None
    """Answer /metrics with this HTTP status (e.g. 500)."""
    metrics_delay_s: float = 0.0
    """Delay every /metrics answer (seconds)."""
    metrics_truncate: bool = False
    """Send half of the /metrics page (cut mid-line), then drop the connection."""
    metrics_no_spec: bool = False
    """Leave the `vllm:spec_decode_*` families out of /metrics (as a server without speculation)."""
    metrics_filter: str = "honour"
    """How `/metrics/?name[]=…` answers (`METRICS_FILTER_MODES`): 'honour' (vLLM 0.32: prometheus_client's
    restricted registry), 'ignore' (the whole page), 'empty' (an empty 200, as vLLM with several API
    servers), '404' (no such route) or 'redirect' (307 to /metrics, which ignores the query)."""
    cut_mid_chunk: bool = False
    """With `cut_stream_after`: drop the connection in the middle of an SSE event, not between two."""
    hang: bool = False
    """Accept connections and never answer any request (a wedged server)."""


@dataclass
class SimOptions:
    """Everything that configures one simulated server."""

    preset: str = DEFAULT_PRESET
    host: str = "127.0.0.1"
    port: int = 0
    """0 picks a free port."""
    spec: bool = True
    """False: the baseline twin (same physics, no drafter, no spec counters)."""
    k: int | None = None
    """num_speculative_tokens; None = the preset's."""
    acceptance_scale: float = 1.0
    served_model_name: str | None = None
    seed: int = 0
    speed: float = 1.0
    """Run physics this many times faster than real time (tests use 10–50)."""
    startup_delay_s: float = 0.0
    """Simulated model-load time before the server answers."""
    log_interval_s: float = 10.0
    """Period of the `Engine 000:` / `SpecDecoding metrics:` lines (vLLM: VLLM_LOG_STATS_INTERVAL)."""
    api_key: str | None = None
    max_num_seqs: int | None = None
    mfu_metrics: bool = False
    """Increment vllm:estimated_read_bytes_per_gpu_total (vLLM's --enable-mfu-metrics)."""
    per_request_spec_metrics: bool = False
    """Send `metrics.speculative_decoding` on the final usage chunk (vLLM's
    `--per-request-spec-decode-metrics summary`, vLLM ≥ 0.27)."""
    exit_mode: Literal["process", "server"] = "server"
    """What the exit fault does: end the process (CLI) or just close the server (tests)."""
    exit_after_s: float | None = None
    """Exit fault on a timer."""
    restart_after_s: float | None = None
    """Restart fault on a timer (counters reset, new `_created`)."""
    load: int = 0
    """Background traffic: keep this many requests in flight inside the server (no client needed), so
    an attached monitor sees a busy server. They count in every counter like client requests."""
    load_max_tokens: int = 200
    """max_tokens of each background request."""
    faults: Faults = field(default_factory=Faults)
    model: str | None = None
    """The model as `vllm serve MODEL` names it (default: the preset's HF id)."""
    method: str | None = None
    """Speculative method from `--speculative-config` (default: the preset's)."""
    drafter: str | None = None
    """Drafter model from `--speculative-config` (default: the preset's)."""
    k_schedule: tuple[tuple[int, int, int], ...] | None = None
    """`num_speculative_tokens_per_batch_size` from `--speculative-config`: k per batch-size range."""
    gpu_memory: bool = False
    """Share a simulated GPU with other simulators (ledger) and check vLLM's start-up memory rule."""
    gpu_memory_utilization: float = 0.9
    kv_cache_memory_bytes: int | None = None
    max_model_len: int | None = None
    enforce_eager: bool = False
    gpu_ledger_dir: str | None = None
    """Folder of the simulated GPUs' ledgers (default: `sim.gpu.default_ledger_dir`)."""


class SimStartupError(RuntimeError):
    """The simulated engine refused to start (vLLM's message; the CLI exits with status 1)."""


class _Log:
    """vLLM-style log lines: ``INFO 11-29 21:06:39 [file.py:NN] message``."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream = stream

    def __call__(self, where: str, message: str, level: str = "INFO") -> None:
        if self.stream is None:
            return
        stamp = time.strftime("%m-%d %H:%M:%S")
        self.stream.write(f"{level} {stamp} [{where}] {message}\n")
        self.stream.flush()

    def raw(self, line: str) -> None:
        if self.stream is not None:
            self.stream.write(line + "\n")
            self.stream.flush()


def _json(obj: Any, status: int = 200) -> web.Response:
    # FastAPI's JSONResponse is compact
    return web.Response(text=_dumps(obj), status=status, content_type="application/json")


def _error(status: int, message: str, kind: str) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return _json(body, status=status)


def _dumps(obj: Any) -> str:
    # pydantic's model_dump_json: compact, non-ASCII kept
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class SimServer:
    """One simulated vLLM server: socket, engine, metrics, logs, faults."""

    def __init__(self, options: SimOptions | None = None, *, log: TextIO | None = None) -> None:
        self.options = options or SimOptions()
        opts = self.options
        self.preset: Preset = served_preset(get_preset(opts.preset), opts)
        self._worker: Any = None
        self.physics = Physics(self.preset, spec=opts.spec, k=opts.k, acceptance_scale=opts.acceptance_scale)
        self.model_name = opts.served_model_name or self.preset.model
        self.log = _Log(log)
        self.faults = opts.faults
        self.fingerprint = "vllm-{}-{}".format(
            VLLM_VERSION,
            hashlib.sha256(f"{self.preset.name}:{self.physics.k}:{opts.spec}".encode()).hexdigest()[:8],
        )
        self.created = int(time.time())
        self.metrics = self._new_metrics()
        self.engine = self._new_engine()
        self._runner: web.AppRunner | None = None
        self._site: web.BaseSite | None = None
        self._sock: socket.socket | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()

    # -- construction ------------------------------------------------------------------------
    def _new_metrics(self) -> SimMetrics:
        p = self.preset
        cache_info = {
            "block_size": "16",
            "cache_dtype": "auto",
            "enable_prefix_caching": "True",
            "gpu_memory_utilization": "0.9",
            "num_gpu_blocks": str(p.kv_cache_tokens // 16),
            "kv_cache_size_tokens": str(p.kv_cache_tokens),
            "num_cpu_blocks": "None",
            "sliding_window": "None",
            "prefix_caching_hash_algo": "sha256",
        }
        return SimMetrics(
            model_name=self.model_name, k=self.physics.k, max_model_len=p.max_model_len, cache_info=cache_info
        )

    def _new_engine(self) -> Engine:
        opts = self.options
        return Engine(
            self.physics,
            self.metrics,
            speed=opts.speed,
            max_num_seqs=opts.max_num_seqs or self.preset.max_num_seqs,
            kv_cache_tokens=self.preset.kv_cache_tokens,
            mfu_metrics=opts.mfu_metrics,
            k_schedule=opts.k_schedule,
        )

    @property
    def url(self) -> str:
        """Base URL (http://host:port)."""
        host = self.options.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def info(self) -> dict[str, Any]:
        """The /sim/info document."""
        p, ph = self.preset, self.physics
        return {
            "simulator": "mtpwatch-sim",
            "version": VLLM_VERSION,
            "preset": p.name,
            "description": p.description,
            "model": p.model,
            "served_model_name": self.model_name,
            "model_config": p.model_config,
            "gpu": p.gpu,
            "peak_gbps": p.peak_gbps,
            "bw_efficiency": p.bw_efficiency,
            "quantization": p.quantization,
            "spec": self.options.spec,
            "method": p.method if self.options.spec else None,
            "drafter": p.drafter if self.options.spec else None,
            "k": ph.k,
            "target_bytes_per_step": ph.target_bytes(ph.k + 1),
            "target_bytes_per_token": ph.target_bytes(1),
            "drafter_bytes_per_pass": p.drafter_bytes if self.options.spec else 0.0,
            "drafter_bytes_per_step": ph.k * p.drafter_bytes,
            "kv_bytes_per_token": p.kv_bytes_per_token,
            "moe": asdict(p.moe) if p.moe else None,
            "acceptance_profile": list(ph.conditional),
            "acceptance_profile_kind": "conditional",
            "acceptance_scale": ph.acceptance_scale,
            "expected_tokens_per_step": ph.expected_tokens_per_step(),
            "targets": p.targets,
            "speed": self.options.speed,
            "seed": self.options.seed,
            "max_model_len": p.max_model_len,
            "faults": asdict(self.faults),
        }

    # -- lifecycle ---------------------------------------------------------------------------
    async def bind(self) -> str:
        """Bind the listening socket (so port 0 resolves) without serving yet; returns the URL."""
        opts = self.options
        family = socket.AF_INET6 if ":" in opts.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((opts.host, opts.port))
        sock.listen(128)
        sock.setblocking(False)
        self._sock = sock
        self.port = sock.getsockname()[1]
        return self.url

    async def start(self) -> str:
        """Bind (if needed), print the start-up log over `startup_delay_s`, then serve; returns the URL."""
        if self._sock is None:
            await self.bind()
        assert self._sock is not None
        await self._startup_log(self.options.startup_delay_s)
        app = self._make_app()
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        self._site = web.SockSite(self._runner, self._sock)
        await self._site.start()
        self.engine.start()
        self._spawn(self._stats_loop())
        if self.options.exit_after_s is not None:
            self._spawn(self._exit_later(self.options.exit_after_s))
        if self.options.restart_after_s is not None:
            self._spawn(self._restart_later(self.options.restart_after_s))
        for slot in range(self.options.load):
            self._spawn(self._load_loop(slot))
        self.log("launcher.py:48", f"Starting vLLM API server 0 on {self.url}")
        self.log.raw(f"INFO:     Started server process [{os.getpid()}]")
        self.log.raw("INFO:     Waiting for application startup.")
        self.log.raw("INFO:     Application startup complete.")
        self.ready.set()
        return self.url

    async def stop(self) -> None:
        """Stop serving, abort requests, cancel background tasks."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.engine.stop()
        await asyncio.sleep(0)  # let stream handlers see their abort and drop their connections
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.closed.set()

    def _claim_gpu(self) -> None:
        """vLLM's start-up memory check against the simulated GPU; raises `SimStartupError`."""
        from mtpwatch.sim.gpu import SimGpu, spawn_worker

        opts, p = self.options, self.preset
        gpu = SimGpu.for_gpu(p.gpu, Path(opts.gpu_ledger_dir) if opts.gpu_ledger_dir else None)
        self._worker = spawn_worker()
        weights = p.weights_gib * 2**30 + (p.drafter_bytes if opts.spec else 0.0)
        overhead = (1.5 + (0.0 if opts.enforce_eager else 1.0)) * 2**30
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

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _startup_log(self, delay_s: float) -> None:
        p, opts, k = self.preset, self.options, self.physics.k
        log = self.log
        log("api_server.py:1880", f"vLLM API server version {VLLM_VERSION}")
        args: dict[str, Any] = {"model_tag": p.model, "host": opts.host, "port": self.port, "model": p.model}
        if opts.served_model_name:
            args["served_model_name"] = [opts.served_model_name]
        spec_json: dict[str, Any] | None = None
        if opts.spec:
            spec_json = {"method": p.method, "model": p.drafter, "num_speculative_tokens": k}
            if opts.k_schedule:
                spec_json["num_speculative_tokens_per_batch_size"] = [list(r) for r in opts.k_schedule]
            args["speculative_config"] = spec_json
        log("utils.py:253", f"non-default args: {args}")
        log("model.py:637", "Resolved architecture: Gemma4ForConditionalGeneration")
        log("model.py:1880", f"Using max model len {p.max_model_len}")
        spec_repr = (
            f"SpeculativeConfig(method='{p.method}', model='{p.drafter}', num_spec_tokens={k})"
            if opts.spec
            else "None"
        )
        quant = p.quantization if p.quantization != "bf16" else None
        log(
            "core.py:133",
            f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: model='{p.model}', "
            f"speculative_config={spec_repr}, tokenizer='{p.model}', dtype=torch.bfloat16, "
            f"max_seq_len={p.max_model_len}, quantization={quant}",
        )
        if opts.spec and k > 1:
            log(
                "speculative.py:1381",
                "Enabling num_speculative_tokens > 1 will run multiple times of "
                "forward on same MTP layer,which may result in lower acceptance rate",
                level="WARNING",
            )
        if opts.gpu_memory and self._worker is None:
            self._claim_gpu()
        # simulated load phases: weights ~60 %, drafter ~10 %, profiling/KV ~15 %, graphs ~15 %
        weights_s, drafter_s, kv_s, graphs_s = (delay_s * f for f in (0.6, 0.1, 0.15, 0.15))
        log("gpu_model_runner.py:4162", f"Starting to load model {p.model}...")
        await asyncio.sleep(weights_s)
        log("default_loader.py:291", f"Loading weights took {weights_s:.2f} seconds")
        if opts.spec:
            log("gpu_model_runner.py:4187", "Loading drafter model...")
            await asyncio.sleep(drafter_s)
            log(
                "llm_base_proposer.py:1469",
                "Detected MTP model. Sharing target model embedding weights with the draft model.",
            )
            if p.centroids:
                log(
                    "gemma4_mtp.py:536",
                    "Gemma4 MTP: centroids masking enabled "
                    "(num_centroids=2048, top_k=32, active_tokens=4096/262144).",
                )
        gib = p.weights_gib + (p.drafter_bytes / 2**30 if opts.spec else 0.0)
        log(
            "gpu_model_runner.py:4246",
            f"Model loading took {gib:.4f} GiB memory and {weights_s + drafter_s:.6f} seconds",
        )
        await asyncio.sleep(kv_s)
        kv_gib = p.kv_cache_tokens * max(p.kv_bytes_per_token, 1.0) / 2**30
        log("gpu_worker.py:436", f"Available KV cache memory: {kv_gib:.2f} GiB")
        log(
            "kv_cache_utils.py:1308",
            f"GPU KV cache size: {p.kv_cache_tokens:,} tokens, Maximum concurrency "
            f"for {p.max_model_len:,} tokens per request: {p.kv_cache_tokens / p.max_model_len:.2f}x",
        )
        await asyncio.sleep(graphs_s)
        log("gpu_model_runner.py:5104", f"Graph capturing finished in {graphs_s:.0f} secs, took 0.52 GiB")
        log(
            "core.py:276",
            f"init engine (profile, create kv cache, warmup model) took {kv_s + graphs_s:.2f} seconds",
        )

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
            self.log(
                "loggers.py:335",
                f"Engine 000: Avg prompt throughput: {stats.prompt_tokens / elapsed:.1f} tokens/s, "
                f"Avg generation throughput: {stats.generation_tokens / elapsed:.1f} tokens/s, "
                f"Running: {running} reqs, Waiting: {waiting} reqs, "
                f"GPU KV cache usage: {self.engine.kv_usage * 100:.1f}%, Prefix cache hit rate: 0.0%",
            )
            if stats.drafts:
                mean_len = 1 + stats.accepted / stats.drafts
                per_pos = ", ".join(f"{n / stats.drafts:.3f}" for n in stats.per_pos)
                rate = stats.accepted / stats.draft_tokens * 100 if stats.draft_tokens else float("nan")
                self.log(
                    "metrics.py:120",
                    f"SpecDecoding metrics: Mean acceptance length: {mean_len:.2f}, "
                    f"Accepted throughput: {stats.accepted / elapsed:.2f} tokens/s, "
                    f"Drafted throughput: {stats.draft_tokens / elapsed:.2f} tokens/s, "
                    f"Accepted: {stats.accepted} tokens, Drafted: {stats.draft_tokens} tokens, "
                    f"Per-position acceptance rate: {per_pos}, Avg Draft acceptance rate: {rate:.1f}%",
                )

    async def _load_loop(self, slot: int) -> None:
        """One background request after another (`SimOptions.load`), each read to its end."""
        for n in itertools.count():
            prompt = f"{LOAD_PROMPTS[(slot + n) % len(LOAD_PROMPTS)]} (background request {slot}.{n})"
            ids = prompt_token_ids(prompt)
            req = SimRequest(
                request_id=f"load-{slot}-{n}",
                prompt_tokens=len(ids),
                max_tokens=self.options.load_max_tokens,
                source=TextSource(prompt, temperature=0.0, seed=None, ignore_eos=False),
                rng=random.Random(f"{self.options.seed}:load:{slot}:{n}"),
            )
            self.engine.add(req)
            async for _ in self._outputs(req):
                pass

    # -- faults ------------------------------------------------------------------------------
    async def restart(self, down_s: float = 0.0) -> None:
        """Simulate a server restart: drop streams, reset counters (new `_created`), reprint start-up."""
        await self.engine.stop()
        self.log("launcher.py:110", "Shutting down FastAPI HTTP server.")
        self.metrics = self._new_metrics()
        self.engine = self._new_engine()
        await self._startup_log(down_s)
        self.engine.start()
        self.log("launcher.py:48", f"Starting vLLM API server 0 on {self.url}")
        self.log.raw("INFO:     Application startup complete.")

    async def _restart_later(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        await self.restart()

    async def _exit_later(self, delay_s: float, code: int = 1) -> None:
        await asyncio.sleep(delay_s)
        await self.exit(code)

    async def exit(self, code: int = 1) -> None:
        """The 'server died' fault: end the process (CLI) or close the server (tests)."""
        self.log("core.py:1510", "EngineCore encountered a fatal error (simulated).", level="ERROR")
        if self.options.exit_mode == "process":
            if self.log.stream is not None:
                self.log.stream.flush()
            os._exit(code)
        await self.stop()

    # -- HTTP --------------------------------------------------------------------------------
    def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._headers_mw, self._auth_mw], client_max_size=64 * 2**20)
        app.router.add_get("/health", self._health)
        app.router.add_get("/version", self._version)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/metrics/", self._metrics_filtered)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/sim/info", self._info)
        app.router.add_post("/sim/fault", self._fault)
        app.router.add_get("/sim/fault", self._fault_get)
        return app

    @web.middleware
    async def _headers_mw(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        if self.faults.hang and not request.path.startswith("/sim/"):
            await asyncio.Event().wait()  # never answers; the client's timeout ends it
        try:
            resp = await handler(request)
        except web.HTTPException as exc:
            exc.headers.update(SIM_HEADERS)
            raise
        if not resp.prepared:
            resp.headers.update(SIM_HEADERS)
        return resp

    @web.middleware
    async def _auth_mw(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        key = self.options.api_key
        if key and request.path.startswith("/v1") and request.headers.get("Authorization") != f"Bearer {key}":
            return _json({"error": "Unauthorized"}, status=401)
        return await handler(request)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _version(self, request: web.Request) -> web.Response:
        return _json({"version": VLLM_VERSION})

    async def _models(self, request: web.Request) -> web.Response:
        card = {
            "id": self.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "vllm",
            "root": self.preset.model,
            "parent": None,
            "max_model_len": self.preset.max_model_len,
            "permission": [
                {
                    "id": f"modelperm-{uuid.uuid4().hex[:16]}",
                    "object": "model_permission",
                    "created": self.created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return _json({"object": "list", "data": [card]})

    async def _metrics_filtered(self, request: web.Request) -> web.StreamResponse:
        """`/metrics/`: vLLM's `Mount("/metrics", make_asgi_app(registry))`, which honours `name[]=`."""
        mode = self.faults.metrics_filter
        if mode == "404":
            return web.Response(status=404, text="Not Found")
        if mode == "redirect":
            raise web.HTTPTemporaryRedirect("/metrics")
        if mode == "empty":
            return await self._metrics(request, names=[])
        if mode == "ignore":
            return await self._metrics(request)
        # prometheus_client's own parsing of the query (exposition.make_wsgi_app: parse_qs)
        return await self._metrics(request, names=parse_qs(request.query_string).get("name[]"))

    async def _metrics(self, request: web.Request, names: list[str] | None = None) -> web.StreamResponse:
        """`/metrics` (the query string ignored, as prometheus-fastapi-instrumentator's route), or the
        samples `names` only (`/metrics/`) through prometheus_client's `restricted_registry`."""
        if self.faults.metrics_delay_s > 0:
            await asyncio.sleep(self.faults.metrics_delay_s)
        if self.faults.metrics_status is not None and self.faults.metrics_status != 200:
            return web.Response(status=self.faults.metrics_status, text="Internal Server Error")
        body = self.metrics.render(names)
        if self.faults.metrics_no_spec:
            body = b"".join(
                line for line in body.splitlines(keepends=True) if b"vllm:spec_decode_" not in line
            )
        headers = {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
        if self.faults.metrics_truncate:
            # announce the whole page, send half of it (cut mid-line), then drop the connection
            resp = web.StreamResponse(headers={**headers, **SIM_HEADERS})
            resp.content_length = len(body)
            await resp.prepare(request)
            await resp.write(body[: len(body) // 2])
            self._drop_transport(request)
            return resp
        return web.Response(body=body, headers=headers)

    async def _info(self, request: web.Request) -> web.Response:
        return _json(self.info())

    async def _fault_get(self, request: web.Request) -> web.Response:
        return _json(asdict(self.faults))

    async def _fault(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            if body.get("clear"):
                for spec in fields(Faults):
                    setattr(self.faults, spec.name, spec.default)
            if "cut_stream_after" in body:
                v = body["cut_stream_after"]
                self.faults.cut_stream_after = None if v is None else int(v)
            if "metrics_status" in body:
                v = body["metrics_status"]
                self.faults.metrics_status = None if v is None else int(v)
            if "metrics_500" in body:
                self.faults.metrics_status = 500 if body["metrics_500"] else None
            if "metrics_delay_s" in body:
                self.faults.metrics_delay_s = max(0.0, float(body["metrics_delay_s"] or 0.0))
            if "metrics_filter" in body:
                v = str(body["metrics_filter"] or "honour")
                if v not in METRICS_FILTER_MODES:
                    raise ValueError(f"metrics_filter must be one of {', '.join(METRICS_FILTER_MODES)}")
                self.faults.metrics_filter = v
            for flag in ("metrics_truncate", "metrics_no_spec", "cut_mid_chunk", "hang"):
                if flag in body:
                    setattr(self.faults, flag, bool(body[flag]))
            restart = bool(body.get("restart"))
            down_s = float(body.get("down_s", 0.0))
            do_exit = bool(body.get("exit"))
            exit_code = int(body.get("exit_code", 1))
        except (ValueError, TypeError) as exc:
            return _error(400, f"bad fault request: {exc}", "BadRequestError")
        if restart:
            self._spawn(self.restart(down_s))
        if do_exit:
            # answer first, then die
            asyncio.get_running_loop().call_later(0.05, lambda: self._spawn(self.exit(exit_code)))
        return _json({**asdict(self.faults), "restart": restart, "exit": do_exit})

    # -- OpenAI endpoints --------------------------------------------------------------------
    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _error(400, "request body is not valid JSON", "BadRequestError")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object", "BadRequestError")
        model = body.get("model")
        if model is not None and model != self.model_name:
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError")
        try:
            prompt_text, prompt_tokens, prompt_ids = self._prompt(body, chat=chat)
            max_len = self.preset.max_model_len
            max_tokens_raw = body.get("max_completion_tokens", body.get("max_tokens"))
            max_tokens = int(max_tokens_raw) if max_tokens_raw is not None else max_len - prompt_tokens
            temperature = float(body.get("temperature", 1.0) or 0.0)
            seed = body.get("seed")
            seed = int(seed) if seed is not None else None
        except (TypeError, ValueError) as exc:
            return _error(400, f"invalid request: {exc}", "BadRequestError")
        if max_tokens < 1:
            return _error(400, f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError")
        if prompt_tokens + max_tokens > max_len:
            return _error(
                400,
                f"This model's maximum context length is {max_len} tokens. However, you "
                f"requested {prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or "
                "completion.",
                "BadRequestError",
            )
        source = TextSource(
            prompt_text, temperature=temperature, seed=seed, ignore_eos=bool(body.get("ignore_eos", False))
        )
        rng_seed = f"{self.options.seed}:{stable_hash(prompt_text)}:{max_tokens}:{seed}:{temperature}"
        req = SimRequest(
            request_id=uuid.uuid4().hex[:16],
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens,
            source=source,
            rng=random.Random(rng_seed),
        )
        self.engine.add(req)
        stream_options = body.get("stream_options") or {}
        include_usage = bool(stream_options.get("include_usage"))
        continuous = include_usage and bool(stream_options.get("continuous_usage_stats"))
        return_ids = bool(body.get("return_token_ids"))
        if body.get("stream"):
            return await self._stream(
                request,
                req,
                chat=chat,
                include_usage=include_usage,
                continuous=continuous,
                return_ids=return_ids,
                prompt_ids=prompt_ids,
            )
        return await self._complete(request, req, chat=chat, return_ids=return_ids, prompt_ids=prompt_ids)

    def _prompt(self, body: dict[str, Any], *, chat: bool) -> tuple[str, int, list[int]]:
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ValueError("messages must be a non-empty list")
            parts: list[str] = []
            for msg in messages:
                content = msg.get("content") if isinstance(msg, dict) else None
                if isinstance(content, list):
                    content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
                parts.append(str(content or ""))
            text = "\n".join(parts)
            ids = prompt_token_ids(text)
            extra = CHAT_TEMPLATE_TOKENS * len(messages) + 2
            ids = ids + [106, 107] * (extra // 2) + [106] * (extra % 2)
            return text, len(ids), ids
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            if not prompt:
                raise ValueError("prompt must not be empty")
            first = prompt[0]
            if isinstance(first, int):  # token ids
                ids = [int(x) for x in prompt]
                return " ".join(map(str, ids)), len(ids), ids
            if isinstance(first, list):
                ids = [int(x) for x in first]
                return " ".join(map(str, ids)), len(ids), ids
            prompt = str(first)
        if not isinstance(prompt, str):
            raise ValueError("prompt must be a string or a list")
        ids = prompt_token_ids(prompt)
        return prompt, len(ids), ids

    def _usage(self, req: SimRequest, completion: int | None = None) -> dict[str, int]:
        done = req.generated if completion is None else completion
        return {
            "prompt_tokens": req.prompt_tokens,
            "total_tokens": req.prompt_tokens + done,
            "completion_tokens": done,
        }

    async def _outputs(self, req: SimRequest) -> AsyncIterator[Output]:
        while True:
            out = await req.outputs.get()
            yield out
            if out.finish_reason is not None:
                return

    async def _stream(
        self,
        request: web.Request,
        req: SimRequest,
        *,
        chat: bool,
        include_usage: bool,
        continuous: bool,
        return_ids: bool,
        prompt_ids: list[int],
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8", **SIM_HEADERS})
        await resp.prepare(request)
        rid = ("chatcmpl-" if chat else "cmpl-") + req.request_id
        head = {
            "id": rid,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
        }
        cut = self.faults.cut_stream_after
        sent = 0
        try:
            if chat:
                first: dict[str, Any] = {
                    **head,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": ""},
                            "logprobs": None,
                            "finish_reason": None,
                        }
                    ],
                }
                if continuous:
                    first["usage"] = self._usage(req, 0)
                first["prompt_token_ids"] = prompt_ids if return_ids else None
                first["prompt_text"] = None
                await resp.write(f"data: {_dumps(first)}\n\n".encode())
            async for out in self._outputs(req):
                if out.finish_reason == "abort":
                    # the engine stopped (restart/exit fault): the connection dies mid-stream
                    self._drop_transport(request)
                    return resp
                tokens = out.tokens
                truncated = cut is not None and sent + len(tokens) > cut
                if truncated:
                    assert cut is not None
                    tokens = tokens[: cut - sent]
                sent += len(tokens)
                finish = None if truncated else out.finish_reason
                if tokens or finish is not None:
                    chunk = self._chunk(
                        head,
                        req,
                        tokens,
                        finish,
                        chat=chat,
                        continuous=continuous,
                        include_usage=include_usage,
                        return_ids=return_ids,
                        prompt_ids=prompt_ids if sent == len(tokens) else None,
                        sent=sent,
                    )
                    if truncated and self.faults.cut_mid_chunk:
                        chunk = chunk[: len(chunk) // 2]  # the event breaks off mid-JSON
                    await resp.write(chunk)
                if cut is not None and sent >= cut and finish is None:
                    # fault: drop the connection after `cut` tokens, no [DONE]
                    self.engine.abort(req)
                    self._drop_transport(request)
                    return resp
            if include_usage:
                final: dict[str, Any] = {
                    **head,
                    "choices": [],
                    "usage": self._usage(req, sent),
                    "system_fingerprint": self.fingerprint,
                }
                if self.options.per_request_spec_metrics and self.engine.physics.spec:
                    spec = _request_spec_metrics(req, self.engine.physics.k)
                    final["metrics"] = {"speculative_decoding": spec}
                await resp.write(f"data: {_dumps(final)}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            self.engine.abort(req)
        except asyncio.CancelledError:
            self.engine.abort(req)
            raise
        return resp

    def _chunk(
        self,
        head: dict[str, Any],
        req: SimRequest,
        tokens: list[Token],
        finish: str | None,
        *,
        chat: bool,
        continuous: bool,
        include_usage: bool,
        return_ids: bool,
        prompt_ids: list[int] | None,
        sent: int,
    ) -> bytes:
        text = "".join(t.text for t in tokens)
        ids = [t.token_id for t in tokens] if return_ids else None
        choice: dict[str, Any]
        if chat:
            choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = None
            choice["token_ids"] = ids
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "prompt_token_ids": prompt_ids if return_ids else None,
                "token_ids": ids,
            }
        chunk: dict[str, Any] = {**head, "choices": [choice]}
        if continuous:
            chunk["usage"] = self._usage(req, sent)
        if finish is not None and not include_usage:
            chunk["system_fingerprint"] = self.fingerprint
        return f"data: {_dumps(chunk)}\n\n".encode()

    @staticmethod
    def _drop_transport(request: web.Request) -> None:
        # abort the TCP connection without a clean end of stream, as a dying server does
        transport = request.transport
        if transport is not None:
            transport.abort()

    async def _complete(
        self, request: web.Request, req: SimRequest, *, chat: bool, return_ids: bool, prompt_ids: list[int]
    ) -> web.Response:
        tokens = []
        reason = "stop"
        try:
            async for out in self._outputs(req):
                tokens.extend(out.tokens)
                reason = out.finish_reason or reason
        except asyncio.CancelledError:
            self.engine.abort(req)
            raise
        if reason == "abort":
            self._drop_transport(request)
            return web.Response(status=500)
        text = "".join(t.text for t in tokens)
        ids = [t.token_id for t in tokens] if return_ids else None
        usage = {**self._usage(req, len(tokens)), "prompt_tokens_details": None}
        head = {
            "id": ("chatcmpl-" if chat else "cmpl-") + req.request_id,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
        }
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "refusal": None,
                    "annotations": None,
                    "audio": None,
                    "function_call": None,
                    "tool_calls": [],
                    "reasoning": None,
                },
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": None,
                "token_ids": ids,
            }
            body = {
                **head,
                "choices": [choice],
                "service_tier": None,
                "system_fingerprint": self.fingerprint,
                "usage": usage,
                "prompt_logprobs": None,
                "prompt_token_ids": prompt_ids if return_ids else None,
                "kv_transfer_params": None,
            }
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": None,
                "prompt_logprobs": None,
                "prompt_token_ids": prompt_ids if return_ids else None,
                "token_ids": ids,
            }
            body = {
                **head,
                "choices": [choice],
                "service_tier": None,
                "system_fingerprint": self.fingerprint,
                "usage": usage,
                "kv_transfer_params": None,
            }
        return _json(body)


# -- helpers for tests and other modules -------------------------------------------------------
def make_options(**options: Any) -> SimOptions:
    """`SimOptions` from keyword arguments; fault fields (cut_stream_after, ...) may be given flat."""
    fault_keys = {f for f in Faults.__dataclass_fields__}
    faults = Faults(**{k: options.pop(k) for k in list(options) if k in fault_keys})
    opts = SimOptions(**options)
    if any(v not in (None, 0.0) for v in asdict(faults).values()):
        opts = replace(opts, faults=faults)
    return opts


@contextlib.asynccontextmanager
async def running_sim(**options: Any) -> AsyncIterator[str]:
    """Run a simulator in the current event loop on 127.0.0.1, port 0; yields its base URL.

    Options are `SimOptions` fields (preset, spec, k, speed, ...) and `Faults` fields.
    Log lines go nowhere unless ``log=<stream>`` is given.
    """
    log = options.pop("log", None)
    options.setdefault("host", "127.0.0.1")
    options.setdefault("port", 0)
    server = SimServer(make_options(**options), log=log)
    url = await server.start()
    try:
        yield url
    finally:
        await server.stop()


class SimThread:
    """Run a simulator in a background thread with its own event loop (for sync tests).

    ``with SimThread(preset="gemma4-e4b-gb10", speed=20) as url: ...``
    """

    def __init__(self, **options: Any) -> None:
        self._log: TextIO | None = options.pop("log", None)
        options.setdefault("host", "127.0.0.1")
        options.setdefault("port", 0)
        self._options = make_options(**options)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.server: SimServer | None = None
        self.url = ""

    def __enter__(self) -> str:
        self._thread = threading.Thread(target=self._main, name="mtpwatch-sim", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout=60):
            raise RuntimeError("simulator did not start within 60 s")
        if self._error is not None:
            raise RuntimeError(f"simulator failed to start: {self._error}") from self._error
        return self.url

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _main(self) -> None:
        asyncio.run(self._amain())

    async def _amain(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        try:
            self.server = SimServer(self._options, log=self._log)
            self.url = await self.server.start()
        except BaseException as exc:  # reported to the caller's thread
            self._error = exc
            self._started.set()
            return
        self._started.set()
        await self._stop.wait()
        await self.server.stop()


def served_preset(preset: Preset, opts: SimOptions) -> Preset:
    """The preset as a `vllm serve` command line changes it: model, context length, method, drafter.

    ngram drafts by looking the prompt up: no drafter weights, a tiny cost per draft position.
    Other methods keep the preset's drafter costs (an EAGLE-3 head or a draft model of that size).
    """
    changes: dict[str, Any] = {}
    if opts.model:
        changes["model"] = opts.model
    if opts.max_model_len:
        changes["max_model_len"] = opts.max_model_len
    method = opts.method or preset.method
    if method == "ngram":
        changes.update(
            method="ngram", drafter=None, drafter_bytes=0.0, drafter_overhead_s=0.0001, centroids=False
        )
    elif opts.method or opts.drafter:
        changes.update(
            method=method,
            drafter=opts.drafter or preset.drafter,
            centroids=preset.centroids and method == "mtp",
        )
    return replace(preset, **changes) if changes else preset


def default_log_stream() -> TextIO:
    """stdout, line-buffered (vLLM's logs are line-oriented; a launcher reads them live)."""
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    return sys.stdout


def _request_spec_metrics(req: SimRequest, k: int) -> dict[str, Any]:
    """vLLM's `RequestSpecDecodeMetrics.to_dict()` (summary level) for one finished request."""
    steps, drafted, accepted = req.spec_steps, req.spec_draft_tokens, req.spec_accepted
    return {
        "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": list(req.spec_histogram) or [0] * (k + 1),
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": k,
    }
