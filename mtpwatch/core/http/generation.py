"""One generation, client side: request bodies, SSE chunk → `StreamEvent`, and the numbers of the result.

Token counts come from the server, never from chunk counts (under speculative decoding one chunk
carries 1…k+1 tokens): the differences of the cumulative `usage.completion_tokens` every chunk carries
when asked for `stream_options.continuous_usage_stats` (vLLM extension), else `token_ids` (from
`return_token_ids`), else an estimate from the text (`estimate_tokens`; the result says
`approximate`). llama-server's `timings.predicted_n` counts as exact (`core.http.engines`). The final
usage chunk, when sent, replaces the running count with the exact total (llama-server's final chunk
carries both `choices` and `usage`).

Timing follows `vllm bench serve` (`core.metrics.formulas`): TTFT ends at the first chunk with output
(the chat role-only first chunk is none), t_last is the last chunk with output (not the trailing usage
chunk), and ITL is each gap between successive chunks with output (one chunk may carry several
tokens). Per-chunk work is one `json.loads`, a few dict lookups and one small `StreamEvent`: the UI
feeds thousands of tokens a second through here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mtpwatch.core.http.engines import LlamaTimings
from mtpwatch.core.http.errors import one_line
from mtpwatch.core.metrics import formulas as F


class ChunkError(ValueError):
    """A stream event the client cannot use: a server error event or malformed JSON (one line)."""


def openai_error_message(obj: object) -> str | None:
    """The human message of an OpenAI/vLLM error body (`{"error": {"message": …}}`, `{"message": …}`)."""
    if not isinstance(obj, dict):
        return None
    err = obj.get("error", obj)
    if isinstance(err, str):
        return one_line(err)
    if isinstance(err, dict):
        for key in ("message", "detail"):
            value = err.get(key)
            if isinstance(value, str) and value:
                return one_line(value)
    detail = obj.get("detail")
    if isinstance(detail, str) and detail:
        return one_line(detail)
    return None


def estimate_tokens(text: str) -> int:
    """Rough token count of one chunk's text when the server gave none: words, at least 1 if non-empty."""
    return max(1, len(text.split())) if text else 0


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One prompt to stream; `body()` builds the JSON for /v1/completions or /v1/chat/completions."""

    prompt: str
    """The prompt text (chat: the single user message)."""
    model: str | None = None
    """Served model name; None omits the field (vLLM then uses its only model)."""
    chat: bool = False
    """Send to /v1/chat/completions (messages, chat template) instead of /v1/completions."""
    max_tokens: int = 256
    temperature: float = 0.0
    """0 makes MTP on/off outputs comparable token by token."""
    return_token_ids: bool = False
    """Ask vLLM for per-chunk `token_ids` (the A/B lossless check compares them)."""
    ignore_eos: bool = False
    """vLLM sampling extension: generate exactly max_tokens (fixed-length benchmarks)."""
    seed: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further body fields (stop, top_p, …), merged last."""

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.chat else "/v1/completions"

    def body(
        self,
        *,
        include_usage: bool = True,
        continuous_usage: bool = True,
        return_token_ids: bool | None = None,
    ) -> dict[str, Any]:
        """The JSON body; the keyword flags let the client drop extensions a server refuses
        (`continuous_usage`: cumulative usage on every chunk, the exact per-chunk token counts)."""
        body: dict[str, Any] = {} if self.model is None else {"model": self.model}
        if self.chat:
            body["messages"] = [{"role": "user", "content": self.prompt}]
        else:
            body["prompt"] = self.prompt
        body |= {"max_tokens": self.max_tokens, "temperature": self.temperature, "stream": True}
        if include_usage:
            options: dict[str, bool] = {"include_usage": True}
            if continuous_usage:
                options["continuous_usage_stats"] = True
            body["stream_options"] = options
        if self.return_token_ids if return_token_ids is None else return_token_ids:
            body["return_token_ids"] = True
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.seed is not None:
            body["seed"] = self.seed
        body.update(self.extra)
        return body


