"""Issue 38 item 1 on real vLLM (CPU build 0.32, Gemma 3 270M, ngram): the sweep advisor says how sure
it is, on prompts whose acceptance is partial (tests/bench/partial_prompts.jsonl: free text, a list,
code — no copies).

A small sweep, k = 0,1,2 (the three prompts, three measured runs each), one server at a time. Asserts the
structure, which holds on any machine: every predicted k has a 95 % interval holding its
prediction, measured ks keep their measured figures and the best k is a measured one, "measure it"
exactly where an unmeasured k's interval reaches above the best measured speed-up, the shift of
position-1 acceptance between k=1 and k=2 computed and printed, the step model's ρ intervals
written. How good the predictions are is tests/bench/advisor_out_of_sample.py's business (figures,
not a pass/fail); this prints them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli

from .conftest import STARTUP_LIMIT_S, VLLM_ARGS, VLLM_ENV, RealEnv

pytestmark = pytest.mark.real_vllm

PROMPTS = Path(__file__).resolve().parents[1] / "bench" / "partial_prompts.jsonl"


@pytest.mark.timeout(8 * STARTUP_LIMIT_S)
def test_sweep_advisor_intervals_on_partial_acceptance_real(
    real_env: RealEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in VLLM_ENV.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "sweep.json"
    args = [
        "bench",
        "--start",
        str(real_env.models / "gemma3-270m"),
        "--method",
        "ngram",
        "--sweep-k",
        "0,1,2",
    ]
    args += ["--vllm", str(real_env.vllm), "--prompts", str(PROMPTS), "--runs", "4"]
    args += ["--warmup", "1", "--max-tokens", "64", "--startup-timeout", str(int(STARTUP_LIMIT_S))]
    args += ["--no-progress", "--json-file", str(out)]
    result = CliRunner().invoke(cli, [*args, "--", *VLLM_ARGS], catch_exceptions=False)
    print(result.stdout)
    assert result.exit_code == 0, result.output[-4000:]
    doc = json.loads(out.read_text(encoding="utf-8"))
    rows = {r["k"]: r for r in doc["rows"]}
    assert sorted(rows) == [0, 1, 2]
    for k in (1, 2):
        assert rows[k]["pairs"] == 9 and len(rows[k]["per_position"]) == k
        assert 0 < rows[k]["acceptance_rate"] < 1  # partial: not the copy prompts' 100 %
        runs = [r for r in doc["bench"][str(k)]["runs"] if r["arm"] == "b" and not r["warmup"]]
        assert all(len(r["accepted_per_pos"]) == k for r in runs)  # the counters the intervals redraw

    sure, advisor = doc["advisor_certainty"], doc["advisor"]
    assert sure is not None and sure["resamples"] >= 100
    preds = {p["k"]: p for p in advisor["predictions"]}
    assert sorted(preds) == [0, 1, 2, 3, 4]
    for k, p in preds.items():
        low, high = sure["speedup_ci"][str(k)]
        assert low <= p["speedup"] <= high, (k, low, p["speedup"], high)
        assert rows.get(k, {}).get("predicted_speedup_ci", [low, high]) == [low, high]
    # measured ks are preferred: their rows keep the measured figures, the best k is one of them
    # (k=0 counts at 1.0: on a loaded CPU speculation can lose to the plain server)
    assert doc["best_k"] in (0, 1, 2) and sure["best_measured_k"] in (0, 1, 2)
    best = max(1.0, rows[1]["speedup"], rows[2]["speedup"])
    assert best == (rows[sure["best_measured_k"]]["speedup"] if sure["best_measured_k"] else 1.0)
    want = [k for k in (3, 4) if sure["speedup_ci"][str(k)][1] > best]
    assert sure["measure_it"] == want
    # the shift of position 1 between the measured ks, with its interval
    (shift,) = [s for s in sure["acceptance_shifts"] if s["position"] == 1]
    assert (shift["k_low"], shift["k_high"]) == (1, 2)
    assert shift["at_low"] == pytest.approx(rows[1]["per_position"][0], abs=1e-3)
    assert shift["at_high"] == pytest.approx(rows[2]["per_position"][0], abs=1e-3)
    assert shift["change_ci"][0] <= shift["change"] <= shift["change_ci"][1]
    assert "acceptance across ks: position 1 at k=2 reads" in result.stdout
    assert "(extrapolated, 95% CI" in result.stdout
    assert set(advisor["fit"]["measured_step_ratio_ci"]) == {"1", "2"}
    assert advisor["acceptance_from"]["1"] == 1 and advisor["acceptance_from"]["3"] == 2
    print(
        f"\nadvisor on real vLLM 0.32 CPU (ngram, partial acceptance, k=0,1,2): measured k=1 "
        f"{rows[1]['speedup']:.3f}x, k=2 {rows[2]['speedup']:.3f}x; predicted k=3 "
        f"{preds[3]['speedup']:.3f}x {sure['speedup_ci']['3']}, k=4 {preds[4]['speedup']:.3f}x "
        f"{sure['speedup_ci']['4']}; measure it: {sure['measure_it']}; position 1 at k=2 vs k=1 "
        f"{100 * shift['change']:+.1f}% {shift['change_ci']}; held out k=1 error "
        f"{rows[1]['held_out_speedup_error']}; server lives {doc['baseline_lives']}"
    )
