"""The simulator's HTTP server (aiohttp): `SimServer` owns the listening socket, the `Engine`, the
`SimMetrics` registry, its lifecycle (bind, start, stop, restart, exit), the background traffic,
/sim/fault and the app with its middlewares (sim headers, the hang fault, the API key). The other
routes are mixins, one module per job: `routes`, `completions`, `startup` (log lines, GPU memory).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import os
import random
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any, TextIO

from aiohttp import web

from mtpwatch.sim import METRICS_FILTER_MODES
from mtpwatch.sim.completions import CompletionRoutes, outputs
from mtpwatch.sim.corpus import TextSource, prompt_token_ids
from mtpwatch.sim.engine import KV_BLOCK, Engine, SimRequest
from mtpwatch.sim.faults import Faults
from mtpwatch.sim.metrics import SimMetrics
from mtpwatch.sim.options import SimOptions, served_preset
from mtpwatch.sim.physics import Physics
from mtpwatch.sim.presets import get_preset
from mtpwatch.sim.replies import SIM_HEADERS, VLLM_VERSION, Handler, error_response, json_response
from mtpwatch.sim.routes import InfoRoutes
from mtpwatch.sim.startup import SimLog, StartupLog

LOAD_PROMPTS = (
    "Summarise the history of the printing press in a few paragraphs.",
    "Write a Python function that merges two sorted lists, with comments.",
    "Explain how a transformer decodes one token at a time.",
)
"""Prompts of the background traffic (`SimOptions.load`), used in turn."""


class SimServer(InfoRoutes, CompletionRoutes, StartupLog):
    """One simulated vLLM server: socket, engine, metrics, logs, faults."""

    def __init__(self, options: SimOptions, *, log: TextIO | None = None) -> None:
        self.options = opts = options
        if opts.frontend == "rust" and opts.vllm_log == "0.32-cpu":
            raise ValueError("the Rust frontend ships with vLLM 0.33 and later: use --vllm-log 0.34-gpu")
        self.preset = served_preset(get_preset(opts.preset), opts)
        self._worker = None
        self.physics = Physics(self.preset, spec=opts.spec, k=opts.k, acceptance_scale=opts.acceptance_scale)
        self.model_name = opts.served_model_name or self.preset.model
        self.log = SimLog(log)
        self.faults = opts.faults
        if opts.frontend == "rust" and self.faults.metrics_filter == "honour":
            # the Rust frontend has one route, `/metrics`, and no `/metrics/` (`rust/src/server/src/
            # routes.rs:140`): axum answers 404 (POST /sim/fault {"metrics_filter": "honour"} tests a
            # later release that would honour the filter)
            self.faults.metrics_filter = "404"
        self.fingerprint = "vllm-{}-{}".format(
            VLLM_VERSION,
            hashlib.sha256(f"{self.preset.name}:{self.physics.k}:{opts.spec}".encode()).hexdigest()[:8],
        )
        self.created = int(time.time())
        self._new_engine()
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port = 0
        self.url = ""

    # -- construction ------------------------------------------------------------------------
    def _new_engine(self) -> None:
        """A new `SimMetrics` registry and `Engine` (at start-up and each restart: counters from 0)."""
        p, opts = self.preset, self.options
        cache_info = {
            "block_size": str(KV_BLOCK),
            "cache_dtype": "auto",
            "enable_prefix_caching": "True",
            "gpu_memory_utilization": "0.9",
            "num_gpu_blocks": str(p.kv_cache_tokens // KV_BLOCK),
            "kv_cache_size_tokens": str(p.kv_cache_tokens),
            "num_cpu_blocks": "None",
            "sliding_window": "None",
            "prefix_caching_hash_algo": "sha256",
        }
        self.metrics = SimMetrics(
            model_name=self.model_name,
            k=self.physics.k,
            max_model_len=p.max_model_len,
            cache_info=cache_info,
            frontend=opts.frontend,
        )
        self.engine = Engine(
            self.physics,
            self.metrics,
            speed=opts.speed,
            max_num_seqs=opts.max_num_seqs or p.max_num_seqs,
            kv_cache_tokens=p.kv_cache_tokens,
            mfu_metrics=opts.mfu_metrics,
            k_schedule=opts.k_schedule,
        )

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
        host = f"[{opts.host}]" if ":" in opts.host else opts.host  # IPv6 in brackets
        self.url = f"http://{host}:{self.port}"
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
        await web.SockSite(self._runner, self._sock).start()  # the runner's cleanup stops it
        self.engine.start()
        self._spawn(self._stats_loop())
        if self.options.exit_after_s is not None:
            self._spawn(self._after(self.options.exit_after_s, self.exit))
        if self.options.restart_after_s is not None:
            self._spawn(self._after(self.options.restart_after_s, self.restart))
        for slot in range(self.options.load):
            self._spawn(self._load_loop(slot))
        self._log_serving()
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

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _load_loop(self, slot: int) -> None:
        """One background request after another (`SimOptions.load`), each read to its end."""
        for n in itertools.count():
            prompt = f"{LOAD_PROMPTS[(slot + n) % len(LOAD_PROMPTS)]} (background request {slot}.{n})"
            req = SimRequest(
                request_id=f"load-{slot}-{n}",
                prompt_tokens=len(prompt_token_ids(prompt)),
                max_tokens=self.options.load_max_tokens,
                source=TextSource(prompt),  # temperature 0
                rng=random.Random(f"{self.options.seed}:load:{slot}:{n}"),
            )
            self.engine.add(req)
            async for _ in outputs(req):
                pass

    # -- faults ------------------------------------------------------------------------------
    async def restart(self, down_s: float = 0.0) -> None:
        """Simulate a server restart: drop streams, reset counters (new `_created`), reprint start-up."""
        await self.engine.stop()
        self.log("launcher.py:110", "Shutting down FastAPI HTTP server.")
        self._new_engine()
        await self._startup_log(down_s)
        self.engine.start()
        self._log_serving(restarted=True)

    async def _after(self, delay_s: float, fault: Callable[[], Awaitable[None]]) -> None:
        """A fault on a timer (`exit_after_s`, `restart_after_s`)."""
        await asyncio.sleep(delay_s)
        await fault()

    async def _fault_get(self, request: web.Request) -> web.Response:
        """GET /sim/fault: the switches."""
        return json_response(asdict(self.faults))

    async def _fault(self, request: web.Request) -> web.Response:
        """POST /sim/fault: set the switches, clear them, or ask for a restart or an exit."""
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            if body.get("clear"):
                vars(self.faults).update(vars(Faults()))
            for count in ("cut_stream_after", "metrics_status"):
                if count in body:
                    setattr(self.faults, count, None if body[count] is None else int(body[count]))
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
            return error_response(400, f"bad fault request: {exc}", "BadRequestError")
        if restart:
            self._spawn(self.restart(down_s))
        if do_exit:
            # answer first, then die
            asyncio.get_running_loop().call_later(0.05, lambda: self._spawn(self.exit(exit_code)))
        return json_response({**asdict(self.faults), "restart": restart, "exit": do_exit})

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
        app.router.add_post("/tokenize", self._tokenize)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/metrics/", self._metrics_filtered)
        app.router.add_post("/v1/completions", functools.partial(self._generate, chat=False))
        app.router.add_post("/v1/chat/completions", functools.partial(self._generate, chat=True))
        app.router.add_get("/sim/info", self._info)
        app.router.add_post("/sim/fault", self._fault)
        app.router.add_get("/sim/fault", self._fault_get)
        return app

    @web.middleware
    async def _headers_mw(self, request: web.Request, handler: Handler) -> web.StreamResponse:
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
    async def _auth_mw(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        key = self.options.api_key
        if key and request.path.startswith("/v1") and request.headers.get("Authorization") != f"Bearer {key}":
            return json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)


def default_log_stream() -> TextIO:
    """stdout, line-buffered (vLLM's logs are line-oriented; a launcher reads them live)."""
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    return sys.stdout
