"""The bench runner against in-process fake arms: schedules, pairing, acceptance, lossless, gates."""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import Callable

import pytest

from mtpwatch.core.ab.arms import ArmRequest, ArmResult
from mtpwatch.core.ab.events import BenchEvent, BenchFinished, PairFinished, RunFinished
from mtpwatch.core.ab.plan import CONTENDED, BenchConfig, BenchConfigError
from mtpwatch.core.ab.records import CSV_FIELDS, match_pairs
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from tests.reference import spec_counters

PROMPTS = [Prompt("p1", "one", "cat-x", 16), Prompt("p2", "two", "cat-y", 16)]


class Tracker:
    """Shared across fake arms: call order, concurrency across arms, running servers."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.running: set[str] = set()
        self.max_running = 0
        self.events: list[str] = []
        self.t = 0  # global unit counter, for drift


class FakeArm:
    """Deterministic arm: `tok_s(request, t)` gives the decode rate; counters advance per request."""

    def __init__(
        self,
        name: str,
        tracker: Tracker,
        tok_s: Callable[[ArmRequest, int], float],
        *,
        k: int = 0,
        per_step_accepted: int = 0,
        ids: Callable[[ArmRequest], tuple[int, ...] | None] | None = None,
        text: Callable[[ArmRequest], str] | None = None,
        fail_on: int | None = None,
        per_pos_len: int | None = None,
    ) -> None:
        self.label = name
        self.name = name
        self.tracker = tracker
        self.tok_s = tok_s
        self.k = k
        self.per_step_accepted = per_step_accepted
        self.ids = ids or (lambda r: tuple(range(r.max_tokens)))
        self.text = text or (lambda r: " ".join(f"w{i}" for i in range(r.max_tokens)))
        self.fail_on = fail_on
        self.per_pos_len = k if per_pos_len is None else per_pos_len
        self.calls = 0
        self.requests: list[ArmRequest] = []
        self.drafts = 0.0
        self.accepted = 0.0
        self.per_pos = [0.0] * self.per_pos_len

    async def generate(self, request: ArmRequest) -> ArmResult:
        self.tracker.order.append(self.name)
        self.tracker.in_flight += 1
        self.tracker.max_in_flight = max(self.tracker.max_in_flight, self.tracker.in_flight)
        t = self.tracker.t
        self.tracker.t += 1
        self.calls += 1
        self.requests.append(request)
        try:
            await asyncio.sleep(0)  # let a concurrent schedule interleave
            await asyncio.sleep(0)
            if self.fail_on is not None and self.calls == self.fail_on:
                return ArmResult(0, None, None, error="fake: connection refused")
            if self.k:
                steps = request.max_tokens // (1 + self.per_step_accepted)
                self.drafts += steps
                self.accepted += steps * self.per_step_accepted
                for i in range(min(self.per_step_accepted, self.per_pos_len)):
                    self.per_pos[i] += steps
            return ArmResult(
                tokens=request.max_tokens,
                ttft_s=0.05,
                decode_tok_s=self.tok_s(request, t),
                text=self.text(request),
                token_ids=self.ids(request),
            )
        finally:
            self.tracker.in_flight -= 1

    async def counters(self) -> MetricsSnapshot | None:
        if not self.k:
            return None
        return spec_counters(self.drafts, self.drafts * self.k, self.accepted, tuple(self.per_pos), self.k)


class ManagedFake(FakeArm):
    async def start(self) -> None:
        self.tracker.running.add(self.name)
        self.tracker.max_running = max(self.tracker.max_running, len(self.tracker.running))
        self.tracker.events.append(f"start {self.name}")
        # counters reset with the process
        self.drafts, self.accepted, self.per_pos = 0.0, 0.0, [0.0] * self.per_pos_len

    async def stop(self) -> None:
        self.tracker.running.discard(self.name)
        self.tracker.events.append(f"stop {self.name}")

    async def generate(self, request: ArmRequest) -> ArmResult:
        assert self.name in self.tracker.running, "request sent to a stopped server"
        return await super().generate(request)


def const(rate: float) -> Callable[[ArmRequest, int], float]:
    return lambda r, t: rate


def pair(
    tracker: Tracker, a_rate: float = 20.0, b_rate: float = 40.0, **b_kwargs: object
) -> tuple[FakeArm, FakeArm]:
    a = FakeArm("a", tracker, const(a_rate))
    b = FakeArm("b", tracker, const(b_rate), **b_kwargs)  # type: ignore[arg-type]
    return a, b


async def test_alternate_is_abba_per_prompt_and_never_concurrent() -> None:
    tr = Tracker()
    a, b = pair(tr)
    report = await BenchRunner(BenchConfig(PROMPTS, runs=4, warmup=1), a, b).run()
    assert tr.max_in_flight == 1
    assert "".join(tr.order) == "abbaabba" * 2  # per prompt: AB BA AB BA
    assert report.primary.overall.speedup is not None
    assert report.primary.overall.speedup.median == pytest.approx(2.0)
    assert report.primary.overall.speedup.n_pairs == 2 * 3  # 2 prompts x (4 runs - 1 warm-up)
    doc = report.to_json()
    assert (
        doc["speedup"]["median"] == 2.0
        and doc["speedup"]["ci_low"] == 2.0
        and doc["speedup"]["ci_high"] == 2.0
    )
    assert doc["arms"]["a"]["decode_tok_s"]["median"] == 20.0
    assert doc["arms"]["b"]["decode_tok_s"]["cv"] == 0.0
    assert "treatment" in doc["treatment"] and doc["measurement"].startswith("alternating")
    assert len(doc["runs"]) == 16
    assert sum(1 for r in doc["runs"] if r["warmup"]) == 4
    assert set(doc["categories"]) == {"cat-x", "cat-y"}


async def test_abba_cancels_linear_drift() -> None:
    tr = Tracker()
    # Both servers slow down 1 % per request (shared thermals); B is truly 2x A.
    a = FakeArm("a", tr, lambda r, t: 20.0 / (1 + 0.01 * t))
    b = FakeArm("b", tr, lambda r, t: 40.0 / (1 + 0.01 * t))
    report = await BenchRunner(BenchConfig(PROMPTS[:1], runs=9, warmup=1), a, b).run()
    ratios = [
        rb.rate / ra.rate  # type: ignore[operator]
        for ra, rb in match_pairs(report.records)
    ]
    above = sum(1 for x in ratios if x > 2.0)
    below = sum(1 for x in ratios if x < 2.0)
    assert above == below == 4  # AB pairs see B later (slower), BA pairs see B earlier
    assert report.primary.overall.speedup is not None
    assert report.primary.overall.speedup.median == pytest.approx(2.0, abs=1e-3)


async def test_race_runs_both_at_once_and_says_so() -> None:
    tr = Tracker()
    a, b = pair(tr)
    report = await BenchRunner(BenchConfig(PROMPTS[:1], runs=3, warmup=1, schedule="race"), a, b).run()
    assert tr.max_in_flight == 2
    doc = report.to_json()
    assert doc["measurement"] == CONTENDED
    assert all(r["contended"] for r in doc["runs"])


async def test_restart_one_server_at_a_time_with_warmup_after_each_start() -> None:
    tr = Tracker()
    a = ManagedFake("a", tr, const(20.0))
    b = ManagedFake("b", tr, const(30.0), k=2, per_step_accepted=1)
    cfg = BenchConfig(PROMPTS, runs=5, warmup=1, schedule="restart")
    report = await BenchRunner(cfg, a, b).run()
    assert tr.max_running == 1
    assert [e for e in tr.events] == ["start a", "stop a", "start b", "stop b", "start a", "stop a"]
    runs = report.records
    # each session starts with one warm-up per prompt: A twice, B once
    assert sum(1 for r in runs if r.warmup and r.arm == "a") == 4
    assert sum(1 for r in runs if r.warmup and r.arm == "b") == 2
    assert report.primary.overall.speedup is not None
    assert report.primary.overall.speedup.n_pairs == 2 * 4
    assert report.primary.overall.speedup.median == pytest.approx(1.5)
    # counters reset on restart must not produce negative or lost acceptance
    acc = report.primary.overall.arms["b"].acceptance
    assert acc is not None and acc.acceptance_rate == pytest.approx(0.5)


async def test_restart_needs_managed_arms() -> None:
    tr = Tracker()
    a, b = pair(tr)
    with pytest.raises(BenchConfigError, match="launch command"):
        BenchRunner(BenchConfig(PROMPTS, schedule="restart"), a, b)


async def test_restart_stops_the_server_when_cancelled() -> None:
    tr = Tracker()
    a = ManagedFake("a", tr, const(20.0))
    b = ManagedFake("b", tr, const(30.0))
    runner = BenchRunner(BenchConfig(PROMPTS, runs=3, warmup=1, schedule="restart"), a, b)
    events = runner.events()
    async for ev in events:
        if isinstance(ev, RunFinished):
            break
    await events.aclose()  # type: ignore[attr-defined]
    assert tr.running == set()


async def test_acceptance_from_counter_deltas() -> None:
    tr = Tracker()
    # k=3, every step accepts 2 drafts -> acceptance 2/3, AL 3, per-position [1, 1, 0]
    a, b = pair(tr, k=3, per_step_accepted=2)
    report = await BenchRunner(BenchConfig([Prompt("p", "x", "c", 30)], runs=3, warmup=1), a, b).run()
    doc = report.to_json()
    assert doc["arms"]["a"]["acceptance_rate"] is None
    arm_b = doc["arms"]["b"]
    assert arm_b["acceptance_rate"] == pytest.approx(2 / 3, abs=1e-4)
    assert arm_b["mean_acceptance_length"] == pytest.approx(3.0)
    assert arm_b["per_position"] == [1.0, 1.0, 0.0]
    assert arm_b["num_speculative_tokens"] == 3
    # measured runs only: 2 runs x 10 steps
    assert arm_b["drafts"] == 20
    assert report.gate_failures() == []


async def test_per_position_length_gate() -> None:
    tr = Tracker()
    a, b = pair(tr, k=3, per_step_accepted=1, per_pos_len=2)
    report = await BenchRunner(BenchConfig(PROMPTS[:1], runs=2, warmup=1), a, b).run()
    gates = report.gate_failures()
    assert any("per-position list has 2 entries" in g and "k=3" in g for g in gates)


async def test_failed_request_gate() -> None:
    tr = Tracker()
    a, b = pair(tr, fail_on=2)
    report = await BenchRunner(BenchConfig(PROMPTS[:1], runs=3, warmup=1), a, b).run()
    gates = report.gate_failures()
    assert report.failed == 1
    assert any("1 request(s) failed" in g and "connection refused" in g for g in gates)
    assert report.to_json()["arms"]["b"]["failed"] == 1


async def test_identical_outputs_by_token_ids() -> None:
    tr = Tracker()
    a, b = pair(tr)
    report = await BenchRunner(BenchConfig(PROMPTS, runs=3, warmup=1), a, b).run()
    assert report.lossless.identical is True
    assert report.lossless.compared_by == "token_ids"
    assert report.lossless.pairs_compared == 4
    assert report.to_json()["first_divergence"] is None
    assert report.gate_failures(require_identical=True) == []


async def test_first_divergent_token_with_context() -> None:
    tr = Tracker()

    def b_ids(r: ArmRequest) -> tuple[int, ...]:
        ids = list(range(r.max_tokens))
        ids[10] = 999
        return tuple(ids)

    def b_text(r: ArmRequest) -> str:
        return " ".join("XX" if i == 10 else f"w{i}" for i in range(r.max_tokens))

    a, b = pair(tr, ids=b_ids, text=b_text)
    report = await BenchRunner(BenchConfig(PROMPTS[:1], runs=2, warmup=1), a, b).run()
    assert report.lossless.identical is False
    doc = report.to_json(require_identical=True)
    d = doc["first_divergence"]
    assert d["prompt"] == "p1" and d["compared"] == "token_ids" and d["token_index"] == 10
    assert d["a_tokens"] == list(range(2, 16)) and d["b_tokens"][8] == 999
    assert "w10" in d["a_context"] and "XX" in d["b_context"]
    assert doc["identical_outputs"] is False
    assert any("outputs differ in 1 of 1 pairs" in g for g in doc["gates"])
    assert report.gate_failures(require_identical=False) == []


async def test_text_comparison_when_no_token_ids() -> None:
    tr = Tracker()
    a = FakeArm("a", tr, const(20.0), ids=lambda r: None, text=lambda r: "the same answer")
    b = FakeArm("b", tr, const(40.0), ids=lambda r: None, text=lambda r: "the same reply")
    report = await BenchRunner(BenchConfig(PROMPTS[:1], runs=2, warmup=1), a, b).run()
    d = report.lossless.first
    assert d is not None and d.compared == "text" and d.token_index is None and d.char_index == 9
    assert report.lossless.compared_by == "text"


async def test_break_even_sweep_forces_lengths() -> None:
    tr = Tracker()
    a = FakeArm("a", tr, const(20.0))
    speed = {8: 0.8, 32: 1.2, 128: 1.8}
    b = FakeArm("b", tr, lambda r, t: 20.0 * speed[r.max_tokens])
    cfg = BenchConfig(PROMPTS[:1], runs=3, warmup=1, lengths=(8, 32, 128))
    report = await BenchRunner(cfg, a, b).run()
    assert {r.max_tokens for r in b.requests} == {8, 32, 128}
    assert all(r.ignore_eos and r.min_tokens == r.max_tokens for r in b.requests)
    be = report.break_even[1]
    assert be.kind == "above" and be.length == pytest.approx(16.0)
    doc = report.to_json()
    assert doc["break_even"]["1"]["verdict"] == "MTP pays off above ~16 output tokens here"
    assert doc["length"] == 128 and doc["speedup"]["median"] == pytest.approx(1.8)
    assert [p["length"] for p in doc["points"]] == [8, 32, 128]


async def test_natural_lengths_do_not_force() -> None:
    tr = Tracker()
    a, b = pair(tr)
    await BenchRunner(BenchConfig(PROMPTS[:1], runs=2, warmup=1), a, b).run()
    assert all(not r.ignore_eos and r.min_tokens is None and r.max_tokens == 16 for r in b.requests)


async def test_concurrency_sweep_uses_aggregate_rate() -> None:
    tr = Tracker()
    a, b = pair(tr)
    report = await BenchRunner(BenchConfig(PROMPTS[:1], runs=2, warmup=1, concurrency=(1, 4)), a, b).run()
    assert tr.max_in_flight == 4
    c4 = [r for r in report.records if r.point.concurrency == 4]
    assert c4 and all(r.tokens == 4 * 16 for r in c4)
    pts = report.to_json()["points"]
    assert [p["concurrency"] for p in pts] == [1, 4]
    assert "aggregate" in pts[1]["speed_metric"]
    assert report.to_json()["concurrency"] == 1


async def test_events_stream_running_speedup() -> None:
    tr = Tracker()
    a, b = pair(tr)
    runner = BenchRunner(BenchConfig(PROMPTS, runs=3, warmup=1), a, b)
    seen: list[BenchEvent] = []
    report = await runner.run(seen.append)
    runs = [e for e in seen if isinstance(e, RunFinished)]
    pairs = [e for e in seen if isinstance(e, PairFinished)]
    assert len(runs) == runner.total == 12
    assert runs[-1].done == runs[-1].total
    assert len(pairs) == 4
    assert all(p.running_speedup == pytest.approx(2.0) for p in pairs)
    assert [p.pairs_done for p in pairs] == [1, 2, 3, 4]
    assert isinstance(seen[-1], BenchFinished) and seen[-1].report is report


async def test_single_server_mode() -> None:
    tr = Tracker()
    a = FakeArm("a", tr, const(25.0))
    report = await BenchRunner(BenchConfig(PROMPTS, runs=3, warmup=1), a).run()
    doc = report.to_json()
    assert doc["speedup"] is None and doc["identical_outputs"] is None
    assert list(doc["arms"]) == ["a"] and doc["arms"]["a"]["decode_tok_s"]["median"] == 25.0


def test_config_validation_is_one_line() -> None:
    tr = Tracker()
    a, b = pair(tr)
    for cfg, needle in [
        (BenchConfig(PROMPTS, runs=1, warmup=1), "nothing would be measured"),
        (BenchConfig(PROMPTS, lengths=(0,)), "--lengths"),
        (BenchConfig(PROMPTS, concurrency=(0,)), "--concurrency"),
        (BenchConfig([], runs=2), "no prompts"),
    ]:
        with pytest.raises(BenchConfigError, match=needle) as exc:
            BenchRunner(cfg, a, b)
        assert "\n" not in str(exc.value)
    with pytest.raises(BenchConfigError, match="two servers"):
        BenchRunner(BenchConfig(PROMPTS, schedule="race"), a)


async def test_csv_rows_match_runs() -> None:
    tr = Tracker()
    a, b = pair(tr)
    report = await BenchRunner(BenchConfig(PROMPTS[:1], runs=2, warmup=1), a, b).run()
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    writer.writeheader()
    for r in report.records:
        writer.writerow(r.row())
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert [(r["arm"], r["warmup"]) for r in rows] == [
        ("a", "True"),
        ("b", "True"),
        ("b", "False"),
        ("a", "False"),
    ]
    assert {r["decode_tok_s"] for r in rows} == {"20.0", "40.0"}
