"""The A/B classes whose `to_json` is now `jsonout.JsonFields` write the same JSON, byte for byte, as
their hand-written bodies did (kept below as the reference): the run log's run and configuration
lines, the report's `first_divergence`, `lossless`, `speedup` and a group's `speedup` + `arms`."""

from __future__ import annotations

from typing import Any

import pytest

from mtpwatch.core.ab import stats
from mtpwatch.core.ab.lossless import Divergence, LosslessReport
from mtpwatch.core.ab.plan import BenchConfig, Point
from mtpwatch.core.ab.records import RequestTiming, RunRecord
from mtpwatch.core.ab.report import GroupReport, build_report
from mtpwatch.core.ab.runlog import record_to_json
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.jsonout import dumps, round_or_none


def old_record_to_json(rec: RunRecord) -> dict[str, Any]:
    return {
        "type": "run",
        "arm": rec.arm,
        "prompt": rec.prompt,
        "prompt_index": rec.prompt_index,
        "category": rec.category,
        "concurrency": rec.point.concurrency,
        "length": rec.point.length,
        "run": rec.run,
        "warmup": rec.warmup,
        "pair": rec.pair,
        "tokens": rec.tokens,
        "ttft_s": rec.ttft_s,
        "decode_tok_s": rec.decode_tok_s,
        "output_tok_s": rec.output_tok_s,
        "wall_s": rec.wall_s,
        "errors": rec.errors,
        "error": rec.error,
        "contended": rec.contended,
        "drafts": rec.drafts,
        "draft_tokens": rec.draft_tokens,
        "accepted": rec.accepted,
        "accepted_per_pos": list(rec.accepted_per_pos) if rec.accepted_per_pos is not None else None,
        "k": rec.k,
        "decode_steps": rec.decode_steps,
        "text": rec.text,
        "token_ids": list(rec.token_ids) if rec.token_ids is not None else None,
        "requests": [
            {
                "tokens": q.tokens,
                "ttft_s": q.ttft_s,
                "e2el_s": q.e2el_s,
                "itl_s": [round(g, 6) for g in q.itl_s],
            }
            for q in rec.requests
        ],
    }


def old_config_to_json(config: BenchConfig) -> dict[str, Any]:
    return {
        "runs": config.runs,
        "warmup": config.warmup,
        "schedule": config.schedule,
        "lengths": list(config.lengths),
        "concurrency": list(config.concurrency),
        "temperature": config.temperature,
        "force_lengths": config.force_lengths,
        "prompts": [
            {"id": p.id, "text": p.text, "category": p.category, "max_tokens": p.max_tokens}
            for p in config.prompts
        ],
    }


def old_divergence(d: Divergence) -> dict[str, Any]:
    return {
        "prompt": d.prompt,
        "category": d.category,
        "concurrency": d.point.concurrency,
        "length": d.point.length,
        "pair": d.pair,
        "compared": d.compared,
        "token_index": d.token_index,
        "char_index": d.char_index,
        "a_tokens": list(d.a_tokens) if d.a_tokens is not None else None,
        "b_tokens": list(d.b_tokens) if d.b_tokens is not None else None,
        "a_context": d.a_context,
        "b_context": d.b_context,
    }


def old_lossless(r: LosslessReport) -> dict[str, Any]:
    return {
        "checked": r.checked,
        "pairs_compared": r.pairs_compared,
        "pairs_differing": r.pairs_differing,
        "compared_by": r.compared_by,
        "note": r.note,
    }


def old_speedup(s: stats.SpeedupSummary | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "median": round(s.median, 4),
        "ci_low": round(s.ci.low, 4),
        "ci_high": round(s.ci.high, 4),
        "ci_coverage": round(s.ci.coverage, 4),
        "ci_method": s.ci.method,
        "mean": round(s.mean, 4),
        "cv": round(s.cv, 4),
        "ratio_of_means": round_or_none(s.ratio_of_means, 4),
        "pairs": s.n_pairs,
    }


