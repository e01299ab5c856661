"""Snapshots from real vLLM 0.32 pages and from synthetic multi-engine / multi-model / llama.cpp pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mtpwatch.core.metrics.parse import MetricsFormatError
from mtpwatch.core.metrics.report import snapshot_report
from mtpwatch.core.metrics.snapshot import (
    MetricsSnapshot,
    UnknownModelError,
    detect_schema,
    parse_snapshot,
    snapshot_from_samples,
)
from tests.datadir import DataDir
from tests.reference_metrics import parse_samples_reference


def raw_values(text: str, name: str) -> list[float]:
    """Values of `name` read with a plain regex, independently of the parsers under test."""
    return [float(v) for v in re.findall(rf"^{re.escape(name)}(?:\{{[^\n]*\}})? (\S+)$", text, re.M)]


def test_fast_snapshot_equals_snapshot_from_reference_parser(metrics_page: Path) -> None:
    text = metrics_page.read_text(encoding="utf-8")
    assert parse_snapshot(text) == snapshot_from_samples(
        parse_samples_reference(text), None, detect_schema(text)
    )


def test_ngram_k4_page(data: DataDir) -> None:
    text = data.text("metrics-ngram-k4-after.txt")
    snap = parse_snapshot(text)
    positions = set(re.findall(r'spec_decode_num_accepted_tokens_per_pos_total\{[^}]*position="(\d+)"', text))
    assert snap.schema == "vllm"
    assert snap.speculative
    assert snap.num_speculative_tokens == len(positions) == 4
    assert snap.model == "spec" and snap.models == ("spec",) and snap.engines == ("0",)
    assert snap.drafts == sum(raw_values(text, "vllm:spec_decode_num_drafts_total"))
    assert snap.draft_tokens == sum(raw_values(text, "vllm:spec_decode_num_draft_tokens_total"))
    assert snap.accepted == sum(raw_values(text, "vllm:spec_decode_num_accepted_tokens_total"))
    assert list(snap.accepted_per_pos) == raw_values(
        text, "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    )
    # vLLM's identity: the per-position counts add up to the accepted count.
    assert sum(snap.accepted_per_pos) == snap.accepted
    assert snap.generation_tokens == sum(raw_values(text, "vllm:generation_tokens_total"))
    assert snap.prompt_tokens == sum(raw_values(text, "vllm:prompt_tokens_total"))
    assert snap.itl is not None
    assert snap.itl.count == sum(raw_values(text, "vllm:inter_token_latency_seconds_count"))
    assert snap.itl.sum == sum(raw_values(text, "vllm:inter_token_latency_seconds_sum"))
    for h in (snap.ttft, snap.tpot, snap.e2e, snap.iteration_tokens):
        assert h is not None and h.count > 0
    assert snap.requests_running == raw_values(text, "vllm:num_requests_running")[0]
    assert snap.kv_cache_usage == raw_values(text, "vllm:kv_cache_usage_perc")[0]
    assert snap.request_success["length"] == raw_values(text, "vllm:request_success_total")[1]
    assert snap.created == raw_values(text, "vllm:generation_tokens_created")[0]
    assert snap.cache_config["num_gpu_blocks"] == re.search(r'num_gpu_blocks="(\d+)"', text).group(1)  # type: ignore[union-attr]
    assert "engine" not in snap.cache_config


def test_mtp_k1_page_gives_k1(data: DataDir) -> None:
    snap = parse_snapshot(data.text("metrics-mtp-k1-random-after.txt"))
    assert snap.speculative
    assert snap.num_speculative_tokens == 1
    assert len(snap.accepted_per_pos) == 1
    assert snap.model == "spec-mtp"


@pytest.mark.parametrize("name", ["baseline-before", "baseline-after"])
def test_baseline_page_says_speculation_off(name: str, data: DataDir) -> None:
    text = data.text(f"metrics-{name}.txt")
    assert "spec_decode" not in text
    snap = parse_snapshot(text)
    assert snap.schema == "vllm"
    assert not snap.speculative
    assert snap.num_speculative_tokens == 0
    assert snap.drafts == 0 and snap.accepted_per_pos == ()
    assert snap.generation_tokens == sum(raw_values(text, "vllm:generation_tokens_total"))


def test_page_without_vllm_families_is_schema_none(data: DataDir) -> None:
    text = "\n".join(
        line
        for line in data.text("metrics-ngram-k4-after.txt").splitlines()
        if not line.startswith(("vllm:", "# HELP vllm:", "# TYPE vllm:"))
    )
    assert detect_schema(text) == "none"
    snap = parse_snapshot(text)
    assert snap == MetricsSnapshot()
    assert snap.schema == "none" and not snap.speculative and snap.requests_running is None
    with pytest.raises(UnknownModelError):
        parse_snapshot(text, model="spec")


MULTI = """\
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="big"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="big"} 30.0
vllm:spec_decode_num_drafts_total{engine="0",model_name="small"} 5.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="big"} 1000.5
vllm:spec_decode_num_drafts_created{engine="1",model_name="big"} 1000.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="big"} 20.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="big"} 60.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="big"} 12.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="big"} 20.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="big",position="0"} 8.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="big",position="1"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="big",position="1"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="big",position="0"} 14.0
vllm:generation_tokens_total{engine="0",model_name="big"} 100.0
vllm:generation_tokens_total{engine="1",model_name="big"} 200.0
vllm:generation_tokens_total{engine="0",model_name="small"} 7.0
vllm:num_requests_running{engine="0",model_name="big"} 1.0
vllm:num_requests_running{engine="1",model_name="big"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="big"} 0.2
vllm:kv_cache_usage_perc{engine="1",model_name="big"} 0.4
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="big"} 1.0
vllm:inter_token_latency_seconds_bucket{engine="1",le="0.01",model_name="big"} 2.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="big"} 3.0
vllm:inter_token_latency_seconds_bucket{engine="1",le="+Inf",model_name="big"} 4.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="big"} 3.0
vllm:inter_token_latency_seconds_count{engine="1",model_name="big"} 4.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="big"} 0.3
vllm:inter_token_latency_seconds_sum{engine="1",model_name="big"} 0.5
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100"} 1.0
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="100"} 1.0
"""


def test_multi_engine_values_are_summed_for_the_first_model() -> None:
    snap = parse_snapshot(MULTI)
    assert snap.models == ("big", "small")
    assert snap.model == "big"
    assert snap.engines == ("0", "1")
    assert snap.drafts == 10.0 + 30.0
    assert snap.draft_tokens == 20.0 + 60.0
    assert snap.accepted == 12.0 + 20.0
    assert snap.accepted_per_pos == (8.0 + 14.0, 4.0 + 6.0)  # ordered by position, not page order
    assert snap.num_speculative_tokens == 2
    assert snap.generation_tokens == 300.0
    assert snap.requests_running == 3.0
    assert snap.kv_cache_usage == pytest.approx((0.2 + 0.4) / 2)  # a fraction: the mean over engines
    assert snap.itl is not None
    assert snap.itl.count == 7.0 and snap.itl.sum == pytest.approx(0.8)
    assert not hasattr(snap.itl, "buckets")  # no view reads a bucket: neither parsed nor scraped
    assert snap.created == 1000.0  # the oldest engine's
    assert snap.cache_config == {"block_size": "16", "num_gpu_blocks": "100"}


def test_model_selection_and_unknown_model() -> None:
    small = parse_snapshot(MULTI, model="small")
    assert small.model == "small" and small.models == ("big", "small")
    assert small.drafts == 5.0 and small.generation_tokens == 7.0
    assert small.requests_running is None
    with pytest.raises(UnknownModelError) as err:
        parse_snapshot(MULTI, model="nope")
    assert "big, small" in str(err.value)


LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 120
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 400
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 1
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 300
# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter
llamacpp:spec_decode_num_accepted_tokens_total 210
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:spec_decode_num_drafts_total 100
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 90
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 70
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 50
"""


