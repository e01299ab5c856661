"""`mtpwatch bench --start … --sweep-k 0,1,2` against real vLLM (CPU build, Gemma 3 270M, ngram).

One server at a time (the restart schedule: k=0, k, k=0 for each k), 4 measured runs per prompt on
the copy-the-text prompts. Asserts what must hold whatever the machine's speed: every k measured,
the file a report `plot` reads, the engine named from the command line, the advisor's figures
consistent with the rows. Prints the advisor's error on paired speed-ups (the figure issue 20 asks
for): in-sample (the line over k=1,2 passes through both) and held out (k=1 predicted from k=2's
fit alone), and on tok/s; its size is the machine's business, not a pass/fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli

from .conftest import STARTUP_LIMIT_S, VLLM_ARGS, VLLM_ENV, RealEnv

pytestmark = pytest.mark.real_vllm

PROMPTS = Path(__file__).resolve().parents[1] / "bench" / "copy_prompts.jsonl"


@pytest.mark.timeout(8 * STARTUP_LIMIT_S)
def test_sweep_k_012_ngram_real(real_env: RealEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
    args += ["--vllm", str(real_env.vllm), "--prompts", str(PROMPTS), "--runs", "5", "--warmup", "1"]
    args += ["--startup-timeout", str(int(STARTUP_LIMIT_S)), "--no-progress", "--json-file", str(out)]
    result = CliRunner().invoke(cli, [*args, "--", *VLLM_ARGS], catch_exceptions=False)
    print(result.stdout)
    assert result.exit_code == 0, result.output[-4000:]
    doc = json.loads(out.read_text(encoding="utf-8"))
    rows = {r["k"]: r for r in doc["rows"]}
    assert sorted(rows) == [0, 1, 2]
    for k in (1, 2):
        assert rows[k]["pairs"] == 8  # 2 prompts x 4 measured runs
        assert len(rows[k]["per_position"]) == k and rows[k]["mean_acceptance_length"] >= 1.0
    advisor = doc["advisor"]
    assert advisor["from_k"] == 2 and advisor["fit"]["kind"] == "linear"  # two ks: the line is exact
    assert advisor["baseline_decode_tok_s"] == pytest.approx(rows[0]["decode_tok_s"], abs=1e-3)
    assert rows[2]["speedup_prediction_error"] == pytest.approx(0.0, abs=2e-3)
    engine = doc["engine"]["2"]
    assert engine["method"] == "ngram" and engine["k"] == 2 and engine["source"] == "command line"
    assert engine["vllm_version"].startswith("0.32") and engine["lossless"] is True
    assert doc["meta"]["arms"]["k=1"]["k"] == 1
    plot = CliRunner().invoke(cli, ["plot", str(out), "--table"])
    assert plot.exit_code == 0 and "speed-up B/A vs k" in plot.output, plot.output
    err, held = rows[1]["speedup_prediction_error"], rows[1]["held_out_speedup_error"]
    assert isinstance(held, float)
    print(
        f"\nadvisor on real vLLM 0.32 CPU (ngram, k=0,1,2): k=1 paired speed-up measured "
        f"{rows[1]['speedup']:.3f}, predicted {rows[1]['predicted_speedup']:.3f}, error {100 * err:+.1f}% "
        f"(fit over k=1,2); held out (from k=2 alone) {100 * held:+.1f}%; "
        f"tok/s error {100 * rows[1]['prediction_error']:+.1f}%; the k=0 server's two lives "
        f"{doc['baseline_lives']} (second / first, each bench)"
    )
    assert set(doc["baseline_lives"]) == {"1", "2"}
