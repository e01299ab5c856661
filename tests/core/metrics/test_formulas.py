"""Each formula of core.metrics.formulas against vLLM's own numbers.

vLLM 0.32 prints, every 10 s, `SpecDecoding metrics: Mean acceptance length: %.2f, …, Accepted: N
tokens, Drafted: N tokens, Per-position acceptance rate: %.3f, …, Avg Draft acceptance rate: %.1f%%`
(`SpecDecodingLogging.log()`); tests/data/spec-log-lines.txt holds those lines from real runs, and
tests/data/metrics-ngram-k4-{before,after}.txt the /metrics pages around the ngram run's first two
intervals. The counters are read here with prometheus_client's parser, not with mtpwatch's.
The per-request form is checked against the example of vLLM PR #48915 (`metrics.speculative_decoding`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mtpwatch.core.metrics import formulas as F
from tests.datadir import DataDir

SPEC_LINE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: ([\d.]+), .*?Accepted: (\d+) tokens, "
    r"Drafted: (\d+) tokens, Per-position acceptance rate: ([\d., ]+?), Avg Draft acceptance rate: ([\d.]+)%"
)


@dataclass(frozen=True)
class LogLine:
    """One `SpecDecoding metrics` line, its figures as vLLM printed them."""

    section: str
    mean_acceptance_length: str
    accepted: int
    drafted: int
    per_position: list[str]
    rate_pct: str


def log_lines(data: DataDir) -> list[LogLine]:
    out: list[LogLine] = []
    for section in data.text("spec-log-lines.txt").split("### ")[1:]:
        title = section.splitlines()[0]
        for m in SPEC_LINE.finditer(section):
            out.append(
                LogLine(
                    title, m.group(1), int(m.group(2)), int(m.group(3)), m.group(4).split(", "), m.group(5)
                )
            )
    return out


def logged(line: LogLine, accepted_per_pos: tuple[int, ...], drafts: int) -> LogLine:
    """What vLLM would print for these counts, through mtpwatch's formulas and vLLM's formats."""
    mal = F.mean_acceptance_length(line.accepted, drafts)
    rate = F.acceptance_rate(line.accepted, line.drafted)
    assert mal is not None and rate is not None
    return LogLine(
        line.section,
        f"{mal:.2f}",
        line.accepted,
        line.drafted,
        [f"{p:.3f}" for p in F.per_position_marginal(accepted_per_pos, drafts)],
        f"{100 * rate:.1f}",
    )


def draft_counts(line: LogLine) -> list[int]:
    """The whole numbers of drafts (each of 1 … k tokens) whose per-position accepts, rounded from the
    logged rates and summing to the logged `Accepted`, print exactly the logged line."""
    k = len(line.per_position)
    fits = []
    for drafts in range(-(-line.drafted // k), line.drafted + 1):
        per_pos = tuple(round(float(p) * drafts) for p in line.per_position)
        if sum(per_pos) == line.accepted and logged(line, per_pos, drafts) == line:
            fits.append(drafts)
    return fits


def spec_counters(text: str) -> dict[str, float]:
    """The spec-decode counters of a page, summed over engines; per position as `per_pos_<i>`."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("vllm:") and not s.name.endswith("_created"):
                key = s.name + (f"@{s.labels['position']}" if "position" in s.labels else "")
                key = key + (f"@{s.labels['finished_reason']}" if "finished_reason" in s.labels else "")
                out[key] = out.get(key, 0.0) + s.value
    return out


def delta(data: DataDir, before: str, after: str) -> dict[str, float]:
    b, a = spec_counters(data.text(before)), spec_counters(data.text(after))
    return {k: a[k] - b.get(k, 0.0) for k in a}


DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total@"


def test_counter_deltas_of_real_pages_give_vllms_logged_lines(data: DataDir) -> None:
    """The pages span log lines 1 and 2 of the ngram k=4 run; split the delta between them.

    Line 2 drafted 8 tokens and accepted all 8, so with k=4 it had 8/4 = 2 drafts and 2 accepted tokens
    at every position; line 1 is the page delta minus line 2. Both lines must come out of the formulas
    digit for digit.
    """
    d = delta(data, "metrics-ngram-k4-before.txt", "metrics-ngram-k4-after.txt")
    k = len([key for key in d if key.startswith(PER_POS)])
    per_pos = tuple(int(d[f"{PER_POS}{i}"]) for i in range(k))
    drafts, drafted, accepted = int(d[DRAFTS]), int(d[DRAFT_TOKENS]), int(d[ACCEPTED])
    assert k == 4 and drafted == k * drafts  # ngram drafts k tokens each on this run
    assert sum(per_pos) == accepted

    first, second = [line for line in log_lines(data) if line.section.startswith("server log: ngram on")][:2]
    assert second.accepted == second.drafted  # every drafted token accepted
    second_drafts = second.drafted // k
    second_per_pos = (second_drafts,) * k
    first_per_pos = tuple(p - s for p, s in zip(per_pos, second_per_pos, strict=True))
    first_drafts = drafts - second_drafts
    assert (first.accepted, first.drafted) == (accepted - second.accepted, drafted - second.drafted)

    assert logged(first, first_per_pos, first_drafts) == first
    assert logged(second, second_per_pos, second_drafts) == second
    assert first.mean_acceptance_length == "4.76" and first.per_position == ["0.939"] * 4  # not vacuous

    # The whole window: the per-position counts add up to the accepted count.
    mal = F.mean_acceptance_length(accepted, drafts)
    residual = F.self_check_residual(F.per_position_marginal(per_pos, drafts), mal)
    assert residual == pytest.approx(0.0, abs=1e-12)


