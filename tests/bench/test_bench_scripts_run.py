"""The benchmarks are scripts that print figures, not tests; this runs two of them briefly so they
cannot rot unnoticed (the figures here are too short to mean anything; only their shape is checked)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from mtpwatch.core.ab.plan import BenchConfig, RunUnits, build_plan
from mtpwatch.core.ab.records import RunRecord
from mtpwatch.core.ab.report import build_report
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.reports.reportio import dumps
from mtpwatch.core.sweeps.sweep import sweep_document, sweep_from_reports

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from watch_cost import start_sim  # noqa: E402  (a simulator in its own process, as the benchmarks run it)


def bench(script: str, argv: list[str], timeout: float = 120) -> dict[str, Any]:
    """Run one benchmark script as a user would and return the JSON report it prints."""
    proc = subprocess.run(
        [sys.executable, str(HERE / script), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def test_watch_cost_measures_cpu_bytes_tokens_and_latency() -> None:
    argv = ["--scenarios", "one", "--seconds", "3", "--cols", "80", "--rows", "24", "--fps", "8"]
    report = bench("watch_cost.py", argv)
    one = report["one"]
    assert report["fps"] == 8 and report["size"] == "80x24"
    assert one["tok_s"] > 5 and one["prompts"] >= 0
    assert 0 < one["cpu_percent"] < 200 and one["bytes_per_s"] > 0
    assert one["latency_chunks"] > 0 and 0 < one["latency_ms_p50"] <= one["latency_ms_p95"]


def test_watch_cost_runs_the_floor_apps() -> None:
    """The floors the app is compared with: the least a Textual app can show, and the race's shape."""
    argv = ["--scenarios", "floor-cell,floor-race", "--seconds", "2", "--cols", "80", "--rows", "24"]
    report = bench("watch_cost.py", argv)
    for scenario in ("floor-cell", "floor-race"):
        figures = report[scenario]
        assert 0 < figures["cpu_percent"] < 200 and figures["bytes_per_s"] > 0, (scenario, figures)
        assert figures["tok_s"] == 0 and "latency_chunks" not in figures  # no servers, no probe
    # The race's shape writes more than one changing cell (two panes and 64 rows against one number).
    assert report["floor-race"]["bytes_per_s"] > report["floor-cell"]["bytes_per_s"]


def test_perturbation_pairs_and_server_cost() -> None:
    sim, url = start_sim("--speed", "20")
    try:
        argv = ["--url", url, "--pairs", "2", "--max-tokens", "32", "--watcher", "scraper"]
        report = bench("perturbation.py", argv)
    finally:
        sim.terminate()
        sim.wait(timeout=30)
    assert [p["order"] for p in report["pairs"]] == ["AB", "BA"]
    assert all(p["a_tok_s"] > 0 and p["b_tok_s"] > 0 for p in report["pairs"])
    low, high, _ = report["median_ratio_ci95"]
    assert low <= report["median_ratio"] <= high
    cost = report["server_cost"]
    assert cost["server_cpu_ms_per_scrape"] > 0 and cost["page_bytes"] > 10_000


def test_perturbation_windowed_pairs_windows_under_one_stream() -> None:
    sim, url = start_sim("--speed", "2")
    try:
        argv = ["--url", url, "--windows", "4", "--window-s", "0.5"]  # one 1,024-token stream
        report = bench("perturbation.py", argv, timeout=180)
    finally:
        sim.terminate()
        sim.wait(timeout=30)
    assert report["mode"] == "windowed" and "filtered" in report["watcher"]
    assert report["pairs_used"] + report["pairs_dropped"] == 4 and report["pairs_used"] >= 2
    low, high, _ = report["median_ratio_ci95"]
    assert low <= report["median_ratio"] <= high
    assert report["median_a_tok_s"] > 0 and report["median_b_tok_s"] > 0


