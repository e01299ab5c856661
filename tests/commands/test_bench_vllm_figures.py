"""`bench` reads like `vllm bench serve`: each arm's model named, per-request percentiles, wording."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from mtpwatch.commands.bench import command
from mtpwatch.core.ab.latency import percentile
from mtpwatch.sim.harness import SimThread

QUICK = ["--prompts", "short", "--limit", "1", "--runs", "4", "--no-progress"]


@pytest.fixture(scope="module")
def sims() -> Iterator[tuple[str, str, str]]:
    with (
        SimThread(preset="gemma4-e4b-gb10", spec=False, speed=20) as a,
        SimThread(preset="gemma4-e4b-gb10", spec=True, speed=20) as b,
        SimThread(preset="gemma4-31b-h100", spec=True, speed=20) as big,
    ):
        yield a, b, big


def _bench(*args: str) -> tuple[str, str]:
    res = CliRunner().invoke(command, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout, res.stderr


def test_percentiles_and_request_throughput_match_the_runs(
    sims: tuple[str, str, str], tmp_path: Path
) -> None:
    out = tmp_path / "ab.json"
    text, _ = _bench("--ab", sims[0], sims[1], *QUICK, "--json-file", str(out))
    for name in ("TTFT", "TPOT", "ITL"):  # vLLM's words (vllm/benchmarks/serve.py:1425, :1431)
        assert f"Median {name} (ms)" in text and f"{name} p50" not in text
        for p in (90, 99):
            assert f"P{p} {name} (ms)" in text
    assert "request throughput (req/s)" in text
    assert "output token throughput (tok/s)" in text
    doc = json.loads(out.read_text(encoding="utf-8"))
    for arm in ("a", "b"):
        lat = doc["arms"][arm]["latency"]
        runs = [r for r in doc["runs"] if r["arm"] == arm and not r["warmup"] and r["error"] is None]
        # At concurrency 1 a run is one request: its TPOT is 1 / its decode tok/s, its TTFT the run's.
        tpots = [1000.0 / r["decode_tok_s"] for r in runs]
        ttfts = [1000.0 * r["ttft_s"] for r in runs]
        for p in (50, 90, 99):
            assert lat["tpot_ms"][f"p{p}"] == pytest.approx(percentile(tpots, p), rel=2e-3)
            assert lat["ttft_ms"][f"p{p}"] == pytest.approx(percentile(ttfts, p), rel=2e-3, abs=2e-3)
        assert lat["tpot_ms"]["p50"] == pytest.approx(statistics.median(tpots), rel=2e-3)
        assert lat["ttft_ms"]["p50"] <= lat["ttft_ms"]["p90"] <= lat["ttft_ms"]["p99"]
        assert lat["itl_ms"]["p50"] <= lat["itl_ms"]["p90"] <= lat["itl_ms"]["p99"]
        # ITL is per streamed chunk: at least one gap per request with two chunks or more.
        assert lat["itl_ms"]["n"] >= len(runs)
        assert lat["completed"] == len(runs)
        walls = sum(r["wall_s"] for r in runs)
        assert lat["request_throughput"] == pytest.approx(len(runs) / walls, rel=2e-3)
        # vLLM's output token throughput: output tokens / duration (serve.py:780), here the arm's
        tokens = sum(r["tokens"] for r in runs)
        assert tokens > 0 and lat["output_throughput"] == pytest.approx(tokens / walls, rel=2e-3)
    row = next(x for x in text.splitlines() if x.startswith("output token throughput (tok/s)"))
    shown = [float(x) for x in row.split()[4:6]]
    assert shown == [pytest.approx(doc["arms"][a]["latency"]["output_throughput"], abs=0.06) for a in "ab"]
    # Speculation puts several tokens in a chunk: B's chunks are fewer for the same tokens.
    assert doc["arms"]["b"]["latency"]["itl_ms"]["n"] < doc["arms"]["a"]["latency"]["itl_ms"]["n"]


def test_each_arm_names_its_model_and_different_models_are_flagged(sims: tuple[str, str, str]) -> None:
    text, err = _bench("--ab", sims[0], sims[2], *QUICK)
    assert f"A = baseline (MTP off):   {sims[0]} · model google/gemma-4-E4B-it" in text
    assert f"B = treatment (MTP on):   {sims[2]} · model google/gemma-4-31B-it" in text
    warning = (
        "A serves google/gemma-4-E4B-it and B serves google/gemma-4-31B-it: the speed-up compares two models"
    )
    assert warning in text and warning in err  # said before the runs and again under the table
    same, _ = _bench("--ab", sims[0], sims[1], *QUICK)
    assert "serves" not in same and "same server" not in same


def test_one_server_against_itself_is_flagged(sims: tuple[str, str, str]) -> None:
    port = sims[1].rsplit(":", 1)[1]
    text, err = _bench("--ab", sims[1], f"http://localhost:{port}", *QUICK)
    assert "A and B are the same server" in text and "A and B are the same server" in err


def test_one_server_says_no_abba(sims: tuple[str, str, str], tmp_path: Path) -> None:
    out = tmp_path / "one.json"
    text, _ = _bench(sims[1], *QUICK, "--json-file", str(out))
    assert "ABBA" not in text
    assert "schedule: one server (runs one after another, never concurrent)" in text
    assert f"server: {sims[1]} · model google/gemma-4-E4B-it" in text
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert "ABBA" not in doc["measurement"]
    assert doc["arms"]["a"]["latency"]["tpot_ms"]["n"] == 2 * 3  # 2 prompts x 3 measured runs
