"""`mtpwatch plot` and `mtpwatch compare` on reports written by real `mtpwatch bench` runs (simulators)."""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.reports import reportfile
from mtpwatch.render.charts import plots
from mtpwatch.sim.harness import SimThread

PRESET = "gemma4-e4b-gb10"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A --lengths sweep, and two reports of the same prompts at k=2 and k=4."""
    out = tmp_path_factory.mktemp("reports")
    paths = {name: out / f"{name}.json" for name in ("sweep", "k2", "k4")}
    quick = ["--limit", "1", "--runs", "3"]
    with (
        SimThread(preset=PRESET, spec=False, speed=20) as a,
        SimThread(preset=PRESET, spec=True, k=2, speed=20) as b2,
        SimThread(preset=PRESET, spec=True, k=4, speed=20) as b4,
    ):
        for name, b, extra in (
            ("sweep", b2, ["--prompts", "short", "--lengths", "8,32,128"]),
            ("k2", b2, ["--prompts", "all", "--max-tokens", "48"]),
            ("k4", b4, ["--prompts", "all", "--max-tokens", "48"]),
        ):
            res = CliRunner().invoke(
                cli, ["bench", "--ab", a, b, *quick, *extra, "--json-file", str(paths[name])]
            )
            assert res.exit_code == 0, res.output
    yield paths


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_plot_sweep_at_80_columns(reports: dict[str, Path]) -> None:
    res = CliRunner().invoke(cli, ["plot", str(reports["sweep"]), "--only", "length"])
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert max(len(line) for line in _lines(text)) <= 80
    assert "speed-up vs output length; red line: 1.0 (break-even)" in text
    # the x axis names the lengths that were swept, and the bench's own verdict is printed under it
    tick_row = next(line for line in _lines(text) if re.fullmatch(r"\s*8\s+32\s+128\s*", line))
    assert tick_row
    doc = json.loads(reports["sweep"].read_text(encoding="utf-8"))
    verdict = f"break-even (concurrency 1): {doc['break_even']['1']['verdict']}"
    assert verdict in " ".join(text.split())
    # the break-even line: one rule across the plot (points and CI bars may cross it), on the row
    # of the 1.0 tick or next to it (plotext rounds both to character rows)
    lines = _lines(text)
    rules = [i for i, line in enumerate(lines) if re.match(r"\s*[\d.]*[├│]", line) and line.count("─") >= 40]
    one = [i for i, line in enumerate(lines) if re.match(r"\s*1├", line)]
    assert len(rules) == 1 and len(one) == 1 and abs(rules[0] - one[0]) <= 1, (rules, one)


def test_plot_table_fallback_has_the_report_numbers(
    reports: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plots, "load_plotext", lambda: None)
    res = CliRunner().invoke(cli, ["plot", str(reports["sweep"]), "--only", "length,positions"])
    assert res.exit_code == 0, res.output
    assert "plotext cannot be imported" in res.stderr
    doc = json.loads(reports["sweep"].read_text(encoding="utf-8"))
    for pt in doc["points"]:
        sp = pt["speedup"]
        row = f"c1 {pt['length']:>10} {sp['median']:>8.2f}x  [{sp['ci_low']:.2f}, {sp['ci_high']:.2f}]"
        assert re.sub(r"\s+", " ", row) in re.sub(r"[ ]+", " ", res.stdout), row
    marginal = doc["arms"]["b"]["per_position"]
    conditional = F.conditional_from_marginal(marginal)
    assert len(marginal) == 2
    for i, (m, c) in enumerate(zip(marginal, conditional, strict=True), start=1):
        assert c is not None
        assert re.search(rf"^{i}\s+{m:.3f}\s+{c:.3f}$", res.stdout, re.M), (i, m, c)


def test_plot_k_sweep_categories_runs_positions(reports: dict[str, Path]) -> None:
    res = CliRunner().invoke(cli, ["plot", str(reports["k2"]), str(reports["k4"])])
    assert res.exit_code == 0, res.output
    text = res.stdout
    assert max(len(line) for line in _lines(text)) <= 80
    assert "speed-up vs k; red line: 1.0 (break-even)" in text
    assert "k (num_speculative_tokens)" in text
    assert text.count("speed-up per category, median and 95% CI") == 2
    assert text.count("decode tok/s per run; a slope means drift") == 2
    assert text.count("per-position acceptance (marginal: vLLM's definition)") == 2
    # one report alone has no k sweep
    one = CliRunner().invoke(cli, ["plot", str(reports["k2"]), "--only", "k"])
    assert one.exit_code == 1 and "nothing to plot for k" in one.output


def test_k_sweep_points_come_from_the_reports(reports: dict[str, Path]) -> None:
    from mtpwatch.core.reports import figures

    loaded = reportfile.load_all([reports["k4"], reports["k2"]])
    points = figures.k_sweep(loaded)
    assert [p.k for p in points] == [2, 4]
    for p, path in zip(points, (reports["k2"], reports["k4"]), strict=True):
        assert p.speedup.median == json.loads(path.read_text(encoding="utf-8"))["speedup"]["median"]


def test_plot_svg(reports: dict[str, Path], tmp_path: Path) -> None:
    svg = tmp_path / "sweep.svg"
    res = CliRunner().invoke(cli, ["plot", str(reports["sweep"]), "--only", "length", "--svg", str(svg)])
    assert res.exit_code == 0, res.output
    body = svg.read_text(encoding="utf-8")
    assert body.startswith("<svg") and body.rstrip().endswith("</svg>")
    assert "break-even" in body.replace("&#160;", " ")


def test_plot_bad_input_is_one_line(tmp_path: Path) -> None:
    missing = CliRunner().invoke(cli, ["plot", str(tmp_path / "nope.json")])
    assert missing.exit_code == 1
    assert missing.output.strip() == f"Error: report not found: {tmp_path / 'nope.json'}"
    other = tmp_path / "other.json"
    other.write_text('{"tool": "something else"}', encoding="utf-8")
    res = CliRunner().invoke(cli, ["plot", str(other)])
    assert res.exit_code == 1 and "not an mtpwatch bench report" in res.output
    assert len(res.output.strip().splitlines()) == 1
    bad = CliRunner().invoke(cli, ["plot", str(other), "--only", "pie"])
    assert bad.exit_code == 2 and "unknown figure 'pie'" in bad.output


def _rate(row: dict[str, object]) -> float:
    value = row["decode_tok_s"]
    assert isinstance(value, float)
    return value


def test_compare_matches_prompts_and_recomputes(reports: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cmp.json"
    res = CliRunner().invoke(
        cli, ["compare", str(reports["k2"]), str(reports["k4"]), "--json-file", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in _lines(res.stdout)) <= 80
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert len(doc["matched"]) == 6  # one prompt of each of the 6 categories of 'all'
    # the speed-up of each report is recomputed from its runs: median of per-pair B/A
    for rep, path in zip(doc["reports"], (reports["k2"], reports["k4"]), strict=True):
        runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
        a = {(r["prompt"], r["pair"]): _rate(r) for r in runs if r["arm"] == "a" and not r["warmup"]}
        ratios = [_rate(r) / a[(r["prompt"], r["pair"])] for r in runs if r["arm"] == "b" and not r["warmup"]]
        assert rep["pairs"] == len(ratios) == 12
        assert rep["speedup"]["median"] == pytest.approx(statistics.median(ratios))
    ref, other = doc["reports"]
    assert ref["diff_vs_reference"] is None and ref["k"] == 2 and other["k"] == 4
    d = other["diff_vs_reference"]
    assert d["median"] == pytest.approx(other["speedup"]["median"] - ref["speedup"]["median"])
    assert d["ci_low"] <= d["median"] <= d["ci_high"]
    assert "reference" in res.stdout
    # both reports carry provenance and were measured the same way: nothing to warn about
    assert "warning:" not in res.stdout


def test_compare_warns_when_provenance_differs(reports: dict[str, Path], tmp_path: Path) -> None:
    docs = []
    for name, gpu, version in (("x", "H100 SXM", "0.32.0"), ("y", "GB10", "0.33.1")):
        doc = json.loads(reports["k2"].read_text(encoding="utf-8"))
        doc["meta"] = {
            "label": name,
            "gpu": {"name": gpu},
            "temperature": 0.0,
            "prompt_set": {"hash": "sha256:same"},
            "arms": {"a": {"vllm_version": version}, "b": {"vllm_version": version}},
        }
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        docs.append(path)
    res = CliRunner().invoke(cli, ["compare", *map(str, docs)])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.stdout.split())
    assert "warning: GPU differs between reports (x: H100 SXM; y: GB10)" in flat
    assert "warning: vLLM version (arm A) differs between reports (x: 0.32.0; y: 0.33.1)" in flat
    assert "prompt set hash differs" not in flat and "temperature differs" not in flat
    # labels from meta name the rows; identical runs give a zero difference
    assert re.search(r"^y\s+2\s+12 .* \+0\.00 \[", res.stdout, re.M)


def test_compare_needs_common_prompts(reports: dict[str, Path]) -> None:
    res = CliRunner().invoke(cli, ["compare", str(reports["k2"]), str(reports["sweep"])])
    assert res.exit_code == 1
    assert "no measurement in common" in res.output and "Traceback" not in res.output
    one = CliRunner().invoke(cli, ["compare", str(reports["k2"])])
    assert one.exit_code == 1 and "at least two reports" in one.output


def test_compare_plot(reports: dict[str, Path]) -> None:
    res = CliRunner().invoke(cli, ["compare", str(reports["k2"]), str(reports["k4"]), "--plot"])
    assert res.exit_code == 0, res.output
    assert "speed-up per report" in res.stdout and "k2.json┤" in res.stdout


def test_bench_against_simulators_records_the_gpu_they_model(reports: dict[str, Path]) -> None:
    meta = json.loads(reports["k2"].read_text(encoding="utf-8"))["meta"]
    # no NVML here: the GPU is the one the simulators' /sim/info models, and says so (issue 40, item 8)
    assert meta["gpu"]["name"] == "GB10 (simulated)" and meta["gpu"]["peak_gbps"] > 0
    assert "/sim/info" in meta["gpu"]["source"] and "simulator" in meta["gpu"]["source"]
    assert all(arm["server_gpu"]["name"] == "GB10 (simulated)" for arm in meta["arms"].values())


def test_compare_warns_across_models_and_gpus_and_cuts_no_name(
    reports: dict[str, Path], tmp_path: Path
) -> None:
    docs: list[Path] = []
    cases = (
        ("k=1 ksweep.json on the Spark", {"name": "GB10"}, "google/gemma-4-E4B-it", "google/gemma-4-E4B-it"),
        (
            "k=1 other.json",
            {"name": None, "source": "unknown (NVML unavailable)"},
            *["google/gemma-4-26B-A4B-it"] * 2,
        ),
        ("mixed", {"name": "GB10"}, "google/gemma-4-26B-A4B-it", "google/gemma-4-E4B-it"),
    )
    for name, gpu, model_a, model_b in cases:
        doc = json.loads(reports["k2"].read_text(encoding="utf-8"))
        doc["meta"]["label"], doc["meta"]["gpu"] = name, gpu
        for arm, model in (("a", model_a), ("b", model_b)):
            doc["meta"]["arms"][arm].update(model=model, served_name=model)
        path = tmp_path / f"{len(docs)}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        docs.append(path)
    res = CliRunner().invoke(cli, ["compare", *map(str, docs)])
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in _lines(res.stdout)) <= 80
    flat = " ".join(res.stdout.split())
    assert "warning: GPU not recorded in k=1 other.json: cannot check it is the same" in flat
    assert "warning: model (arm B) differs between reports (k=1 ksweep.json on the Spark:" in flat
    assert (
        "warning: mixed: A serves google/gemma-4-26B-A4B-it and B serves google/gemma-4-E4B-it: "
        "the speed-up compares two models" in flat
    )
    # whole names: the rows are numbered and a legend names each report
    assert re.search(r"^#1\s+2\s+12 .* reference", res.stdout, re.M)
    assert "#1 = k=1 ksweep.json on the Spark" in flat and "#2 = k=1 other.json" in flat