def test_perturbation_windowed_control_watches_neither_arm() -> None:
    sim, url = start_sim("--speed", "2")
    try:
        argv = ["--url", url, "--windows", "4", "--window-s", "0.5", "--watcher", "none"]
        report = bench("perturbation.py", argv, timeout=180)
        bad = subprocess.run(
            [sys.executable, str(HERE / "perturbation.py"), "--url", url, "--watcher", "none"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        sim.terminate()
        sim.wait(timeout=30)
    assert report["watcher"] == "none (A/A control)" and report["meets_target"] is None
    assert report["pairs_used"] + report["pairs_dropped"] == 4 and report["pairs_used"] >= 2
    assert len(report["ratios"]) == report["pairs_used"]
    assert bad.returncode == 2 and "--watcher none is the windowed mode's control" in bad.stderr


def _windowed_report(watcher: str, ratios: list[float], interval: float = 0.25) -> dict[str, Any]:
    """A windowed report as perturbation.py prints it, the fields the pooling reads."""
    return {
        "mode": "windowed",
        "watcher": watcher,
        "scrape_interval_s": interval,
        "median_ratio": sorted(ratios)[len(ratios) // 2],
        "ratios": ratios,
    }


def test_perturbation_pool_reads_watched_runs_against_their_control(tmp_path: Path) -> None:
    watched = "scraper, filtered tiers as the app"
    runs = {
        "c1.json": _windowed_report("none (A/A control)", [0.99, 1.0, 1.01], interval=0.5),
        "c2.json": _windowed_report("none (A/A control)", [0.995, 1.0, 1.005]),
        "w1.json": _windowed_report(watched, [0.97, 0.98, 0.99]),
        "w2.json": _windowed_report(watched, [0.975, 0.98, 0.985]),
    }
    for name, report in runs.items():
        (tmp_path / name).write_text(json.dumps(report))
    report = bench("perturbation_pool.py", [str(tmp_path / name) for name in runs])
    control, pooled = report["groups"]["none (A/A control)"], report["groups"][f"{watched} @ 0.25 s"]
    assert control["pairs"] == pooled["pairs"] == 6  # the control is one group whatever its interval
    assert control["median_ratio"] == 1.0 and pooled["median_ratio"] == 0.98
    assert [run["file"] for run in pooled["runs"]] == ["w1.json", "w2.json"]
    verdict = report["against_control"][f"{watched} @ 0.25 s"]
    assert verdict["difference"] == -0.02 and verdict["relative_to_control"] == 0.98
    low, high = verdict["difference_bootstrap_ci95"]
    assert low <= -0.02 <= high < 0 and verdict["meets_target"] is False

    old = dict(runs["w1.json"])
    del old["ratios"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    proc = subprocess.run(
        [sys.executable, str(HERE / "perturbation_pool.py"), str(tmp_path / "old.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "old.json: lists no pairs' ratios" in proc.stderr


def test_scrape_cost_prints_bytes_and_cpu_per_answer() -> None:
    report = bench("scrape_cost.py", ["--answers", "16", "--rounds", "2", "--gap", "0.01"])
    sizes = report["bytes"]
    assert (
        sizes["nothing"] == 0 < sizes["activity"] < sizes["hot"] < sizes["hot_and_slow"] < sizes["full_page"]
    )
    assert 0 < sizes["slow"] < sizes["slow_with_buckets"]
    assert report["answers_each"] == 16 and set(report["server_cpu_ms_per_answer"]) == set(sizes)
    assert report["gap_s"] == 0.01


def test_server_cpu_measures_each_state_watched_and_not() -> None:
    sim, url = start_sim("--speed", "20")
    try:
        argv = ["--url", url, "--seconds", "1", "--rounds", "1", "--warmup", "1", "--max-tokens", "32"]
        report = bench("server_cpu.py", [*argv, "--full-page"], timeout=300)
    finally:
        sim.terminate()
        sim.wait(timeout=30)
    watched = ("not_watched", "filtered", "full_page")
    assert set(report["states"]) == {f"{a}/{w}" for a in ("idle", "streaming") for w in watched}
    assert report["states"]["streaming/not_watched"]["api_server_ms_per_s"][0] > 0  # tokens cost CPU
    assert report["scrape"]["text"].startswith("filtered")  # the simulator honours the filter
    added = report["added_api_server_ms_per_s"]
    assert added["idle/filtered"]["target"] == 6.0 and added["streaming/filtered"]["target"] == 10.0
    assert all(len(v["per_round"]) == 1 for v in added.values())


def test_first_frame_times_the_demo_on_a_pty() -> None:
    """Launch → first frame of `mtpwatch demo` (issue 39's ≤ 0.5 s is read from its figures, not here)."""
    report = bench("first_frame.py", ["--runs", "2", "--cols", "80", "--rows", "24", "--floor"])
    times = report["first_frame_s"][str(ROOT)]
    assert report["size"] == "80x24" and 0 < times["min"] <= times["median"] <= times["max"]
    floor, over = report["floor_first_frame_s"], report["paired_ratio_app_over_floor"]
    assert 0 < floor["min"] <= floor["median"] <= floor["max"] and 0 < over["min"] <= over["max"]


def _sweep_file(path: Path, ks: tuple[int, ...], seed: int) -> None:
    """A sweep's JSON as `bench --sweep-k` writes it, from restart benches with per-run counters
    (acceptance 0.9, 0.7, 0.5, … conditional; step time 1.1 + 0.05·k of k=0's)."""
    marginal = (0.9, 0.63, 0.315, 0.0945, 0.0189, 0.0028)
    prompts = [Prompt(f"p{i}", f"prompt {i}", cat) for i, cat in enumerate(("text", "list", "code"))]
    rng = random.Random(seed)
    reports = {}
    for k in ks:
        config = BenchConfig(prompts, runs=5, warmup=1, schedule="restart")
        speedup = (1 + sum(marginal[:k])) / (1.1 + 0.05 * k)
        records = []
        for step in build_plan(config):
            for u in step.units if isinstance(step, RunUnits) else ():
                b = u.arm == "b"
                rate = (20.0 + u.prompt) * (speedup if b else 1.0) * (1 + rng.uniform(-0.05, 0.05))
                pos = tuple(50.0 * a for a in marginal[:k]) if b else None
                spec = {"drafts": 50.0, "draft_tokens": 50.0 * k, "accepted": sum(pos), "k": k} if pos else {}
                head = (u.arm, prompts[u.prompt].id, prompts[u.prompt].category, u.point, u.run, u.warmup)
                records.append(
                    RunRecord(
                        *head, u.pair, 64, 0.1, rate, rate, 1.0, 0, None, False,
                        prompt_index=u.prompt, accepted_per_pos=pos, **spec,  # type: ignore[arg-type]
                    )
                )  # fmt: skip
        reports[k] = build_report(config, records, paired=True)
    path.write_text(dumps(sweep_document(sweep_from_reports(reports), None)), encoding="utf-8")


def test_advisor_out_of_sample_reads_two_saved_sweeps(tmp_path: Path) -> None:
    """The real-vLLM benchmark's reading half, on two synthetic sweeps (its sweeps take an hour)."""
    _sweep_file(tmp_path / "a.json", (1, 2, 4), seed=1)
    _sweep_file(tmp_path / "b.json", (3, 6), seed=2)
    proc = subprocess.run(
        [sys.executable, str(HERE / "advisor_out_of_sample.py"), "--from", str(tmp_path / "a.json"),
         str(tmp_path / "b.json")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert (
        "predicted by sweep A, measured by sweep B:" in out
        and "predicted by sweep B, measured by sweep A:" in out
    )
    rows = [line.split() for line in out.splitlines() if " met " in line or " MISSED " in line]
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3, 4, 6]  # every k only the other sweep measured
    assert "measured best: k=" in out and "across both sweeps, position 1:" in out
    assert "linear throughout: held out" in out and "summary: " in out and "out-of-sample predictions" in out


def test_sim_physics_prints_measured_against_physics() -> None:
    report = bench("sim_physics.py", ["--cases", "26b"], timeout=300)
    case = report["26b"]
    assert case["gates"] == [] and [p["length"] for p in case["points"]] == [8, 64]
    for point in case["points"]:
        low, high = point["ci95"]
        assert low <= point["measured"] <= high and point["physics"] > 0
        assert abs(point["ratio"] - point["measured"] / point["physics"]) < 0.01, point
        assert len(point["verify_steps"]) == point["pairs"]
    assert case["break_even"]["verdict"]