def test_every_logged_line_has_integer_counts_that_give_its_numbers(data: DataDir) -> None:
    """For each logged line there are whole numbers of drafts and per-position accepts (summing to the
    logged `Accepted`) for which the formulas print exactly vLLM's mean acceptance length, per-position
    rates and acceptance %. A formula off by the bonus token, or dividing by drafted tokens instead of
    drafts, finds none for most of these lines."""
    lines = log_lines(data)
    assert len(lines) == data.text("spec-log-lines.txt").count("SpecDecoding metrics:") >= 10
    for line in lines:
        assert draft_counts(line), f"no draft count reproduces {line}"


def test_wrong_formulas_would_not_reproduce_the_logged_lines(data: DataDir) -> None:
    """The search above is strict enough: without the bonus token no count fits line 1."""
    line = log_lines(data)[0]
    fits = [
        n
        for n in range(1, line.drafted + 1)
        if f"{line.accepted / n:.2f}" == line.mean_acceptance_length
        and [f"{round(float(p) * n) / n:.3f}" for p in line.per_position] == line.per_position
        and sum(round(float(p) * n) for p in line.per_position) == line.accepted
    ]
    assert fits == []


def test_conditional_rates_from_counts_and_from_marginals_agree(data: DataDir) -> None:
    """On the counts of a logged line with zero positions: P(i | 0…i−1), None after a position at 0."""
    line = next(ln for ln in log_lines(data) if "0.000" in ln.per_position[:-1] and ln.accepted > 0)
    drafts = draft_counts(line)[0]
    per_pos = tuple(round(float(p) * drafts) for p in line.per_position)
    conditional = F.per_position_conditional(per_pos, drafts)
    from_marginal = F.conditional_from_marginal(F.per_position_marginal(per_pos, drafts))
    assert len(conditional) == len(from_marginal) == len(per_pos)
    for i, (c, m) in enumerate(zip(conditional, from_marginal, strict=True)):
        if i > 0 and per_pos[i - 1] == 0:
            assert c is None and m is None
        else:
            assert c is not None and m is not None
            assert c == pytest.approx(m)
            assert c == pytest.approx(per_pos[i] / (drafts if i == 0 else per_pos[i - 1]))
    assert None in conditional


# vLLM PR #48915, the example of `metrics.speculative_decoding` (k=3): index j of the histogram = verify
# steps that accepted exactly j drafts.
PER_REQUEST = {
    "mean_acceptance_length": 1.2325581395348837,
    "draft_acceptance_rate": 0.07751937984496124,
    "acceptance_histogram": [39, 1, 0, 3],
    "num_spec_steps": 43,
    "num_accepted_draft_tokens": 10,
    "num_draft_tokens": 129,
    "num_spec_tokens": 3,
}


def test_per_request_histogram_form_gives_vllms_per_request_numbers() -> None:
    hist = PER_REQUEST["acceptance_histogram"]
    steps = PER_REQUEST["num_spec_steps"]
    accepted = PER_REQUEST["num_accepted_draft_tokens"]
    drafted = PER_REQUEST["num_draft_tokens"]
    assert isinstance(hist, list) and isinstance(steps, int) and isinstance(accepted, int)
    assert isinstance(drafted, int)
    assert sum(hist) == steps and sum(j * h for j, h in enumerate(hist)) == accepted

    mal = F.mean_acceptance_length(accepted, steps)
    assert mal == pytest.approx(PER_REQUEST["mean_acceptance_length"], rel=1e-15)
    rate = F.acceptance_rate(accepted, drafted)
    assert rate == pytest.approx(PER_REQUEST["draft_acceptance_rate"], rel=1e-15)

    # Position i is accepted in the steps that accepted more than i drafts: 1+0+3, 0+3, 3 of 43.
    marginal = F.per_position_from_histogram(hist, steps)
    assert marginal == pytest.approx((4 / 43, 3 / 43, 3 / 43))
    assert len(marginal) == PER_REQUEST["num_spec_tokens"]
    # The same as the counter form given the per-position counts the histogram implies.
    per_pos = tuple(sum(hist[i + 1 :]) for i in range(len(hist) - 1))
    assert marginal == pytest.approx(F.per_position_marginal(per_pos, steps))
    assert F.self_check_residual(marginal, mal) == pytest.approx(0.0, abs=1e-12)


