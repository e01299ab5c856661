"""OpenMetrics pages, as vLLM 0.33/0.34's Rust frontend serves them (tests/data/openmetrics-rust.md):
the fast parser agrees with prometheus_client's OpenMetrics parser, the snapshot knows speculation
without trusting the spec totals' presence, a restart shows without `_created`, and the filtered
scraper falls back to the full page (the Rust frontend has no `/metrics/`) or, where a server honours
the filter, joins its OpenMetrics answers into one valid page."""

from __future__ import annotations

import httpx
import pytest

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.metrics.filtered import ScrapeFilter
from mtpwatch.core.metrics.parse import (
    MetricsFormatError,
    is_openmetrics,
    parse_samples,
)
from mtpwatch.core.metrics.rates import is_restart
from mtpwatch.core.metrics.snapshot import SNAPSHOT_PREFIXES, parse_snapshot
from mtpwatch.sim.harness import running_sim
from tests.datadir import DataDir
from tests.reference import same_samples
from tests.reference_metrics import parse_samples_reference

FIXTURES = ("openmetrics-rust-mtp-k3.txt", "openmetrics-rust-baseline.txt")


@pytest.mark.parametrize("name", FIXTURES)
def test_fast_parser_agrees_with_the_openmetrics_reference(data: DataDir, name: str) -> None:
    text = data.text(name)
    assert is_openmetrics(text)
    for prefixes in (("vllm:",), SNAPSHOT_PREFIXES):
        fast = parse_samples(text, prefixes)
        assert fast and same_samples(fast, parse_samples_reference(text, prefixes))


@pytest.mark.parametrize(
    "line",
    [
        'vllm:x_total{a="1"} 5 1700000000.5',  # OpenMetrics timestamps are seconds
        'vllm:x_total{a="1"} 5 # {trace_id="ab # c"} 1.0',  # an exemplar (a ' # ' in its label too)
        'vllm:x_total{a="1 # 2"} 5 # {trace_id="t"} 1.0 1700000000.25',
        'vllm:x_total{a="1 # 2"} 7',  # ' # ' inside a label value is not an exemplar
    ],
)
def test_openmetrics_timestamps_and_exemplars(line: str) -> None:
    text = f"# TYPE vllm:x counter\n{line}\n# EOF\n"
    fast = parse_samples(text)
    assert same_samples(fast, parse_samples_reference(text))
    # the same sample line as Prometheus text: a timestamp there is milliseconds
    if "#" not in line.split("}", 1)[1] and line.count(" ") == 2 and "1700000000.5" in line:
        prom = parse_samples(f"# TYPE vllm:x_total counter\n{line}\n")
        assert prom[0].timestamp == pytest.approx(1700000000.5 / 1000) and fast[0].timestamp == 1700000000.5


def test_an_exemplar_on_a_prometheus_page_is_still_an_error() -> None:
    with pytest.raises(MetricsFormatError, match="line 1"):
        parse_samples('vllm:x_total{a="1"} 5 # {trace_id="t"} 1.0\n')


def test_snapshot_of_the_rust_frontend_pages(data: DataDir) -> None:
    busy = parse_snapshot(data.text("openmetrics-rust-mtp-k3.txt"))
    assert (busy.exposition, busy.created, busy.speculative) == ("openmetrics", None, True)
    assert busy.num_speculative_tokens == 3 and busy.accepted_per_pos == (268.0, 210.0, 152.0)
    assert (busy.drafts, busy.draft_tokens, busy.accepted) == (323.0, 969.0, 630.0)
    assert busy.iteration_tokens is not None and busy.iteration_tokens.count == 333
    assert busy.restart_signal == "counters going down (no _created on this page)"
    # the three spec totals are there from start-up, with or without a drafter: not speculation
    idle = parse_snapshot(data.text("openmetrics-rust-baseline.txt"))
    assert idle.schema == "vllm" and not idle.speculative and idle.num_speculative_tokens == 0
    # a restart of that server: only the counters going down say so
    assert is_restart(busy, idle)
    assert not is_restart(idle, busy)


def test_speculating_before_the_first_draft(data: DataDir) -> None:
    """On the Rust frontend's page no draft yet means unknown, unless the start-up log named a method;
    tokens generated without a draft mean off. A Prometheus page says it from the start."""
    idle = data.text("openmetrics-rust-baseline.txt")
    assert parse_snapshot(idle).speculating() is None
    assert parse_snapshot(idle).speculating(configured=True) is True
    served = idle.replace(
        'vllm:generation_tokens_total{model_name="google/gemma-4-E4B-it",engine="0"} 0',
        ('vllm:generation_tokens_total{model_name="google/gemma-4-E4B-it",engine="0"} 40'),
    )
    assert parse_snapshot(served).generation_tokens == 40
    assert parse_snapshot(served).speculating(configured=True) is False
    assert parse_snapshot(data.text("openmetrics-rust-mtp-k3.txt")).speculating() is True
    assert parse_snapshot(data.text("metrics-baseline-before.txt")).speculating() is False


