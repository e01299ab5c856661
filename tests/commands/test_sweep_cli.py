"""`mtpwatch bench --start MODEL --sweep-k …` end to end, with the simulator standing in for vLLM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.commands.options import free_port

E4B, E4B_D = "google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant"
SIM = f"{sys.executable} -m mtpwatch sim --speed 40"
QUICK = ["--prompts", "long-en", "--limit", "1", "--runs", "3", "--max-tokens", "64", "--no-progress"]


@pytest.mark.parametrize(
    ("method", "drafter"),
    [
        ("mtp", E4B_D),
        ("ngram", None),
        ("eagle3", "org/gemma-4-E4B-eagle3"),
        ("draft_model", "google/gemma-4-E2B-it"),
    ],
)
def test_sweep_every_method(
    method: str, drafter: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    monkeypatch.setenv("VLLM_API_KEY", "sweep-secret")
    out = tmp_path / "sweep.json"
    args = ["bench", "--start", E4B, "--method", method, "--sweep-k", "0,1,3", "--vllm", SIM, "--gpu", "GB10"]
    args += ["--drafter", drafter] if drafter else []
    args += [*QUICK, "--json-file", str(out), "--", "--max-model-len", "8192"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert f"k sweep 0,1,3 · {E4B} · {method}" in text
    assert "best k (highest median speed-up):" in text
    assert (
        "k advisor (acceptance from each measured k its own, k=2 from k=3, k=4,5 from k=3 (continued)" in text
    )
    assert "t(k) = t0 + s + c·k fitted over k=1,3" in text and "(extrapolated, 95% CI " in text
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["ks"] == [0, 1, 3] and doc["method"] == method
    rows = {r["k"]: r for r in doc["rows"]}
    for k in (1, 3):
        row = rows[k]
        assert row["pairs"] == 2 and row["speedup_ci"][0] <= row["speedup"] <= row["speedup_ci"][1]
        assert len(row["per_position"]) == k and 1.0 <= row["mean_acceptance_length"] <= k + 1
        assert row["predicted_decode_tok_s"] > 0 and row["categories"]["long-en"]["speedup"] > 0
    assert doc["best_k"] in (0, 1, 3)
    # whether the intervals resolve it (core.sweeps.resolve): the same best, and the ks within the noise
    choice = doc["best_k_choice"]
    assert choice["best"] == doc["best_k"] and choice["best"] in choice["within_noise"]
    assert choice["weak_interval"] is True  # 2 pairs: [min, max] covers 50 %, resolves nothing
    advisor = doc["advisor"]
    assert advisor["from_k"] == 3 and [p["k"] for p in advisor["predictions"]] == [0, 1, 2, 3, 4, 5]
    assert [p["extrapolated"] for p in advisor["predictions"]] == [False] * 4 + [True] * 2
    # the k=0 the advisor uses is the k=0 row's
    assert advisor["baseline_decode_tok_s"] == pytest.approx(rows[0]["decode_tok_s"], abs=1e-3)
    # two measured ks: the line passes through both, so the run at k=3 predicts its own paired
    # speed-up exactly; k=1 reads its own acceptance (held out, below, it reads k=3's: a real
    # prediction, whose accuracy is a benchmark's business: tests/bench/advisor_out_of_sample.py)
    assert advisor["fit"]["kind"] == "linear" and advisor["fit"]["max_residual"] == pytest.approx(0, abs=1e-4)
    assert rows[3]["speedup_prediction_error"] == pytest.approx(0.0, abs=1e-3)
    assert isinstance(rows[1]["speedup_prediction_error"], float)
    assert isinstance(rows[1]["prediction_error"], float)
    # held out (k=1 from k=3's fit alone): the figure that is not in-sample
    assert isinstance(rows[1]["held_out_speedup_error"], float) and rows[3]["held_out_speedup_error"] is None
    assert (
        "held out (each k predicted from a fit over the other ks, its acceptance from the nearest other k "
        in text
    )
    assert "above): speed-up error k=1:" in text
    # how sure the advisor is (core.sweeps.certainty): an interval on every prediction, the shift
    # of position 1 between the measured ks
    sure = doc["advisor_certainty"]
    for p in advisor["predictions"]:
        low, high = sure["speedup_ci"][str(p["k"])]
        assert low <= p["speedup"] <= high
    assert [(s["k_low"], s["k_high"]) for s in sure["acceptance_shifts"] if s["position"] == 1] == [(1, 3)]
    assert "acceptance across ks: position 1 at k=3 reads" in text
    # each bench started the k=0 server twice: the A/A of its two lives, per k
    assert set(doc["baseline_lives"]) == {"1", "3"} and doc["baseline_life_spread"] >= 0
    assert "server lives: the k=0 server's second start over its first in each bench" in text
    # every server had the passthrough flag and a planned share; the key never in argv
    for server in doc["plan"]["servers"]:
        assert "--max-model-len" in server["argv"] and "--gpu-memory-utilization" in server["argv"]
        assert server["env"] == {"VLLM_API_KEY": "***"}
    assert "sweep-secret" not in out.read_text(encoding="utf-8") and "sweep-secret" not in result.output
    assert doc["plan"]["schedule"] == "restart"


def test_sweep_plan_only(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    args = ["bench", "--start", E4B, "--drafter", E4B_D, "--sweep-k", "0,2,4", "--gpu", "H100 SXM"]
    result = CliRunner().invoke(cli, [*args, "--plan", "--json-file", str(out)])
    assert result.exit_code == 0, result.output
    assert "schedule: restart" in result.output and result.output.count("vllm serve") == 3
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert [s["k"] for s in doc["servers"]] == [0, 2, 4]


def test_sweep_bad_ks() -> None:
    result = CliRunner().invoke(cli, ["bench", "--start", E4B, "--sweep-k", "0", "--plan"])
    assert result.exit_code == 2 and "at least one k > 0" in result.output
    result = CliRunner().invoke(cli, ["bench", "--start", E4B, "--sweep-k", "1,x", "--plan"])
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_another_commands_simulators_leave_a_sweep_alone_and_a_failure_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A simulator of someone else's (a bare `mtpwatch sim` holding 0.9 of a GB10 in the per-user
    ledger, the one every simulator shared before) does not fail the sweep; when a sweep's server
    does fail (here: the ledger shared on purpose), the sweep's line says vLLM's reason."""
    import subprocess

    monkeypatch.delenv("MTPWATCH_SIM_GPU_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the per-user ledger lands here, not in everyone's /tmp
    port = free_port()
    foreign = subprocess.Popen(
        [*SIM.split(), "serve", E4B, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        assert foreign.stdout is not None
        for line in foreign.stdout:  # its API server logs this once it listens
            if "Starting vLLM server on" in line or "Application startup complete" in line:
                break
        ledgers = list(tmp_path.glob("mtpwatch-sim-gpu-*/*.json"))
        assert len(ledgers) == 1, ledgers
        args = ["bench", "--start", E4B, "--method", "ngram", "--sweep-k", "0,1", "--vllm", SIM]
        args += ["--gpu", "GB10", *QUICK, "--", "--max-model-len", "8192"]
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(ledgers[0].parent))
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 1
        # Nothing measured: no report, one line with the reason (issue 40, item 9)
        (line,) = [x for x in result.output.splitlines() if "nothing measured" in x]
        assert line.startswith(
            "mtpwatch bench: nothing measured (k=1: server exited with status 1 before answering /health:"
            " ValueError: "
        )
        assert "Free memory on device cuda:0 (" in line
    finally:
        foreign.terminate()
        foreign.wait(timeout=30)
        assert foreign.stdout is not None
        foreign.stdout.close()


def test_the_sweep_file_is_a_report_plot_and_compare_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    out = tmp_path / "sweep.json"
    args = [
        "bench",
        "--start",
        E4B,
        "--method",
        "ngram",
        "--sweep-k",
        "0,1,2",
        "--vllm",
        SIM,
        "--gpu",
        "GB10",
    ]
    args += [*QUICK, "--label", "ngram sweep", "--metadata", "box=ci", "--json-file", str(out)]
    result = CliRunner().invoke(cli, [*args, "--", "--max-model-len", "8192"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "engine (the k=2 server): ngram k=2 (vLLM " in result.stdout  # what the server ran
    assert "from the command line)" in result.stdout
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["tool"] == "mtpwatch bench" and doc["kind"] == "k sweep"
    assert doc["engine"]["2"]["method"] == "ngram" and doc["engine"]["2"]["lossless"] is True
    assert doc["engine"]["1"]["k"] == 1 and doc["engine"]["2"]["flags"] == []
    meta = doc["meta"]
    assert meta["label"] == "ngram sweep" and meta["metadata"] == {"box": "ci"}
    assert meta["prompt_set"]["name"] == "long-en" and meta["gpu"]["name"] == "GB10"
    assert meta["temperature"] == 0.0
    assert sorted(meta["arms"]) == ["k=0", "k=1", "k=2"]
    assert meta["arms"]["k=2"]["k"] == 2 and meta["arms"]["k=2"]["method"] == "ngram"
    assert meta["arms"]["k=0"]["k"] is None and "--port" in meta["arms"]["k=0"]["launch_argv"]
    for k in (1, 2):
        report = doc["bench"][str(k)]
        assert report["tool"] == "mtpwatch bench" and report["meta"]["label"] == f"k={k} ngram sweep"
        assert report["meta"]["arms"]["b"]["k"] == k and report["meta"]["arms"]["a"]["k"] is None
        assert report["runs"]  # every run, for compare's matching
    plot = CliRunner().invoke(cli, ["plot", str(out), "--table"])
    assert plot.exit_code == 0, plot.output
    assert "k=1 ngram sweep" in plot.output and "k=2 ngram sweep" in plot.output
    assert "not an mtpwatch bench report" not in plot.output
    assert "speed-up B/A vs k" in plot.output  # one file, one point per k
    compare = CliRunner().invoke(cli, ["compare", str(out)])
    assert compare.exit_code == 0, compare.output
    assert "k=1 ngram sw" in compare.output and "k=2 ngram sw" in compare.output
    # one report per k: `load` (one report) says so in a line, `load_all` gives both
    from mtpwatch.core.reports import reportfile

    with pytest.raises(reportfile.ReportFileError, match="a k sweep"):
        reportfile.load(out)
    assert [r.k for r in reportfile.load_all([out])] == [1, 2]


def test_a_concurrency_sweep_gives_a_schedule_and_checks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mtpwatch.core.provenance import spec_config_from_argv
    from mtpwatch.core.sweeps.schedule import batch_schedule
    from mtpwatch.sim.engine import check_schedule

    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    out = tmp_path / "sweep.json"
    args = ["bench", "--start", E4B, "--drafter", E4B_D, "--sweep-k", "0,1,3", "--vllm", SIM, "--gpu", "GB10"]
    args += [*QUICK, "--concurrency", "1,4", "--verify-schedule", "--json-file", str(out)]
    result = CliRunner().invoke(cli, [*args, "--", "--max-model-len", "8192"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "per concurrency: speed-up over k=0" in text and "schedule vs the best fixed k" in text
    doc = json.loads(out.read_text(encoding="utf-8"))
    conc = doc["concurrency"]
    assert conc["concurrency"] == [1, 4]
    assert {(c["k"], c["concurrency"]) for c in conc["cells"]} == {(1, 1), (3, 1), (1, 4), (3, 4)}
    # the best k at each concurrency is the measured cell with the highest median speed-up
    for c in (1, 4):
        cells = [x for x in conc["cells"] if x["concurrency"] == c]
        top = max(cells, key=lambda x: x["speedup"])
        assert conc["best_k"][str(c)] == (top["k"] if top["speedup"] > 1 else 0)
    schedule = [tuple(r) for r in conc["num_speculative_tokens_per_batch_size"]]
    # a schedule of the choices where the intervals need one, else the medians' (to verify only)
    chosen = {int(c): ch["k"] for c, ch in conc["choices"].items()}
    medians = {int(c): k for c, k in conc["best_k"].items()}
    assert schedule == list(batch_schedule(medians if conc["fixed_k"] is not None else chosen))
    assert schedule[0][0] == 1 and schedule[-1][1] == 4
    check_schedule(schedule, 3)  # vLLM's rules
    config = conc["schedule_config"]
    assert config["method"] == "mtp" and config["model"] == E4B_D
    assert config["num_speculative_tokens"] == max(k for _, _, k in schedule)
    ready = conc["speculative_config"]  # the advice: a fixed k within the noise, or the schedule
    if conc["fixed_k"] is None:
        assert ready == config
    else:
        assert conc["fixed_k"] in set.intersection(
            *(set(ch["within_noise"]) for ch in conc["choices"].values())
        )
        assert ready is None if conc["fixed_k"] == 0 else "num_speculative_tokens_per_batch_size" not in ready
    if ready is not None:
        assert f"--speculative-config '{json.dumps(ready, separators=(',', ':'))}'" in text  # ready to paste
    # the schedule ran on its own server, head to head against the best fixed k at the
    # concurrencies where that k is best, in two benches (fixed k as A, then the schedule as A),
    # their pairs pooled
    rows = {r["concurrency"]: r for r in conc["verification"]}
    assert sorted(rows) == [1, 4] and conc["verification_note"] is None
    for c, row in rows.items():
        assert row["best_fixed_k"] == conc["best_k"][str(c)]
        head = row["schedule_vs_best_fixed"]
        assert head["pairs"] == 4 and head["k"] == row["best_fixed_k"]  # 2 pairs a bench
        assert row["no_slower"] == (head["speedup_ci"][1] >= 1.0)
    benches = doc["schedule_benches"]
    groups: dict[int, set[int]] = {}
    for c, k in conc["best_k"].items():
        groups.setdefault(k, set()).add(int(c))
    assert len(benches) == 2 * len(groups)
    for i, bench in enumerate(benches):
        arms = bench["meta"]["arms"]
        schedule_arm, fixed_arm = ("b", "a") if i % 2 == 0 else ("a", "b")
        assert spec_config_from_argv(arms[schedule_arm]["launch_argv"]) == config  # the printed config
        fixed = spec_config_from_argv(arms[fixed_arm]["launch_argv"])
        k = fixed["num_speculative_tokens"] if fixed else 0
        assert fixed is None or "num_speculative_tokens_per_batch_size" not in fixed
        assert {p["concurrency"] for p in bench["points"]} == groups[k]
    assert "head to head" in text


def test_verify_schedule_needs_two_concurrencies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    args = ["bench", "--start", E4B, "--method", "ngram", "--sweep-k", "0,1", "--vllm", SIM, "--gpu", "GB10"]
    result = CliRunner().invoke(cli, [*args, *QUICK, "--verify-schedule", "--", "--max-model-len", "8192"])
    assert result.exit_code == 0, result.output
    assert "--verify-schedule needs two or more --concurrency values" in result.output
    assert "per concurrency" not in result.stdout


def test_step_times_from_vllm_bench_forward(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--step-times FILE.json`: the advisor's t(k) from `vllm bench forward`, the serving runs' fit
    printed beside it, and the output says which was used."""
    fixture = Path(__file__).resolve().parents[1] / "data" / "vllm-bench-forward.json"
    monkeypatch.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp_path))
    out = tmp_path / "sweep.json"
    args = ["bench", "--start", E4B, "--drafter", E4B_D, "--sweep-k", "0,2", "--vllm", SIM, "--gpu", "GB10"]
    args += [*QUICK, "--step-times", str(fixture), "--json-file", str(out), "--", "--max-model-len", "8192"]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "step model from vllm bench forward vllm-bench-forward.json, batch 1" in result.stdout
    assert "beside it, the serving runs' step model (two points, k=0 and k=2)" in result.stdout
    advisor = json.loads(out.read_text(encoding="utf-8"))["advisor"]
    assert advisor["step_times_from"] == "vllm bench forward vllm-bench-forward.json, batch 1"
    assert advisor["fit"]["measured_step_ratio"]["3"] == pytest.approx(7517.3 / 6120.5, abs=1e-4)
    assert advisor["serving_fit"]["source"] == "serving runs"
    # without a sweep it has nothing to feed
    bad = CliRunner().invoke(cli, ["bench", "--step-times", str(fixture), *QUICK])
    assert bad.exit_code != 0 and "--step-times feeds the k sweep's advisor" in bad.output
