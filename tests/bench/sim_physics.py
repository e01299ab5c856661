"""Benchmark: the A/B engine's measured speed-up against the simulator's own physics.

The bench engine runs paired A/B requests against two simulators of one preset (MTP off / on; real
HTTP on 127.0.0.1, time-scaled by each case's speed) and measures decode speed-ups on the client's
clock. The expectation comes from the same preset's physics on a virtual clock: for 128-token
answers the mean decode tok/s over 30 acceptance seeds (`tests.reference.simulate_request`); for
the 26B MoE's 8- and 64-token answers, conditioned on the verify steps the server's counters report
for each run (Δnum_drafts), since one prompt's acceptance draw spreads an 8-token speed-up by ~19 %.

Printed, per case: the measured median paired speed-up with its 95 % CI, the physics' figure, their
ratio (1.00 agrees) and the load average; for the 26B, the break-even length and verdict (the seed:
8-token answers 0.81×, long ones faster). The presets' speed-ups are 1.5× (26B), 2.1× (E4B) and
3.0× (31B) at 128 tokens, so a ratio within ±15 % still tells them apart and shows an inverted ratio
(A/B for B/A), TTFT or prefill mixed in, or unpaired runs. Each figure carries the client's timer
jitter on a loaded machine (a time-scaled step is a few ms): read it beside the load average. These
figures were timed assertions of `tests/core/ab/test_runner_sim.py`; a busy machine broke them, so
that test keeps what the clock cannot change and the figures live here.

    python tests/bench/sim_physics.py [--cases e4b,31b,26b] [--slower 1]

`--slower N` divides every case's speed by N (longer windows, less jitter). Prints JSON; passes or
fails nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
from typing import Any

from mtpwatch.core.ab.workloads import resolve
from mtpwatch.sim.physics import Physics
from mtpwatch.sim.presets import PRESETS
from tests.ab_sim import run_ab
from tests.reference import simulate_request

# name: (preset, prompt set, prompts, output lengths, runs, speed)
CASES: dict[str, tuple[str, str, int, tuple[int, ...], int, float]] = {
    "e4b": ("gemma4-e4b-gb10", "long", 1, (128,), 3, 20.0),
    "31b": ("gemma4-31b-h100", "long", 1, (128,), 3, 10.0),
    "26b": ("gemma4-26b-a4b-gb10", "short", 2, (8, 64), 2, 10.0),
}


def expected_speedup(preset: str, length: int, prompt_tokens: int = 60) -> float:
    """Mean MTP decode tok/s over 30 acceptance seeds, over the baseline's, on the virtual clock."""
    p = PRESETS[preset]
    base = simulate_request(Physics(p, spec=False), prompt_tokens=prompt_tokens, max_tokens=length)
    mtp = statistics.fmean(
        simulate_request(
            Physics(p, spec=True), prompt_tokens=prompt_tokens, max_tokens=length, seed=s
        ).decode_tok_s
        for s in range(30)
    )
    return mtp / base.decode_tok_s


def speedup_given_steps(preset: str, tokens: int, verify_steps: float, prompt_tokens: int = 60) -> float:
    """Physics speed-up for a run that took `verify_steps` MTP steps to decode `tokens` tokens.

    Baseline decodes tokens − 1 tokens in as many steps; MTP in `verify_steps` steps, each dearer
    (k drafter passes). Steps are costed at the mid-answer context.
    """
    p = PRESETS[preset]
    context = prompt_tokens + tokens // 2
    base = Physics(p, spec=False).step_cost(decode=[context]).seconds
    mtp = Physics(p, spec=True).step_cost(decode=[context]).seconds
    return (tokens - 1) * base / (verify_steps * mtp)


async def measure(name: str, slower: float) -> dict[str, Any]:
    preset, prompt_set, limit, lengths, runs, speed = CASES[name]
    report = await run_ab(preset, resolve(prompt_set, limit=limit), lengths, runs=runs, speed=speed / slower)
    out: dict[str, Any] = {"preset": preset, "speed": speed / slower, "gates": report.gate_failures()}
    rows = []
    for pt in report.points:
        length = pt.point.length
        assert length is not None
        sp = pt.overall.speedup
        b_runs = [r for r in report.records if r.point == pt.point and r.arm == "b" and not r.warmup]
        if len(lengths) > 1:
            physics = statistics.median(speedup_given_steps(preset, length, r.drafts or 0) for r in b_runs)
        else:
            physics = expected_speedup(preset, length)
        assert sp is not None
        rows.append(
            {
                "length": length,
                "pairs": sp.n_pairs,
                "measured": round(sp.median, 3),
                "ci95": [round(sp.ci.low, 3), round(sp.ci.high, 3)],
                "physics": round(physics, 3),
                "ratio": round(sp.median / physics, 3),
                "verify_steps": [r.drafts for r in b_runs],
            }
        )
    out["points"] = rows
    if len(lengths) > 1:
        be = report.break_even[1]
        out["break_even"] = {"kind": be.kind, "length": be.length, "verdict": be.verdict}
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    parser.add_argument("--slower", type=float, default=1.0, help="divide each case's speed by this")
    args = parser.parse_args()
    names = [n for n in args.cases.split(",") if n]
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s): {', '.join(unknown)}")
    print(json.dumps({n: asyncio.run(measure(n, args.slower)) for n in names}, indent=2))


if __name__ == "__main__":
    main()