@dataclass(frozen=True, slots=True)
class RequestSpecMetrics:
    """vLLM's per-request speculative-decoding numbers (`metrics.speculative_decoding`, vLLM ≥ 0.27),
    on the final usage chunk with `--per-request-spec-decode-metrics` (why they come first:
    `core.metrics.attribution`). Rates are recomputed from the counts with vLLM's formulas."""

    num_spec_steps: int
    """Verify steps of this request that had drafts (vLLM's "drafts")."""
    num_draft_tokens: int
    num_accepted_draft_tokens: int
    num_spec_tokens: int | None
    """k, when the server says."""
    acceptance_histogram: tuple[int, ...]
    """Index j = verify steps that accepted exactly j drafts (length k+1; excludes the bonus token)."""

    @property
    def acceptance_rate(self) -> float | None:
        return F.acceptance_rate(self.num_accepted_draft_tokens, self.num_draft_tokens)

    @property
    def mean_acceptance_length(self) -> float | None:
        return F.mean_acceptance_length(self.num_accepted_draft_tokens, self.num_spec_steps)

    @property
    def per_position(self) -> tuple[float, ...]:
        return F.per_position_from_histogram(self.acceptance_histogram, self.num_spec_steps)

    @classmethod
    def from_json(cls, obj: object) -> RequestSpecMetrics | None:
        """Read `metrics.speculative_decoding`; None when absent or not of the documented shape."""
        if not isinstance(obj, dict):
            return None
        try:
            hist = tuple(int(v) for v in obj.get("acceptance_histogram") or ())
            k = obj.get("num_spec_tokens")
            return cls(
                num_spec_steps=int(obj["num_spec_steps"]),
                num_draft_tokens=int(obj["num_draft_tokens"]),
                num_accepted_draft_tokens=int(obj["num_accepted_draft_tokens"]),
                num_spec_tokens=int(k) if k is not None else None,
                acceptance_histogram=hist,
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One decoded SSE chunk of a generation (one per chunk, not per token)."""

    t: float
    """Client clock when the chunk arrived."""
    text: str
    """New output text (completions `text`, chat `delta.content`)."""
    tokens: int
    """Tokens this chunk carried (from usage differences, token_ids, or an estimate)."""
    completion_tokens: int
    """Cumulative completion tokens so far (the final usage chunk makes it the exact total)."""
    token_ids: Sequence[int] | None = None
    """This chunk's token ids when the server sends them (`return_token_ids`)."""
    finish_reason: str | None = None
    """Set on the last output chunk: 'length', 'stop', …"""
    reasoning: str = ""
    """Chat reasoning text (`delta.reasoning` / `delta.reasoning_content`), kept apart from `text`."""
    output: bool = True
    """False for chunks that carry no output: the chat role-only first chunk, the usage-only chunk."""
    estimated: bool = False
    """True when `tokens` is a text-based estimate (the server sent neither usage nor token ids)."""
    exact: bool = True
    """True when `completion_tokens` is exact (continuous usage, token ids, or the final usage)."""
    prompt_tokens: int | None = None
    """Prompt tokens, when this chunk carried usage."""
    timings: LlamaTimings | None = None
    """llama-server's `timings` on this chunk (the final one; every one with `timings_per_token`)."""
    spec_metrics: RequestSpecMetrics | None = None
    """vLLM's per-request speculative-decoding metrics, on the final usage chunk when enabled."""


def _text_of(choice: dict[str, Any]) -> tuple[str, str, bool]:
    """(text, reasoning, whether the chunk is output) of a completions or chat choice."""
    delta = choice.get("delta")
    if delta is None:  # /v1/completions
        return choice.get("text") or "", "", True
    content = delta.get("content")
    text = content or ""
    reasoning = delta.get("reasoning") or delta.get("reasoning_content") or ""
    # As `vllm bench serve`: the role-only first chunk is no output; an empty content
    # string without a role is (it advances the last-token time).
    output = bool(text) if "role" in delta else content is not None
    return text, reasoning, output or bool(reasoning or delta.get("tool_calls"))


@dataclass(slots=True, eq=False)
class ChunkDecoder:
    """SSE payload → `StreamEvent`, holding the running token count of one stream (hot path)."""

    count: int = 0
    """Cumulative completion tokens so far."""
    exact: bool = True
    """False once a chunk had to be estimated (until the final usage restores the exact total)."""
    prompt_tokens: int | None = None
    finish_reason: str | None = None

    def decode(self, payload: bytes | str, t: float) -> StreamEvent | None:
        """Decode one `data:` payload (not `[DONE]`); None for events that carry nothing to show.
        Raises ChunkError for an error event or a payload that is not a JSON object."""
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than json can read
            raw = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload
            raise ChunkError(f"the server sent a malformed stream event: {one_line(raw, 80)!r}") from exc
        if not isinstance(obj, dict):
            raise ChunkError(f"the server sent an unexpected stream event: {one_line(str(obj), 80)!r}")
        if "error" in obj or obj.get("object") == "error":
            message = openai_error_message(obj) or "no message"
            raise ChunkError(f"the server reported an error mid-stream: {message}")
        try:
            return self._decode(obj, t)
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise ChunkError(
                f"the server sent a stream event of unexpected shape: {one_line(str(obj), 80)!r}"
            ) from exc

    def _final_usage(
        self, obj: dict[str, Any], t: float, ct: int, timings: LlamaTimings | None
    ) -> StreamEvent:
        """The final usage chunk (no choices): the exact total, whatever the chunks said, and
        vLLM's per-request spec metrics when it sends them."""
        self.count = ct
        self.exact = True
        metrics = obj.get("metrics")
        spec = (
            RequestSpecMetrics.from_json(metrics.get("speculative_decoding"))
            if isinstance(metrics, dict)
            else None
        )
        return StreamEvent(
            t, "", 0, ct, output=False, prompt_tokens=self.prompt_tokens, spec_metrics=spec, timings=timings
        )

    def _decode(self, obj: dict[str, Any], t: float) -> StreamEvent | None:
        usage = obj.get("usage")
        ct: int | None = None
        final_usage = False
        if usage:
            ct = usage.get("completion_tokens")
            pt = usage.get("prompt_tokens")
            if pt is not None:
                self.prompt_tokens = pt
        timings = LlamaTimings.from_json(obj.get("timings"))
        if timings is not None:
            if ct is None:
                ct = timings.predicted_n  # llama-server: tokens generated so far
            else:
                final_usage = True  # llama-server's last chunk: choices + usage + timings
        choices = obj.get("choices")
        if not choices:
            return None if ct is None else self._final_usage(obj, t, ct, timings)
        choice = choices[0]
        if choice.get("index", 0) != 0:
            return None  # n > 1 is not used; only the first choice is followed
        text, reasoning, output = _text_of(choice)
        ids = choice.get("token_ids")
        finish = choice.get("finish_reason")
        if finish is not None:
            self.finish_reason = finish
        estimated = False
        if ct is not None:
            tokens = ct - self.count if ct > self.count else 0
            if ct > self.count or final_usage or finish is not None:
                self.count = ct  # the last chunk's usage is the total, even below an estimate
            self.exact = True
        elif ids:
            tokens = len(ids)
            self.count += tokens
        else:
            tokens = estimate_tokens(text) + estimate_tokens(reasoning)
            if tokens:
                estimated = True
                self.exact = False
                self.count += tokens
        pt = self.prompt_tokens if ct is not None else None
        return StreamEvent(
            t, text, tokens, self.count, ids, finish, reasoning, output, estimated, self.exact, pt, timings
        )


@dataclass(frozen=True, slots=True)
class GenerationResult:
    """The client-side numbers of one finished (or broken, or cancelled) generation."""

    text: str
    """Output text received (everything up to an error or a cancel)."""
    reasoning: str
    """Chat reasoning text received, kept apart from `text`."""
    token_ids: tuple[int, ...] | None
    prompt_tokens: int | None
    """From the server's usage, when it sent any."""
    completion_tokens: int
    """Completion tokens: the final usage total when sent, else the running count."""
    ttft_s: float | None
    """It, `decode_tok_s` and `e2e_tok_s`: as `vllm bench serve` (module docstring)."""
    decode_tok_s: float | None
    e2e_tok_s: float | None
    tokens_per_chunk: Mapping[int, int]
    """Histogram: tokens a chunk carried → number of chunks (estimated when `approximate`)."""
    chunks: int
    """Chunks that carried at least one token."""
    finish_reason: str | None
    """'length', 'stop', …; None when the stream did not finish."""
    approximate: bool
    """Some per-chunk token counts were estimated (no per-chunk usage or token ids from the server)."""
    tokens_exact: bool
    """`completion_tokens` came from the server (usage or token ids), even when `approximate`."""
    error: str | None = None
    """One line when the request or the stream failed; everything received before is kept."""
    cancelled: bool = False
    fallback: str | None = None
    """Why per-chunk counting fell back (server refused or ignored continuous usage), if it did."""
    t_start: float | None = None
    """Client clock when the request was sent."""
    t_first: float | None = None
    t_last: float | None = None
    t_end: float | None = None
    """Client clock when the result was made."""
    spec_metrics: RequestSpecMetrics | None = None
    timings: LlamaTimings | None = None
    """llama-server's last `timings` of this request (its draft counts)."""
    itl_s: tuple[float, ...] = ()
    """Gaps between successive chunks with output: `vllm bench serve`'s ITL list of this request."""


@dataclass(slots=True, eq=False)
class GenerationStats:
    """Accumulates the `StreamEvent`s of one generation; `finish()` freezes them into a result."""

    clock: Callable[[], float] = time.perf_counter
    _text: list[str] = field(default_factory=list, init=False)
    _reasoning: list[str] = field(default_factory=list, init=False)
    _ids: list[int] | None = field(default=None, init=False)
    _hist: dict[int, int] = field(default_factory=dict, init=False)
    _gaps: list[float] = field(default_factory=list, init=False)
    t_start: float | None = field(default=None, init=False)
    t_first: float | None = field(default=None, init=False)
    t_last: float | None = field(default=None, init=False)
    completion_tokens: int = field(default=0, init=False)
    prompt_tokens: int | None = field(default=None, init=False)
    chunks: int = field(default=0, init=False)
    exact: bool = field(default=True, init=False)
    approximate: bool = field(default=False, init=False)
    finish_reason: str | None = field(default=None, init=False)
    fallback: str | None = field(default=None, init=False)
    spec_metrics: RequestSpecMetrics | None = field(default=None, init=False)
    timings: LlamaTimings | None = field(default=None, init=False)

    def start(self, t: float | None = None) -> None:
        """Mark the request as sent (the client calls this; again if it retries without an extension)."""
        self.t_start = self.clock() if t is None else t

    def add(self, event: StreamEvent) -> None:
        """Take one event (cheap: a few attribute updates)."""
        if self.t_start is None:
            self.t_start = event.t
        if event.output:
            if self.t_first is None:
                self.t_first = event.t
            elif self.t_last is not None:
                self._gaps.append(event.t - self.t_last)
            self.t_last = event.t
        tokens = event.tokens
        if tokens > 0:
            self.chunks += 1
            self._hist[tokens] = self._hist.get(tokens, 0) + 1
        if event.text:
            self._text.append(event.text)
        if event.reasoning:
            self._reasoning.append(event.reasoning)
        if event.token_ids:
            if self._ids is None:
                self._ids = []
            self._ids.extend(event.token_ids)
        self.approximate = self.approximate or event.estimated
        self.exact = event.exact
        self.completion_tokens = event.completion_tokens
        if event.prompt_tokens is not None:
            self.prompt_tokens = event.prompt_tokens
        if event.finish_reason is not None:
            self.finish_reason = event.finish_reason
        self.spec_metrics = event.spec_metrics or self.spec_metrics
        self.timings = event.timings or self.timings

    def finish(
        self, *, error: str | None = None, cancelled: bool = False, t: float | None = None
    ) -> GenerationResult:
        """Freeze what was received into a `GenerationResult` (also after an error or a cancel)."""
        tokens, t_start, t_first, t_last = self.completion_tokens, self.t_start, self.t_first, self.t_last
        fallback = self.fallback
        if fallback is None and self.approximate:
            fallback = (
                "the server sent no per-chunk usage; per-chunk token counts are estimated from the text"
            )
        return GenerationResult(
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            token_ids=tuple(self._ids) if self._ids is not None else None,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=tokens,
            ttft_s=F.ttft_s(t_start, t_first),
            decode_tok_s=F.decode_tok_s(tokens, t_first, t_last),
            e2e_tok_s=F.e2e_tok_s(tokens, t_start, t_last),
            tokens_per_chunk=MappingProxyType(dict(sorted(self._hist.items()))),
            chunks=self.chunks,
            finish_reason=self.finish_reason,
            approximate=self.approximate,
            tokens_exact=self.exact,
            error=error,
            cancelled=cancelled,
            fallback=fallback,
            t_start=t_start,
            t_first=t_first,
            t_last=t_last,
            t_end=self.clock() if t is None else t,
            spec_metrics=self.spec_metrics,
            timings=self.timings,
            itl_s=tuple(self._gaps),
        )
