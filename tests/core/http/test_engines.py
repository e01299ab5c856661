"""What differs between vLLM and llama.cpp's llama-server, on pages and streams recorded from a real
llama-server (tests/data/llamacpp-*, sse-llamacpp-*; tests/real_llamacpp/capture.py wrote them)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from mtpwatch.core.http import engines
from mtpwatch.core.http.generation import ChunkDecoder, GenerationStats
from mtpwatch.core.http.sse import DONE
from mtpwatch.core.metrics.rates import delta_rates
from mtpwatch.core.metrics.report import snapshot_report
from mtpwatch.core.metrics.snapshot import UnknownModelError, parse_snapshot
from tests.datadir import DataDir
from tests.reference_metrics import self_check_ok
from tests.sse_payloads import iter_sse_payloads

DATA = DataDir().root
NAME = "gemma-llama-draft"  # the --alias the capture's server ran with


def page(name: str) -> Any:
    return json.loads((DATA / name).read_text())["page"]


def transcript(name: str) -> tuple[dict[str, Any], list[bytes]]:
    text = (DATA / name).read_text(encoding="utf-8")
    summary = json.loads(re.search(r"^# summary: (.*)$", text, re.M).group(1))  # type: ignore[union-attr]
    body = text.split("\n\n", 1)[1].encode()
    return summary, iter_sse_payloads([body])


def decode(payloads: list[bytes]) -> tuple[GenerationStats, list[Any]]:
    decoder = ChunkDecoder()
    stats = GenerationStats(clock=lambda: 0.0)
    stats.start(0.0)
    events = []
    for i, payload in enumerate(payloads):
        if payload == DONE:
            break
        event = decoder.decode(payload, 1.0 + 0.01 * i)
        if event is not None:
            stats.add(event)
            events.append(event)
    return stats, events


RAW = re.compile(r"^llamacpp:([a-z_]+)(?:\{position=\"(\d+)\"\})? (\S+)$", re.M)


def raw(name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for metric, pos, value in RAW.findall((DATA / name).read_text()):
        out[f"{metric}[{pos}]" if pos else metric] = float(value)
    return out


# --- /metrics --------------------------------------------------------------------------------------


def test_recorded_page_is_read_under_any_model_name() -> None:
    text = (DATA / "llamacpp-metrics-after.txt").read_text()
    r = raw("llamacpp-metrics-after.txt")
    for model in (None, NAME, "whatever the client calls it"):
        snap = parse_snapshot(text, model)
        assert snap.schema == "llamacpp" and snap.model == model and snap.models == ()
        assert snap.speculative and snap.num_speculative_tokens == 4
        assert snap.drafts == r["spec_decode_num_drafts_total"]
        assert snap.draft_tokens == r["spec_decode_num_draft_tokens_total"]
        assert snap.accepted == r["spec_decode_num_accepted_tokens_total"]
        assert snap.accepted_per_pos == tuple(
            r[f"spec_decode_num_accepted_tokens_per_pos_total[{i}]"] for i in range(4)
        )
        assert snap.generation_tokens == r["tokens_predicted_total"]
        assert (snap.ttft, snap.itl, snap.tpot, snap.kv_cache_usage, snap.created) == (None,) * 5


def test_model_names_still_checked_where_the_page_has_them() -> None:
    vllm_page = (DATA / "metrics-ngram-k4-after.txt").read_text()
    with pytest.raises(UnknownModelError):
        parse_snapshot(vllm_page, "not-served")


def test_recorded_deltas_are_one_request_with_variable_drafts() -> None:
    before = parse_snapshot((DATA / "llamacpp-metrics-before.txt").read_text(), NAME)
    after = parse_snapshot((DATA / "llamacpp-metrics-after.txt").read_text(), NAME)
    b, a = raw("llamacpp-metrics-before.txt"), raw("llamacpp-metrics-after.txt")
    rates = delta_rates(before, after, 2.0, "request")
    d_drafts = a["spec_decode_num_drafts_total"] - b.get("spec_decode_num_drafts_total", 0.0)
    d_tokens = a["spec_decode_num_draft_tokens_total"] - b.get("spec_decode_num_draft_tokens_total", 0.0)
    d_acc = a["spec_decode_num_accepted_tokens_total"] - b.get("spec_decode_num_accepted_tokens_total", 0.0)
    assert not rates.restarted
    assert (rates.drafts, rates.draft_tokens, rates.accepted) == (d_drafts, d_tokens, d_acc)
    assert rates.generation_tokens == 64
    assert rates.acceptance_rate == pytest.approx(d_acc / d_tokens)
    assert rates.mean_acceptance_length == pytest.approx(1 + d_acc / d_drafts)
    assert self_check_ok(rates)  # 1 + Σ marginal = mean length: llama.cpp's per-position counts add up
    assert d_tokens < 4 * d_drafts  # drafts vary in length: draft tokens ≠ drafts × n-max
    assert (
        engines.draft_note("llama.cpp", 4, d_tokens, d_drafts)
        == f"drafts ≤ 4, mean {d_tokens / d_drafts:.2f} tokens"
    )
    assert engines.draft_note("vllm", 4, d_tokens, d_drafts) == ""


def test_snapshot_report_names_the_engine_and_what_it_lacks() -> None:
    after = parse_snapshot((DATA / "llamacpp-metrics-after.txt").read_text())
    report = snapshot_report(after)
    assert report["engine"] == "llama.cpp"
    assert report["mean_draft_length"] == pytest.approx(after.draft_tokens / after.drafts)
    assert report["mean_ttft_s"] is None and report["kv_cache_usage"] is None
    assert set(report["missing"]) == {"latency", "kv", "counts"}
    vllm = snapshot_report(parse_snapshot((DATA / "metrics-ngram-k4-after.txt").read_text()))
    assert vllm["engine"] == "vllm" and vllm["missing"] == {}
    assert vllm["mean_draft_length"] == pytest.approx(4.0)  # vLLM drafts are always k long


# --- /v1/models and /props -------------------------------------------------------------------------


def test_model_list_of_llama_server_and_of_vllm() -> None:
    entries = engines.parse_model_list(page("llamacpp-v1-models.json"))
    assert [e.id for e in entries] == [NAME]
    assert entries[0].max_model_len == 2048
    # llama-server's other list alone (older builds answer only this one)
    only_models = {"models": [{"name": "m.gguf", "model": "/x/m.gguf"}]}
    assert engines.parse_model_list(only_models) == [engines.ModelEntry("m.gguf", "/x/m.gguf")]
    vllm = {"object": "list", "data": [{"id": "spec", "root": "/m", "max_model_len": 2048, "parent": None}]}
    assert engines.parse_model_list(vllm) == [engines.ModelEntry("spec", "/m", 2048, None)]
    bad: object
    for bad in ([], {"data": [{"name": "x"}]}, {"models": [{}]}, {"object": "list"}):
        with pytest.raises(ValueError):
            engines.parse_model_list(bad)


def test_props_and_slots_say_engine_build_and_speculation() -> None:
    props, slots = page("llamacpp-props.json"), page("llamacpp-slots.json")
    # /props alone says 'none' for a server that drafts: slot 0 of /slots says what it runs
    assert props["default_generation_settings"]["params"]["speculative.types"] == "none"
    info = engines.parse_props(props, slots)
    assert info is not None and info.engine == "llama.cpp"
    assert info.spec_types == "draft-simple" and info.speculative is True and info.build
    without_slots = engines.parse_props(props)
    assert (
        without_slots is not None and without_slots.speculative is None and without_slots.spec_types is None
    )
    assert engines.parse_props({"version": "0.32.0"}) is None  # not a /props page


async def test_identify_asks_props_then_slots() -> None:
    pages = {"/props": page("llamacpp-props.json"), "/slots": page("llamacpp-slots.json")}
    asked: list[str] = []

    async def get_json(path: str) -> Any:
        asked.append(path)
        return pages.get(path)

    info = await engines.identify(get_json)
    assert info is not None and info.spec_types == "draft-simple" and asked == ["/props", "/slots"]
    asked.clear()
    pages.clear()  # vLLM: no /props
    assert await engines.identify(get_json) is None and asked == ["/props"]


# --- streams ---------------------------------------------------------------------------------------


def test_timings_per_token_gives_exact_per_chunk_counts() -> None:
    summary, payloads = transcript("sse-llamacpp-completions-timings.txt")
    stats, events = decode(payloads)
    result = stats.finish(t=9.0)
    assert result.completion_tokens == summary["usage"]["completion_tokens"] == 64
    assert sum(e.tokens for e in events) == 64
    assert result.tokens_exact and not result.approximate
    assert result.timings is not None and result.timings.predicted_n == 64
    after = parse_snapshot((DATA / "llamacpp-metrics-after.txt").read_text())
    before = parse_snapshot((DATA / "llamacpp-metrics-before.txt").read_text())
    # this request's own draft counts = the counter deltas around it
    assert result.timings.draft_n == after.draft_tokens - before.draft_tokens
    assert result.timings.draft_n_accepted == after.accepted - before.accepted
    assert result.timings.acceptance_rate == pytest.approx(
        (after.accepted - before.accepted) / (after.draft_tokens - before.draft_tokens)
    )


def test_plain_stream_total_is_exact_from_the_final_usage() -> None:
    summary, payloads = transcript("sse-llamacpp-completions.txt")
    stats, _ = decode(payloads)
    result = stats.finish(t=9.0)
    assert result.completion_tokens == summary["usage"]["completion_tokens"] == 64
    assert result.tokens_exact  # the answer's count is not approximate...
    assert result.timings is not None and result.timings.draft_n  # ...and the final timings are read


def test_chat_stream_from_llama_server() -> None:
    summary, payloads = transcript("sse-llamacpp-chat.txt")
    stats, _ = decode(payloads)
    result = stats.finish(t=9.0)
    assert result.completion_tokens == summary["usage"]["completion_tokens"]
    assert result.tokens_exact and result.text


def test_stream_extras_only_for_llama_cpp() -> None:
    assert engines.stream_extras("llama.cpp") == {"timings_per_token": True}
    assert engines.stream_extras("vllm") == {} and engines.stream_extras("unknown") == {}


def test_timings_parser_is_strict_about_shapes() -> None:
    assert engines.LlamaTimings.from_json(None) is None
    assert engines.LlamaTimings.from_json({"predicted_ms": 3.0}) is None
    t = engines.LlamaTimings.from_json({"predicted_n": 10, "predicted_ms": 500, "draft_n": True})
    assert t is not None and t.predicted_n == 10 and t.draft_n is None
    assert t.acceptance_rate is None
