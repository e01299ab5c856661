"""The sweep table prints the per-request percentiles its JSON holds (each k's bench report)."""

from __future__ import annotations

import dataclasses

from mtpwatch.core.ab.plan import BenchConfig, RunUnits, build_plan
from mtpwatch.core.ab.records import RequestTiming, RunRecord
from mtpwatch.core.ab.report import build_report
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.sweeps import sweep
from mtpwatch.render.sweep_table import format_sweep

PROMPTS = [Prompt("p0", "one", "copy"), Prompt("p1", "two", "copy")]


def _bench(ttft_a: float, ttft_b: float) -> object:
    """A k's bench: A (k=0) and B (k) runs of 64 tokens, 1 s each, with their request timings."""
    config = BenchConfig(PROMPTS, runs=3, warmup=1)
    records = []
    for step in build_plan(config):
        if not isinstance(step, RunUnits):
            continue
        for u in step.units:
            ttft = (ttft_a if u.arm == "a" else ttft_b) * (1 + u.run)
            timing = RequestTiming(64, ttft, ttft + 0.9, (0.9 / 63,) * 63)
            head = (u.arm, PROMPTS[u.prompt].id, "copy", u.point, u.run, u.warmup, u.pair)
            rec = RunRecord(*head, tokens=64, ttft_s=ttft, decode_tok_s=70.0, output_tok_s=64.0, wall_s=1.0,
                            errors=0, error=None, contended=False, prompt_index=u.prompt)  # fmt: skip
            records.append(dataclasses.replace(rec, requests=(timing,)))
    return build_report(config, records, paired=True)


def test_the_sweep_table_prints_each_arms_percentiles_and_output_throughput() -> None:
    reports = {1: _bench(0.1, 0.12), 2: _bench(0.1, 0.2)}
    report = sweep.sweep_from_reports(reports)
    text = format_sweep(report, "t")
    assert "Median TTFT" in text and "P99 TPOT" in text and "output tok/s" in text
    rows = {line.split(")")[0].strip(): line for line in text.splitlines() if "(k=" in line and ")" in line}
    for k, bench in reports.items():
        for arm, tag in (("a", f"{k}  A (k=0"), ("b", f"{k}  B (k={k}")):
            lat = bench.primary.overall.arms[arm].latency.to_json()  # type: ignore[attr-defined]
            cells = rows[tag].split(")", 1)[1].split()
            want = [lat[f"{m}_ms"][p] for m in ("ttft", "tpot", "itl") for p in ("p50", "p99")]
            assert [float(c) for c in cells[:6]] == [round(w, 1) for w in want], (rows[tag], want)
            assert float(cells[6]) == round(lat["output_throughput"], 1) == 64.0