def test_llamacpp_schema() -> None:
    snap = parse_snapshot(LLAMACPP)
    assert snap.schema == "llamacpp"
    assert snap.model is None and snap.models == ()
    assert snap.speculative and snap.num_speculative_tokens == 3
    assert snap.drafts == 100 and snap.draft_tokens == 300 and snap.accepted == 210
    assert snap.accepted_per_pos == (90, 70, 50)
    assert snap.generation_tokens == 400 and snap.prompt_tokens == 120
    assert snap.requests_running == 1 and snap.requests_waiting == 0
    report = snapshot_report(snap)
    assert report["mean_acceptance_length"] == pytest.approx(1 + 210 / 100)


def test_llamacpp_without_draft_model_is_not_speculative() -> None:
    text = "llamacpp:tokens_predicted_total 5\nllamacpp:spec_decode_num_drafts_total 0\n"
    snap = parse_snapshot(text)
    assert snap.schema == "llamacpp" and not snap.speculative


def test_malformed_kept_line_raises(data: DataDir) -> None:
    bad = data.text("metrics-ngram-k4-after.txt").replace(
        'vllm:generation_tokens_total{engine="0",model_name="spec"} 256.0',
        'vllm:generation_tokens_total{engine="0",model_name="spec" 256.0',
    )
    with pytest.raises(MetricsFormatError, match=r"^line \d+: unclosed"):
        parse_snapshot(bad)


def test_snapshot_report_totals_and_deltas(data: DataDir) -> None:
    before = parse_snapshot(data.text("metrics-ngram-k4-before.txt"))
    after = parse_snapshot(data.text("metrics-ngram-k4-after.txt"))
    totals = snapshot_report(after)
    deltas = snapshot_report(after, before)
    assert totals["window"] == "since server start" and deltas["window"] == "between pages"
    assert deltas["drafts"] == after.drafts - before.drafts
    assert totals["drafts"] == after.drafts
    assert deltas["requests_running"] == after.requests_running
    assert len(deltas["per_position"]) == deltas["num_speculative_tokens"] == 4
    off = snapshot_report(parse_snapshot(data.text("metrics-baseline-after.txt")))
    assert off["speculative"] is False
    assert off["acceptance_rate"] is None and off["per_position"] == [] and off["output_from_drafts"] is None