def test_histogram_means_follow_vllms_itl_and_tpot_definitions(data: DataDir) -> None:
    """ITL is observed once per engine step, TPOT once per request as decode time / (tokens − 1).

    Both sum the same decode time, so mean ITL / mean TPOT = (tokens − 1) · requests / ITL count:
    tokens per step, above 1 under speculation.
    """
    d = delta(data, "metrics-ngram-k4-before.txt", "metrics-ngram-k4-after.txt")
    requests = d["vllm:request_time_per_output_token_seconds_count"]
    assert requests == d["vllm:request_success_total@length"] == 2  # both ran to max_tokens
    tokens = d["vllm:generation_tokens_total"] / requests
    itl = F.histogram_mean(
        d["vllm:inter_token_latency_seconds_sum"], d["vllm:inter_token_latency_seconds_count"]
    )
    tpot = F.histogram_mean(
        d["vllm:request_time_per_output_token_seconds_sum"],
        d["vllm:request_time_per_output_token_seconds_count"],
    )
    assert itl is not None and tpot is not None
    steps = d["vllm:inter_token_latency_seconds_count"]
    assert itl / tpot == pytest.approx((tokens - 1) * requests / steps, rel=1e-3)
    assert itl / tpot > 1.5


def test_client_side_times_follow_vllm_bench_serve(data: DataDir) -> None:
    """`vllm bench serve`: ttft = first token − start, tpot = (latency − ttft) / (output_len − 1)."""
    summary = next(
        line
        for line in data.text("sse-ngram-k4-completions.txt").splitlines()
        if line.startswith("# summary:")
    )
    m = re.search(r'"completion_tokens": (\d+).*"ttft_s": ([\d.]+), "total_s": ([\d.]+)', summary)
    assert m is not None
    n, ttft, latency = int(m.group(1)), float(m.group(2)), float(m.group(3))
    start = 1000.0  # any clock origin
    assert F.ttft_s(start, start + ttft) == pytest.approx(ttft)
    tpot = (latency - ttft) / (n - 1)
    assert F.decode_tok_s(n, start + ttft, start + latency) == pytest.approx(1 / tpot)
    assert F.e2e_tok_s(n, start, start + latency) == pytest.approx(n / latency)


def test_baseline_page_has_no_spec_counters_and_every_ratio_is_none(data: DataDir) -> None:
    d = delta(data, "metrics-baseline-before.txt", "metrics-baseline-after.txt")
    drafts, drafted, accepted = d.get(DRAFTS, 0.0), d.get(DRAFT_TOKENS, 0.0), d.get(ACCEPTED, 0.0)
    assert drafts == drafted == accepted == 0.0
    assert F.acceptance_rate(accepted, drafted) is None
    assert F.mean_acceptance_length(accepted, drafts) is None
    assert F.per_position_marginal((), drafts) == ()
    assert F.per_position_conditional((), drafts) == ()
    assert F.self_check_residual((), None) is None


def test_mtp_page_with_nothing_accepted_is_zero_not_none(data: DataDir) -> None:
    """Drafts happened, none accepted: rates are 0 and the mean acceptance length is 1, as vLLM logs."""
    c = spec_counters(data.text("metrics-mtp-k1-random-after.txt"))
    drafts, accepted = c[DRAFTS], c[ACCEPTED]
    assert drafts > 0 and accepted == 0
    assert F.acceptance_rate(accepted, c[DRAFT_TOKENS]) == 0.0
    assert F.mean_acceptance_length(accepted, drafts) == 1.0
    assert F.per_position_marginal((c[f"{PER_POS}0"],), drafts) == (0.0,)
    assert F.per_position_conditional((c[f"{PER_POS}0"],), drafts) == (0.0,)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (F.ratio(1.0, 0.0), None),
        (F.ratio(1.0, -1.0), None),
        (F.acceptance_rate(0.0, 0.0), None),
        (F.mean_acceptance_length(0.0, 0.0), None),
        (F.per_position_marginal((0.0, 0.0), 0.0), ()),
        (F.per_position_conditional((0.0, 0.0), 0.0), ()),
        (F.conditional_from_marginal((0.5, 0.0, 0.0)), (0.5, 0.0, None)),
        (F.per_position_from_histogram([5, 0], 0), ()),
        (F.per_position_from_histogram([5], 5), ()),
        (F.self_check_residual((), 2.0), None),
        (F.self_check_residual((0.5,), None), None),
        (F.ttft_s(None, 1.0), None),
        (F.ttft_s(1.0, None), None),
        (F.decode_tok_s(1, 1.0, 2.0), None),
        (F.decode_tok_s(5, 2.0, 2.0), None),
        (F.decode_tok_s(5, None, 2.0), None),
        (F.e2e_tok_s(0, 1.0, 2.0), None),
        (F.e2e_tok_s(5, 2.0, 2.0), None),
        (F.histogram_mean(0.0, 0.0), None),
    ],
)
def test_zero_denominators_give_none_or_empty(value: object, expected: object) -> None:
    assert value == expected
