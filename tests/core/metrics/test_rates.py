"""Rates with vLLM's formulas, checked against vLLM's own log lines, plus windows, restarts, attribution."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from mtpwatch.core.metrics.rates import Collector, attribute, delta_rates, is_restart
from mtpwatch.core.metrics.snapshot import Histogram, MetricsSnapshot, parse_snapshot
from tests.datadir import DataDir
from tests.reference_metrics import self_check_ok

LOG_RE = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: ([\d.]+), .*?Accepted: (\d+) tokens, "
    r"Drafted: (\d+) tokens, Per-position acceptance rate: ([\d., ]+?), Avg Draft acceptance rate: ([\d.]+)%"
)


def log_intervals(data: DataDir, section_start: str) -> list[dict[str, Any]]:
    """The SpecDecoding log lines of one server run in tests/data/spec-log-lines.txt."""
    text = data.text("spec-log-lines.txt")
    section = text.split("### ")
    run = next(s for s in section if s.startswith(section_start))
    out = []
    for m in LOG_RE.finditer(run):
        out.append(
            {
                "mal": float(m.group(1)),
                "accepted": int(m.group(2)),
                "drafted": int(m.group(3)),
                "per_pos": m.group(4).split(", "),
                "rate_pct": m.group(5),
            }
        )
    return out


def snap(**kw: Any) -> MetricsSnapshot:
    base: dict[str, Any] = {"schema": "vllm", "model": "m", "models": ("m",), "engines": ("0",)}
    base.update(kw)
    return MetricsSnapshot(**base)


def test_ngram_k4_pages_reproduce_vllm_log_line(data: DataDir) -> None:
    """The before/after pages span the first two logged intervals of the ngram k=4 run.

    Log line 1: Accepted 184, Drafted 196, per-position 0.939 ×4, mean acceptance length 4.76.
    Log line 2: Accepted 8, Drafted 8, per-position 1.000 ×4 (mean acceptance length 5.00, so 2 drafts).
    The page delta (drafts 51, accepted 192, per position 48) is their sum, so the pages alone give
    48/51 = 0.941. We compare: (a) page delta == sum of the two logged intervals; (b) delta from the
    `before` page to an intermediate snapshot (= `after` minus interval 2, taken from the log) gives
    vLLM's 0.939 at every position, the logged acceptance rate and mean acceptance length; (c) the rest
    gives interval 2's 1.000.
    """
    before = parse_snapshot(data.text("metrics-ngram-k4-before.txt"))
    after = parse_snapshot(data.text("metrics-ngram-k4-after.txt"))
    first, second = log_intervals(data, "server log: ngram on gemma3-270m ('speculative")[:2]
    k = after.num_speculative_tokens
    assert k == len(first["per_pos"]) == 4

    whole = delta_rates(before, after, None, "between pages")
    assert whole.accepted == first["accepted"] + second["accepted"]
    assert whole.draft_tokens == first["drafted"] + second["drafted"]

    second_drafts = second["accepted"] / (second["mal"] - 1.0)
    second_per_pos = [float(p) * second_drafts for p in second["per_pos"]]
    mid = replace(
        after,
        drafts=after.drafts - second_drafts,
        draft_tokens=after.draft_tokens - second["drafted"],
        accepted=after.accepted - second["accepted"],
        accepted_per_pos=tuple(a - s for a, s in zip(after.accepted_per_pos, second_per_pos, strict=True)),
    )
    r1 = delta_rates(before, mid, 10.0, "log interval 1")
    assert [f"{p:.3f}" for p in r1.per_position] == first["per_pos"] == ["0.939"] * 4
    assert (
        r1.mean_acceptance_length is not None and f"{r1.mean_acceptance_length:.2f}" == f"{first['mal']:.2f}"
    )
    assert r1.acceptance_rate is not None and f"{100 * r1.acceptance_rate:.1f}" == first["rate_pct"]
    assert self_check_ok(r1)

    r2 = delta_rates(mid, after, 10.0, "log interval 2")
    assert [f"{p:.3f}" for p in r2.per_position] == second["per_pos"]

    # The pages alone: 48/51 per position, not the first log line's 0.939.
    assert whole.per_position == tuple(d / whole.drafts for d in whole.accepted_per_pos)
    assert [f"{p:.3f}" for p in whole.per_position] != first["per_pos"]


def test_mtp_k1_page_matches_its_log_lines(data: DataDir) -> None:
    after = parse_snapshot(data.text("metrics-mtp-k1-random-after.txt"))
    logged = log_intervals(data, "server log: mtp, tiny-mimo-mtp (random")
    r = delta_rates(
        replace(after, drafts=0, draft_tokens=0, accepted=0, accepted_per_pos=(0.0,)), after, None, "x"
    )
    assert r.draft_tokens == sum(i["drafted"] for i in logged)
    assert r.accepted == sum(i["accepted"] for i in logged) == 0
    assert [f"{p:.3f}" for p in r.per_position] == logged[0]["per_pos"]
    assert r.num_speculative_tokens == 1


def test_formulas_on_non_uniform_per_position() -> None:
    # Counters of the 2-request ngram run (real-vllm-on-cpu.md): drafts 312, per-pos 235/209/208/208.
    per_pos = (235.0, 209.0, 208.0, 208.0)
    before = snap(speculative=True, num_speculative_tokens=4, accepted_per_pos=(0.0,) * 4)
    after = snap(
        speculative=True,
        num_speculative_tokens=4,
        drafts=312.0,
        draft_tokens=1244.0,
        accepted=sum(per_pos),
        accepted_per_pos=per_pos,
        generation_tokens=1300.0,
    )
    r = delta_rates(before, after, 4.0, "w")
    assert r.acceptance_rate == pytest.approx(sum(per_pos) / 1244.0)
    assert r.mean_acceptance_length == pytest.approx(1 + sum(per_pos) / 312.0)
    assert r.per_position == pytest.approx([p / 312.0 for p in per_pos])
    assert r.per_position_conditional[0] == pytest.approx(per_pos[0] / 312.0)
    assert r.per_position_conditional[1:] == pytest.approx([per_pos[i] / per_pos[i - 1] for i in range(1, 4)])
    assert r.self_check_residual == pytest.approx(0.0, abs=1e-9) and self_check_ok(r)
    assert r.output_from_drafts == pytest.approx(sum(per_pos) / 1300.0)
    assert r.server_tok_s == pytest.approx(1300.0 / 4.0)


def test_self_check_flags_inconsistent_counters() -> None:
    after = snap(speculative=True, drafts=10.0, draft_tokens=20.0, accepted=15.0, accepted_per_pos=(8.0, 2.0))
    r = delta_rates(snap(speculative=True, accepted_per_pos=(0.0, 0.0)), after, 1.0, "w")
    assert r.self_check_residual == pytest.approx((1 + 1.0) - 2.5)
    assert self_check_ok(r) is False


def test_zero_denominators_give_none() -> None:
    s = snap(speculative=True, accepted_per_pos=(0.0, 0.0))
    r = delta_rates(s, s, 1.0, "w")
    assert r.acceptance_rate is None and r.mean_acceptance_length is None
    assert r.per_position == () and r.per_position_conditional == ()
    assert self_check_ok(r) is None and r.mean_step_s is None and r.mean_ttft_s is None
    assert r.server_tok_s == 0.0
    assert delta_rates(s, s, 0.0, "w").server_tok_s is None
    assert delta_rates(s, s, None, "w").server_tok_s is None


def test_conditional_after_zero_position_is_none() -> None:
    after = snap(speculative=True, drafts=10.0, draft_tokens=20.0, accepted=0.0, accepted_per_pos=(0.0, 0.0))
    r = delta_rates(snap(speculative=True, accepted_per_pos=(0.0, 0.0)), after, 1.0, "w")
    assert r.per_position_conditional == (0.0, None)


def test_counter_going_down_is_a_restart_never_negative() -> None:
    before = snap(generation_tokens=1000.0, prompt_tokens=50.0, drafts=300.0, accepted_per_pos=(200.0,))
    after = snap(generation_tokens=40.0, prompt_tokens=60.0, drafts=10.0, accepted_per_pos=(5.0,))
    assert is_restart(before, after)
    r = delta_rates(before, after, 1.0, "w")
    assert r.restarted
    assert r.generation_tokens == 40.0 and r.drafts == 10.0 and r.prompt_tokens == 60.0
    assert r.accepted_per_pos == (5.0,)
    assert all(v >= 0 for v in (r.generation_tokens, r.drafts, r.accepted, r.prompt_tokens))


def test_created_change_is_a_restart_even_when_counters_grow() -> None:
    before = snap(created=1000.0, generation_tokens=10.0)
    after = snap(created=2000.0, generation_tokens=50.0)
    assert is_restart(before, after)
    assert not is_restart(before, replace(after, created=1000.0))
    assert is_restart(before, replace(after, created=1000.0, model="other"))
    assert is_restart(before, MetricsSnapshot())  # stats gone (schema "none"): no common baseline


def test_histogram_means_and_steps_per_s() -> None:
    itl0 = Histogram(count=10.0, sum=0.5)
    itl1 = Histogram(count=30.0, sum=1.5)
    it0 = Histogram(count=10.0, sum=40.0)
    it1 = Histogram(count=20.0, sum=90.0)
    kw: dict[str, Any] = {"speculative": True, "accepted_per_pos": (0.0,)}
    before = snap(itl=itl0, iteration_tokens=it0, ttft=Histogram(1.0, 0.2), requests_running=1.0, **kw)
    after = snap(
        itl=itl1,
        iteration_tokens=it1,
        ttft=Histogram(3.0, 0.8),
        drafts=25.0,
        generation_tokens=60.0,
        requests_running=1.0,
        **kw,
    )
    r = delta_rates(before, after, 2.0, "w")
    assert r.mean_step_s == pytest.approx((1.5 - 0.5) / (30 - 10))
    assert r.mean_ttft_s == pytest.approx((0.8 - 0.2) / 2)
    assert r.tokens_per_step == pytest.approx(60.0 / 20.0)
    assert r.steps_per_s == pytest.approx(25.0 / 2.0)  # drafts
    # Two requests running: drafts and ITL count once per request per step; iteration_tokens per step.
    r2 = delta_rates(before, replace(after, requests_running=2.0), 2.0, "w")
    assert r2.steps_per_s == pytest.approx(10.0 / 2.0)  # iteration_tokens
    # Not speculating, one request: ITL count.
    r3 = delta_rates(
        replace(before, speculative=False, drafts=0.0),
        replace(after, speculative=False, drafts=0.0),
        2.0,
        "w",
    )
    assert r3.steps_per_s == pytest.approx(20.0 / 2.0)  # ITL count


def series(n: int, dt: float = 0.25, tok_per_s: float = 100.0, running: float = 1.0) -> list[MetricsSnapshot]:
    return [snap(generation_tokens=i * dt * tok_per_s, requests_running=running) for i in range(n)]


def test_windows_cover_requested_span() -> None:
    c = Collector()
    for i, s in enumerate(series(81)):  # 20 s at 4 Hz, 100 tok/s
        c.add(s, i * 0.25)
    now = 20.0
    for seconds in (1.0, 10.0):
        w = c.window(seconds, now)
        assert w is not None
        assert w.dt_s == pytest.approx(seconds)
        assert w.server_tok_s == pytest.approx(100.0)
        assert w.window_label == f"{seconds:g} s"
    w60 = c.window(60.0, now)  # longer than the history: the whole history
    assert w60 is not None and w60.dt_s == pytest.approx(20.0)
    assert c.window(1.0, now + 5.0) is None  # nothing scraped in the last second
    assert Collector().window(1.0, 0.0) is None


def test_since_prompt_start_uses_scrape_before_t0() -> None:
    c = Collector()
    for i, s in enumerate(series(41)):
        c.add(s, i * 0.25)
    r = c.since(2.1, 10.0)
    assert r is not None and r.window_label == "prompt"
    assert r.dt_s == pytest.approx(10.0 - 2.0)
    assert r.generation_tokens == pytest.approx(800.0)


def test_restart_starts_new_baseline() -> None:
    c = Collector()
    assert not c.add(snap(generation_tokens=500.0, created=1.0), 0.0)
    assert not c.add(snap(generation_tokens=600.0, created=1.0), 1.0)
    assert c.add(snap(generation_tokens=5.0, created=1.0), 2.0)  # counter went down
    assert c.restarts == 1 and c.last_restart_at == 2.0
    # The restarted server counted from zero after the last scrape: those 5 tokens are kept.
    w = c.window(10.0, 2.0)
    assert w is not None and w.generation_tokens == 5.0 and w.dt_s == 1.0
    assert not c.add(snap(generation_tokens=55.0, created=1.0), 3.0)
    w = c.window(10.0, 3.0)
    assert w is not None and w.generation_tokens == 55.0 and w.dt_s == 2.0 and not w.restarted
    assert c.add(snap(generation_tokens=60.0, created=2.0), 4.0)  # _created changed
    assert c.restarts == 2
    c.add(snap(generation_tokens=70.0, created=2.0), 5.0)
    since = c.since(0.5, 5.0)
    # The prompt began before the restart: only counts since the restart, and it says so.
    assert since is not None and since.restarted and since.generation_tokens == 70.0
    # The series never spans a restart with a negative value; never negative.
    pts = c.tok_s_series()
    assert [t for t, _ in pts] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert all(v >= 0 for _, v in pts)
    assert dict(pts)[2.0] == 5.0 and dict(pts)[4.0] == 60.0


def test_restart_keeps_acceptance_counted_before_the_first_new_scrape() -> None:
    c = Collector()
    c.add(snap(drafts=100.0, draft_tokens=400.0, accepted=300.0, created=1.0), 0.0)
    c.add(snap(drafts=10.0, draft_tokens=40.0, accepted=20.0, created=2.0), 1.0)
    w = c.window(10.0, 1.0)
    assert w is not None and w.acceptance_rate == pytest.approx(0.5)
    assert w.mean_acceptance_length == pytest.approx(3.0)


def test_time_must_not_go_backwards() -> None:
    c = Collector()
    c.add(snap(), 5.0)
    with pytest.raises(ValueError, match="backwards"):
        c.add(snap(), 4.0)


def test_tok_s_series_raw_and_smoothed() -> None:
    c = Collector()
    gen = 0.0
    rates = [100.0, 100.0, 300.0, 300.0]
    c.add(snap(generation_tokens=gen), 0.0)
    for i, rate in enumerate(rates):
        gen += rate * 1.0
        c.add(snap(generation_tokens=gen), float(i + 1))
    assert c.tok_s_series() == [(1.0, 100.0), (2.0, 100.0), (3.0, 300.0), (4.0, 300.0)]
    smooth = dict(c.tok_s_series(smooth_s=2.0))
    assert smooth[3.0] == pytest.approx((100.0 + 300.0) / 2)
    assert smooth[4.0] == pytest.approx(300.0)
    assert c.tok_s_series(since=3.0) == [(3.0, 300.0), (4.0, 300.0)]


def test_horizon_bounds_history() -> None:
    c = Collector(horizon_s=10.0)
    for i, s in enumerate(series(400)):
        c.add(s, i * 0.25)
    assert len(c) <= 10.0 / 0.25 + 2
    longest = c.window(60.0, 399 * 0.25)  # no further back than the horizon (and one scrape)
    assert longest is not None and longest.dt_s is not None and longest.dt_s <= 10.0 + 0.25
    w = c.window(10.0, 399 * 0.25)
    assert w is not None and w.dt_s == pytest.approx(10.0)


def test_attribution_helper() -> None:
    assert attribute([0.0, 1.0, 1.0, 0.0]) == "this request"
    assert attribute([1.0, 2.0, 1.0]) == "engine-wide"
    assert attribute([]) == "engine-wide"
    assert attribute([1.0, None]) == "engine-wide"


def test_collector_attribution_and_max_running() -> None:
    c = Collector()
    running = [0, 1, 1, 1, 0, 0, 1, 2, 1, 0]
    for i, r in enumerate(running):
        c.add(snap(requests_running=float(r), generation_tokens=float(i)), float(i))
    assert c.attribution(0.5, 4.5) == "this request"  # scrapes 1..5 all <= 1
    assert c.attribution(5.5, 8.5) == "engine-wide"  # scrape 7 saw 2
    w = c.since(5.5, 9.0)
    assert w is not None and w.max_running == 2.0


def test_since_until_ends_at_the_scrape_after_the_prompt() -> None:
    """A finished prompt's window stops at its last scrape; later idle scrapes do not dilute it."""
    c = Collector()
    for i, gen in enumerate([0.0, 100.0, 200.0, 300.0, 300.0, 300.0, 300.0]):
        c.add(snap(generation_tokens=gen, created=1.0), float(i))
    ended = c.since(0.5, 6.0, until=3.2)
    assert ended is not None and ended.generation_tokens == 300.0 and ended.dt_s == 3.0
    assert ended.server_tok_s == pytest.approx(100.0)
    diluted = c.since(0.5, 6.0)
    assert diluted is not None and diluted.dt_s == 6.0 and diluted.server_tok_s == pytest.approx(50.0)
    assert c.since(0.5, 6.0, until=-1.0) is None  # nothing scraped before `until`