def old_group(g: GroupReport) -> dict[str, Any]:
    return {"speedup": old_speedup(g.speedup), "arms": {k: v.to_json() for k, v in g.arms.items()}}


def _record(arm: str, n: int, rate: float, **over: Any) -> RunRecord:
    base: dict[str, Any] = dict(
        arm=arm, prompt="p-1", category="code", point=Point(1, 64), run=n + 1, warmup=False, pair=n,
        tokens=64, ttft_s=0.0312345678, decode_tok_s=rate, output_tok_s=rate * 0.9, wall_s=1.23456789,
        errors=0, error=None, contended=False, prompt_index=2, text="héllo", token_ids=(1, 2, 3),
        drafts=20.0, draft_tokens=60.0, accepted=41.0, accepted_per_pos=(18.0, 14.0, 9.0), k=3,
        decode_steps=22.0, requests=(RequestTiming(64, 0.03, 1.2, (0.0123456789, 0.02)),),
    )  # fmt: skip
    return RunRecord(**{**base, **over})


RECORDS = [
    _record("a", 0, 50.123456),
    _record("b", 0, 90.5, point=Point(4, None), requests=(), token_ids=None, accepted_per_pos=None),
    _record("b", 1, 91.0, error="HTTP 500", errors=1, ttft_s=None, drafts=None, k=None, decode_steps=None),
    _record("a", 1, 49.0, warmup=True, pair=None, text=""),
]
CONFIGS = [
    BenchConfig(
        [Prompt("a", "text α", "code", 64), Prompt("b", "t", "chat")], 6, 1, "restart", (8, 32), (1, 4)
    ),
    BenchConfig((Prompt("x", "y", "default"),), temperature=0.7, force_lengths=False),
]
DIVERGENCES = [
    Divergence("p", "code", Point(1, 64), 3, "token_ids", 5, 17, (1, 2, 3), (1, 9, 3), "ab", "ac"),
    Divergence("p", "code", Point(2, None), 0, "text", None, 4, None, None, "abcd", "abce"),
]
REPORT = build_report(
    BenchConfig([Prompt("p-1", "t", "code")], runs=4, warmup=1, lengths=(64,)),
    [
        _record(arm, i, rate + i * (1 + (arm == "b")))
        for i in range(3)
        for arm, rate in (("a", 50.0), ("b", 80.0))
    ],
    paired=True,
)
CASES: list[tuple[Any, Any]] = [
    *((r, old_record_to_json) for r in RECORDS),
    *((c, old_config_to_json) for c in CONFIGS),
    *((d, old_divergence) for d in DIVERGENCES),
    (LosslessReport(True, 4, 1, "token_ids", DIVERGENCES[0]), old_lossless),
    (LosslessReport(False, 0, 0, "", None, "one server: nothing to compare"), old_lossless),
    *((pt.overall, old_group) for pt in REPORT.points),
    *((g, old_group) for pt in REPORT.points for g in pt.categories.values()),
]


@pytest.mark.parametrize(
    ("obj", "old"), CASES, ids=[f"{type(o).__name__}-{i}" for i, (o, _) in enumerate(CASES)]
)
def test_same_json_as_the_hand_written_method(obj: Any, old: Any) -> None:
    new = record_to_json(obj) if isinstance(obj, RunRecord) else obj.to_json()
    assert dumps(new, ensure_ascii=False) == dumps(old(obj), ensure_ascii=False)
    assert dumps(new, indent=2) == dumps(old(obj), indent=2)


def test_the_speedup_summary_and_a_group_without_pairs() -> None:
    assert any(pt.overall.speedup is not None for pt in REPORT.points)
    for pt in REPORT.points:
        s = pt.overall.speedup
        assert (s.to_json() if s else None) == old_speedup(s)
    one = build_report(CONFIGS[1], [_record("a", 0, 50.0, point=Point(1, None))], paired=False)
    assert one.primary.overall.speedup is None and one.primary.overall.to_json()["speedup"] is None