def test_snapshot_json_says_how_a_restart_is_seen(data: DataDir) -> None:
    from mtpwatch.core.metrics.report import snapshot_report

    busy = parse_snapshot(data.text("openmetrics-rust-mtp-k3.txt"))
    idle = parse_snapshot(data.text("openmetrics-rust-baseline.txt"))
    report = snapshot_report(idle, busy)  # counters went down between the two pages
    assert report["restarted"] is True and report["exposition"] == "openmetrics"
    assert report["restart_signal"] == "counters going down (no _created on this page)"
    assert report["speculative"] is None  # no draft, no token yet: the page cannot tell
    assert snapshot_report(busy)["speculative"] is True


def test_a_nan_histogram_sum_makes_that_mean_unknown(data: DataDir) -> None:
    """The Rust frontend's histogram writes `_sum NaN` after a non-finite observation (its own test,
    rust/src/metrics/src/histogram.rs:150-165): that histogram is unknown, the page still reads."""
    labels = '{model_name="google/gemma-4-E4B-it",engine="0"}'
    page = data.text("openmetrics-rust-mtp-k3.txt")
    text = page.replace(
        f"vllm:iteration_tokens_total_sum{labels} 1077.0", f"vllm:iteration_tokens_total_sum{labels} NaN"
    )
    assert text != page
    snap = parse_snapshot(text)
    assert snap.iteration_tokens is None
    assert snap.drafts == 323.0 and snap.num_speculative_tokens == 3
    nan_drafts = page.replace(
        f"vllm:spec_decode_num_drafts_total{labels} 323", f"vllm:spec_decode_num_drafts_total{labels} NaN"
    )
    with pytest.raises(MetricsFormatError, match="finite number"):  # a NaN counter stays an error
        parse_snapshot(nan_drafts)


def test_a_recorded_page_stays_openmetrics(data: DataDir) -> None:
    """Recordings keep only the lines the snapshot reads, and an OpenMetrics page's `# EOF`: replayed,
    a Rust-frontend baseline is not taken for a speculating server."""
    from mtpwatch.core.record.schema import filter_page

    text = data.text("openmetrics-rust-baseline.txt")
    lines = filter_page(text)
    assert lines[-1] == "# EOF" and not any(line.startswith("# HELP") for line in lines)
    replayed = parse_snapshot("\n".join(lines) + "\n")  # as session/replay.py rebuilds it
    assert replayed == parse_snapshot(text) and replayed.exposition == "openmetrics"
    assert filter_page(data.text("metrics-baseline-after.txt"))[-1] != "# EOF"


def test_a_prometheus_page_still_says_created(data: DataDir) -> None:
    snap = parse_snapshot(data.text("metrics-ngram-k4-after.txt"))
    assert snap.exposition == "prometheus" and snap.created is not None
    assert snap.restart_signal == "a new _created or counters going down"


async def test_simulated_rust_frontend_page_is_valid_openmetrics() -> None:
    """The simulator's Rust-frontend page: OpenMetrics, no `_created`, no process families; the fast
    parser and prometheus_client's OpenMetrics parser agree on it after traffic."""
    async with (
        running_sim(speed=400, k=3, frontend="rust", vllm_log="0.34-gpu") as url,
        httpx.AsyncClient() as client,
    ):
        await client.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 40})
        response = await client.get(url + "/metrics")
    text = response.text
    assert response.headers["content-type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    assert text.endswith("# EOF\n") and "_created" not in text and "process_" not in text
    assert same_samples(parse_samples(text, ("vllm:",)), parse_samples_reference(text, ("vllm:",)))
    snap = parse_snapshot(text)
    assert snap.speculative and snap.num_speculative_tokens == 3 and snap.drafts > 0


@pytest.mark.parametrize("honour", [False, True], ids=["rust-frontend-404", "a-later-release-honours"])
async def test_filtered_scraper_on_openmetrics(honour: bool) -> None:
    """The Rust frontend answers `/metrics/?name[]=…` with 404 (no such route): the full page, its
    reason naming OpenMetrics and how a restart is seen. Were a release to honour the filter, the
    tiers' OpenMetrics answers join into one page with one `# EOF`."""
    async with running_sim(speed=400, k=3, frontend="rust", vllm_log="0.34-gpu") as url:
        async with httpx.AsyncClient() as http:
            if honour:
                await http.post(url + "/sim/fault", json={"metrics_filter": "honour"})
            await http.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 40})
            full = parse_snapshot((await http.get(url + "/metrics")).text)
        async with VllmClient(url, scrape_filter=ScrapeFilter()) as client:
            await client.scrape_text()  # the probe
            text = await client.scrape_text()
            state = client.scrape_state
    assert state is not None
    if not honour:
        assert state.mode == "full"
        assert state.reason == "OpenMetrics, filter refused: 404 Not Found; restarts: counters going down"
    else:
        assert state.mode == "filtered"
        # (not valid for the reference parser: a histogram's _sum and _count without its buckets)
        assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    snap = parse_snapshot(text)
    assert snap.exposition == "openmetrics"
    assert (snap.drafts, snap.accepted, snap.generation_tokens) == (
        full.drafts,
        full.accepted,
        full.generation_tokens,
    )
