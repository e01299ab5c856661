"""The simulator's /metrics: a prometheus_client registry with vLLM 0.32's exact families.

Names, types, HELP texts, label names, bucket bounds and series order follow the real vLLM 0.32
pages in tests/data/metrics-*-after.txt (a test compares them). Every series is created at start-up
at 0, as vLLM does; the spec-decode families exist only with speculation on, with `position`
0..k-1. A restart builds a new `SimMetrics`, so the `_created` series change.

`frontend="rust"` serves the page as vLLM 0.33/0.34's Rust frontend does (`VLLM_USE_RUST_FRONTEND=1`,
`vllm-rs serve`; read in the 0.34.0 sdist's `rust/src/`): OpenMetrics 1.0 (`prometheus-client` crate,
`metrics/src/lib.rs` `render`), no `_created` sample and no `process_*`/`python_*` family (the crate's
registry holds only vLLM's and `http_*` families); the three spec-decode totals exist from start-up
whether or not the server speculates (`engine-core-client/src/metrics.rs:275`, created per engine),
and the per-position children appear at the first step that drafted (`:388`, `get_or_create`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.openmetrics.exposition import ALLOWUTF8
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest

Frontend = Literal["python", "rust"]
OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
"""The Rust frontend's content type (`rust/src/server/src/routes/metrics.rs:10`)."""
PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LATENCY_BUCKETS = (
    *(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0),
    *(30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0),
)
TTFT_BUCKETS = (
    *(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75),
    *(1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
)
ITL_BUCKETS = (
    *(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5),
    *(0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0),
)
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
LATENCY_HISTOGRAMS = {
    "e2e": ("vllm:e2e_request_latency_seconds", "e2e request latency in seconds"),
    "queue": ("vllm:request_queue_time_seconds", "time spent in WAITING phase for request"),
    "inference": ("vllm:request_inference_time_seconds", "time spent in RUNNING phase for request"),
    "prefill": ("vllm:request_prefill_time_seconds", "time spent in PREFILL phase for request"),
    "decode": ("vllm:request_decode_time_seconds", "time spent in DECODE phase for request"),
}
"""A finished request's latencies (`observe_finished`'s keywords): family and HELP, in vLLM's order."""


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """vLLM's 1-2-5 series up to ``max_value`` (request token histograms use max_model_len)."""
    series = (mantissa * 10**exponent for exponent in range(len(str(max_value))) for mantissa in (1, 2, 5))
    return [value for value in series if value <= max_value]


class SimMetrics:
    """All vLLM series of one engine, in one registry; methods mirror where vLLM updates them."""

    def __init__(
        self,
        *,
        model_name: str,
        k: int,
        max_model_len: int,
        cache_info: dict[str, str],
        frontend: Frontend = "python",
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        self.frontend: Frontend = frontend
        if frontend == "python":
            ProcessCollector(registry=reg)
            PlatformCollector(registry=reg)
            GCCollector(registry=reg)
        self.k = k
        self._lv = {"model_name": model_name, "engine": "0"}
        self._names = list(self._lv)
        if k > 0 or frontend == "rust":
            self._spec_series(k)
        self._gpu_and_queue_series()
        self._token_and_request_series()
        self._request_histograms(max_model_len)
        info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            labelnames=sorted([*cache_info, "engine"]),
            registry=reg,
        )
        info.labels(**cache_info, engine="0").set(1)
        self._first_children(model_name)

    # vLLM creates every child series at start-up, so they export 0 before any traffic
    def _counter(self, name: str, doc: str, extra: Sequence[str] = ()) -> Counter:
        c = Counter(name, doc, labelnames=[*self._names, *extra], registry=self.registry)
        if not extra:
            c.labels(**self._lv)
        return c

    def _gauge(self, name: str, doc: str, extra: Sequence[str] = ()) -> Gauge:
        g = Gauge(name, doc, labelnames=[*self._names, *extra], registry=self.registry)
        if not extra:
            g.labels(**self._lv)
        return g

    def _hist(self, name: str, doc: str, buckets: Sequence[float]) -> Histogram:
        h = Histogram(name, doc, labelnames=self._names, buckets=list(buckets), registry=self.registry)
        h.labels(**self._lv)
        return h

    # The series in vLLM's registration order: the page lists them in this order.
    def _spec_series(self, k: int) -> None:
        """The speculative-decoding counters, one per-position child per draft position."""
        self.drafts = self._counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.")
        self.draft_tokens = self._counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.")
        self.accepted = self._counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.")
        self.per_pos = self._counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            ["position"],
        )
        if self.frontend == "python":
            for pos in range(k):
                self.per_pos.labels(**self._lv, position=str(pos))

    def _gpu_and_queue_series(self) -> None:
        """MFU estimates, the scheduler's gauges, the KV and prefix caches, preemptions."""
        mfu = "(for Model Flops Utilization calculations)."
        self._counter(
            "vllm:estimated_flops_per_gpu", f"Estimated number of floating point operations per GPU {mfu}"
        )
        self.est_read = self._counter(
            "vllm:estimated_read_bytes_per_gpu", f"Estimated number of bytes read from memory per GPU {mfu}"
        )
        self._counter(
            "vllm:estimated_write_bytes_per_gpu", f"Estimated number of bytes written to memory per GPU {mfu}"
        )
        self.running = self._gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        )
        self.waiting = self._gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.waiting_by_reason = self._gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
            "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked "
            "status). Sum of all reasons equals vllm:num_requests_waiting.",
            ["reason"],
        )
        self.sleep_state = self._gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
            ["sleep_state"],
        )
        self.kv_usage = self._gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prefix_queries = self._counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self._counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        ext = "from KV connector cross-instance cache sharing, in terms of number of"
        self._counter(
            "vllm:external_prefix_cache_queries", f"External prefix cache queries {ext} queried tokens."
        )
        self._counter("vllm:external_prefix_cache_hits", f"External prefix cache hits {ext} cached tokens.")
        self._counter(
            "vllm:mm_cache_queries", "Multi-modal cache queries, in terms of number of queried items."
        )
        self._counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.")
        self._counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")

    def _token_and_request_series(self) -> None:
        """Token counters, finished requests and admission rejections."""
        self.prompt_tokens = self._counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.prompt_by_source = self._counter(
            "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", ["source"]
        )
        self._counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).")
        self.cached_by_source = self._counter(
            "vllm:prompt_tokens_cached_by_source",
            "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host "
            "(offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
            "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
            "vllm:external_prefix_cache_hits.",
            ["source"],
        )
        self.generation_tokens = self._counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        self.request_success = self._counter(
            "vllm:request_success", "Count of successfully processed requests.", ["finished_reason"]
        )
        self.rejections = Counter(
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            labelnames=["model_name", "reason"],
            registry=self.registry,
        )

    def _request_histograms(self, max_model_len: int) -> None:
        """Per-request and per-step histograms (token buckets up to the model's length)."""
        token_buckets = build_1_2_5_buckets(max_model_len)
        self.req_prompt_tokens = self._hist(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self.req_generation_tokens = self._hist(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", token_buckets
        )
        self.iteration_tokens = self._hist(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_BUCKETS
        )
        self.req_max_gen = self._hist(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            token_buckets,
        )
        self.req_n = self._hist(
            "vllm:request_params_n", "Histogram of the n request parameter.", (1, 2, 5, 10, 20)
        )
        self.req_max_tokens = self._hist(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", token_buckets
        )
        self.ttft = self._hist(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = self._hist(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.tpot = self._hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.latency = {
            key: self._hist(name, f"Histogram of {what}.", LATENCY_BUCKETS)
            for key, (name, what) in LATENCY_HISTOGRAMS.items()
        }
        self.req_preemptions = self._hist(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            (1, 2, 3, 4, 5, 10, 20),
        )
        self.req_kv_computed = self._hist(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            token_buckets,
        )

    def _first_children(self, model_name: str) -> None:
        """The labelled children vLLM creates at start-up, so they export 0 before any traffic."""
        for reason in ("max_num_queued_reqs", "max_num_queued_tokens"):
            self.rejections.labels(model_name=model_name, reason=reason)
        for reason in ("capacity", "deferred"):
            self.waiting_by_reason.labels(**self._lv, reason=reason)
        for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            self.sleep_state.labels(**self._lv, sleep_state=state).set(value)
        for source in ("local_compute", "local_cache_hit", "external_kv_transfer"):
            self.prompt_by_source.labels(**self._lv, source=source)
        for source in ("device", "host", "p2p", "disk", "external_unspecified"):
            self.cached_by_source.labels(**self._lv, source=source)
        for reason in FINISHED_REASONS:
            self.request_success.labels(**self._lv, finished_reason=reason)

    # -- updates, named after the vLLM events that make them --------------------------------------
    def observe_draft(self, num_draft_tokens: int, num_accepted: int) -> None:
        """One verify step of one request (SpecDecodingStats.observe_draft)."""
        lv = self._lv
        self.drafts.labels(**lv).inc()
        self.draft_tokens.labels(**lv).inc(num_draft_tokens)
        self.accepted.labels(**lv).inc(num_accepted)
        for pos in range(num_accepted):
            self.per_pos.labels(**lv, position=str(pos)).inc()
        if self.frontend == "rust":
            for pos in range(num_accepted, self.k):
                self.per_pos.labels(**lv, position=str(pos))  # every position from the first draft

    def observe_step(
        self,
        *,
        prompt_tokens: int,
        generation_tokens: int,
        itls: Sequence[float],
        ttfts: Sequence[float],
        read_bytes: float | None,
    ) -> None:
        """Frontend IterationStats of one engine step that produced output."""
        lv = self._lv
        if prompt_tokens:
            self.prompt_tokens.labels(**lv).inc(prompt_tokens)
            self.prompt_by_source.labels(**lv, source="local_compute").inc(prompt_tokens)
            self.prefix_queries.labels(**lv).inc(prompt_tokens)
        self.generation_tokens.labels(**lv).inc(generation_tokens)
        self.iteration_tokens.labels(**lv).observe(prompt_tokens + generation_tokens)
        for value in ttfts:
            self.ttft.labels(**lv).observe(value)
        for value in itls:
            self.itl.labels(**lv).observe(value)
        if read_bytes is not None:
            self.est_read.labels(**lv).inc(read_bytes)

    def observe_scheduler(self, *, running: int, waiting: int, kv_usage: float) -> None:
        """SchedulerStats of one step."""
        lv = self._lv
        self.running.labels(**lv).set(running)
        self.waiting.labels(**lv).set(waiting)
        self.waiting_by_reason.labels(**lv, reason="capacity").set(waiting)
        self.kv_usage.labels(**lv).set(kv_usage)

    def observe_finished(
        self,
        *,
        reason: str,
        prompt_tokens: int,
        generation_tokens: int,
        max_tokens: int,
        e2e: float,
        queue: float,
        prefill: float,
        decode: float,
        inference: float,
    ) -> None:
        """A finished request (FinishedRequestStats)."""
        lv = self._lv
        self.request_success.labels(**lv, finished_reason=reason).inc()
        self.req_prompt_tokens.labels(**lv).observe(prompt_tokens)
        self.req_generation_tokens.labels(**lv).observe(generation_tokens)
        self.req_max_gen.labels(**lv).observe(max_tokens)
        self.req_n.labels(**lv).observe(1)
        self.req_max_tokens.labels(**lv).observe(max_tokens)
        seconds = {"e2e": e2e, "queue": queue, "inference": inference, "prefill": prefill, "decode": decode}
        for key, histogram in self.latency.items():
            histogram.labels(**lv).observe(seconds[key])
        self.req_preemptions.labels(**lv).observe(0)
        self.req_kv_computed.labels(**lv).observe(prompt_tokens)
        if generation_tokens > 1:
            self.tpot.labels(**lv).observe(decode / (generation_tokens - 1))

    @property
    def content_type(self) -> str:
        """The page's Content-Type: Prometheus text 0.0.4, or OpenMetrics for the Rust frontend."""
        return OPENMETRICS_TYPE if self.frontend == "rust" else PROMETHEUS_TYPE

    def render(self, names: Sequence[str] | None = None) -> bytes:
        """The exposition text; with `names`, only those samples (prometheus_client's
        `restricted_registry`, what `/metrics/?name[]=…` serves on vLLM)."""
        registry = self.registry if names is None else self.registry.restricted_registry(names)
        if self.frontend == "python":
            return bytes(generate_latest(registry))
        # names as written (`vllm:…`): prometheus_client's default escapes the colon in sample names
        return _without_created(bytes(openmetrics_latest(registry, escaping=ALLOWUTF8)))  # type: ignore[no-untyped-call]


def _without_created(page: bytes) -> bytes:
    """An OpenMetrics page as the Rust frontend writes it: no `_created` samples (the crate writes
    none for these families)."""
    return b"".join(
        line
        for line in page.splitlines(keepends=True)
        if line.startswith(b"#") or b"_created" not in line.split(b"{", 1)[0].split(b" ", 1)[0]
    )
