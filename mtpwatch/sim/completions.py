"""The OpenAI endpoints of the simulator: /v1/completions and /v1/chat/completions, streamed (SSE, with
vLLM's usage chunks and per-request spec-decode metrics) or whole, and the stream faults (cut after N
tokens, cut mid-event).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from mtpwatch.sim.corpus import TextSource, Token, prompt_token_ids, stable_hash
from mtpwatch.sim.engine import Output, SimRequest
from mtpwatch.sim.replies import SIM_HEADERS, drop_transport, dumps, error_response, json_response
from mtpwatch.sim.startup import ServerParts

Event = dict[str, Any]
"""One JSON reply or SSE event, as it is written."""
CHAT_TEMPLATE_TOKENS = 4
"""Tokens the chat template adds per message (turn markers), as Gemma's template roughly does."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What a request asks its answer to carry: chat or completion, `stream_options`' usage (on the
    last chunk; on every chunk when `continuous`) and the token ids (`return_token_ids`)."""

    chat: bool
    include_usage: bool
    continuous: bool
    return_ids: bool
    prompt_ids: list[int]


class CompletionRoutes(ServerParts):
    """The completion and chat routes (a mixin of `SimServer`)."""

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return error_response(400, "request body is not valid JSON", "BadRequestError")
        if not isinstance(body, dict):
            return error_response(400, "request body must be a JSON object", "BadRequestError")
        model = body.get("model")
        if model is not None and model != self.model_name:
            return error_response(404, f"The model `{model}` does not exist.", "NotFoundError")
        try:
            prompt_text, prompt_ids = self._prompt(body, chat=chat)
            prompt_tokens = len(prompt_ids)
            max_len = self.preset.max_model_len
            max_tokens_raw = body.get("max_completion_tokens", body.get("max_tokens"))
            max_tokens = int(max_tokens_raw) if max_tokens_raw is not None else max_len - prompt_tokens
            temperature = float(body.get("temperature", 1.0) or 0.0)
            seed = body.get("seed")
            seed = int(seed) if seed is not None else None
        except (TypeError, ValueError) as exc:
            return error_response(400, f"invalid request: {exc}", "BadRequestError")
        if max_tokens < 1:
            return error_response(400, f"max_tokens must be at least 1, got {max_tokens}.", "BadRequestError")
        if prompt_tokens + max_tokens > max_len:
            return error_response(
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
        reply = Reply(chat, include_usage, continuous, bool(body.get("return_token_ids")), prompt_ids)
        if body.get("stream"):
            return await self._stream(request, req, reply)
        return await self._complete(request, req, reply)

    def _prompt(self, body: Event, *, chat: bool) -> tuple[str, list[int]]:
        """The prompt's text (what picks the answer) and its token ids."""
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
            return text, ids + [106, 107] * (extra // 2) + [106] * (extra % 2)
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            if not prompt:
                raise ValueError("prompt must not be empty")
            first = prompt[0]
            if isinstance(first, (int, list)):  # token ids, or a batch of them (the first answered)
                ids = [int(x) for x in (prompt if isinstance(first, int) else first)]
                return " ".join(map(str, ids)), ids
            prompt = str(first)
        if not isinstance(prompt, str):
            raise ValueError("prompt must be a string or a list")
        return prompt, prompt_token_ids(prompt)

    def _head(self, req: SimRequest, chat_object: str | None) -> Event:
        """The fields a reply and each event of a stream start with (`chat_object`: None for a completion)."""
        return {
            "id": ("chatcmpl-" if chat_object else "cmpl-") + req.request_id,
            "object": chat_object or "text_completion",
            "created": int(time.time()),
            "model": self.model_name,
        }

    def _usage(self, req: SimRequest, done: int) -> dict[str, int]:
        prompt = req.prompt_tokens
        return {"prompt_tokens": prompt, "total_tokens": prompt + done, "completion_tokens": done}

    async def _stream(self, request: web.Request, req: SimRequest, reply: Reply) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8", **SIM_HEADERS})
        await resp.prepare(request)
        chat = reply.chat
        head = self._head(req, "chat.completion.chunk" if chat else None)
        cut = self.faults.cut_stream_after
        sent = 0
        try:
            if chat:
                await resp.write(self._role_chunk(head, req, reply))
            async for out in outputs(req):
                if out.finish_reason == "abort":
                    # the engine stopped (restart/exit fault): the connection dies mid-stream
                    drop_transport(request)
                    return resp
                room = len(out.tokens) if cut is None else cut - sent
                truncated = len(out.tokens) > room
                tokens = out.tokens[:room]
                sent += len(tokens)
                finish = None if truncated else out.finish_reason
                if tokens or finish is not None:
                    chunk = self._chunk(head, req, tokens, finish, reply, sent)
                    if truncated and self.faults.cut_mid_chunk:
                        chunk = chunk[: len(chunk) // 2]  # the event breaks off mid-JSON
                    await resp.write(chunk)
                if cut is not None and sent >= cut and finish is None:
                    # fault: drop the connection after `cut` tokens, no [DONE]
                    self.engine.abort(req)
                    drop_transport(request)
                    return resp
            if reply.include_usage:
                await resp.write(self._usage_chunk(head, req, sent))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except ConnectionError:
            self.engine.abort(req)
        except asyncio.CancelledError:
            self.engine.abort(req)
            raise
        return resp

    def _role_chunk(self, head: Event, req: SimRequest, reply: Reply) -> bytes:
        """A chat stream's first event: the assistant role, no text (as vLLM sends it)."""
        delta = {"role": "assistant", "content": ""}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        first: Event = {**head, "choices": [choice]}
        if reply.continuous:
            first["usage"] = self._usage(req, 0)
        first["prompt_token_ids"] = reply.prompt_ids if reply.return_ids else None
        first["prompt_text"] = None
        return f"data: {dumps(first)}\n\n".encode()

    def _usage_chunk(self, head: Event, req: SimRequest, sent: int) -> bytes:
        """The final usage event (`stream_options.include_usage`), with vLLM's per-request spec
        metrics when the server is asked for them."""
        usage = self._usage(req, sent)
        final: Event = {**head, "choices": [], "usage": usage, "system_fingerprint": self.fingerprint}
        if self.options.per_request_spec_metrics and self.engine.physics.spec:
            spec = request_spec_metrics(req, self.engine.physics.k)
            final["metrics"] = {"speculative_decoding": spec}
        return f"data: {dumps(final)}\n\n".encode()

    def _chunk(
        self, head: Event, req: SimRequest, tokens: list[Token], finish: str | None, reply: Reply, sent: int
    ) -> bytes:
        """One event of `tokens`, `sent` tokens into the stream (its first carries the prompt's ids)."""
        text = "".join(t.text for t in tokens)
        choice: Event
        if reply.chat:
            choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = None
        else:
            first_ids = reply.prompt_ids if reply.return_ids and sent == len(tokens) else None
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
            choice |= {"stop_reason": None, "prompt_token_ids": first_ids}
        choice["token_ids"] = [t.token_id for t in tokens] if reply.return_ids else None
        chunk: Event = {**head, "choices": [choice]}
        if reply.continuous:
            chunk["usage"] = self._usage(req, sent)
        if finish is not None and not reply.include_usage:
            chunk["system_fingerprint"] = self.fingerprint
        return f"data: {dumps(chunk)}\n\n".encode()

    async def _complete(self, request: web.Request, req: SimRequest, reply: Reply) -> web.Response:
        tokens = []
        reason = "stop"
        try:
            async for out in outputs(req):
                tokens.extend(out.tokens)
                reason = out.finish_reason or reason
        except asyncio.CancelledError:
            self.engine.abort(req)
            raise
        if reason == "abort":
            drop_transport(request)
            return web.Response(status=500)
        text = "".join(t.text for t in tokens)
        chat = reply.chat
        ids = [t.token_id for t in tokens] if reply.return_ids else None
        prompt_ids = reply.prompt_ids if reply.return_ids else None
        usage = {**self._usage(req, len(tokens)), "prompt_tokens_details": None}
        head = self._head(req, "chat.completion" if chat else None)
        ending = {"logprobs": None, "finish_reason": reason, "stop_reason": None}
        if chat:
            # vLLM's ChatMessage, its unused optional fields written out
            message: Event = {"role": "assistant", "content": text, "refusal": None, "annotations": None}
            message |= {"audio": None, "function_call": None, "tool_calls": [], "reasoning": None}
            choice = {"index": 0, "message": message, **ending, "token_ids": ids}
        else:
            prompt_part = {"prompt_logprobs": None, "prompt_token_ids": prompt_ids}
            choice = {"index": 0, "text": text, **ending, **prompt_part, "token_ids": ids}
        body: Event = {**head, "choices": [choice], "service_tier": None}
        body |= {"system_fingerprint": self.fingerprint, "usage": usage}
        if chat:  # vLLM's chat response also echoes the prompt
            body |= {"prompt_logprobs": None, "prompt_token_ids": prompt_ids}
        body["kv_transfer_params"] = None
        return json_response(body)


async def outputs(req: SimRequest) -> AsyncIterator[Output]:
    """The engine's outputs for `req`, up to and including the one that finishes it."""
    while True:
        out = await req.outputs.get()
        yield out
        if out.finish_reason is not None:
            return


def request_spec_metrics(req: SimRequest, k: int) -> dict[str, Any]:
    """vLLM's `RequestSpecDecodeMetrics.to_dict()` (summary level) for one finished request."""
    drafted, histogram = req.spec_draft_tokens, req.spec_histogram
    steps, accepted = sum(histogram), sum(j * n for j, n in enumerate(histogram))
    return {
        "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": list(histogram) or [0] * (k + 1),
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": k,
    }
