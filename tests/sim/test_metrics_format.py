"""/metrics of the simulator against the real vLLM 0.32 pages in tests/data."""

from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

from mtpwatch.sim.harness import running_sim
from mtpwatch.sim.metrics import SimMetrics
from tests.datadir import DataDir


def _page(model: str, k: int) -> str:
    metrics = SimMetrics(model_name=model, k=k, max_model_len=2048, cache_info={"block_size": "16"})
    return metrics.render().decode()


def _meta_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("# ") and "vllm:" in line]


def _label_names(text: str) -> dict[str, set[frozenset[str]]]:
    out: dict[str, set[frozenset[str]]] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("vllm:"):
            continue
        for s in family.samples:
            out.setdefault(s.name, set()).add(frozenset(s.labels))
    return out


def _le_values(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r'(vllm:\w+)_bucket\{.*le="([^"]+)"', line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def test_help_type_lines_match_real_spec_page(data: DataDir) -> None:
    real = data.text("metrics-ngram-k4-after.txt")
    sim = _page("spec", 4)
    assert _meta_lines(sim) == _meta_lines(real)


def test_help_type_lines_match_real_baseline_page(data: DataDir) -> None:
    real = data.text("metrics-baseline-after.txt")
    sim = _page("base", 0)
    assert _meta_lines(sim) == _meta_lines(real)
    assert "spec_decode" not in sim


def test_series_label_names_and_buckets_match(data: DataDir) -> None:
    real = data.text("metrics-ngram-k4-after.txt")
    sim = _page("spec", 4)
    real_labels, sim_labels = _label_names(real), _label_names(sim)
    # cache_config_info carries every CacheConfig field as a label; the simulator keeps a subset
    real_labels.pop("vllm:cache_config_info")
    assert sim_labels.pop("vllm:cache_config_info") == {frozenset({"engine", "block_size"})}
    assert sim_labels == real_labels
    assert _le_values(sim) == _le_values(real)


def test_spec_series_precreated_at_zero_for_k_positions() -> None:
    text = SimMetrics(model_name="m", k=3, max_model_len=4096, cache_info={}).render().decode()
    pattern = r'vllm:spec_decode_num_accepted_tokens_per_pos_total\{.*position="(\d+)"\} 0\.0'
    positions = re.findall(pattern, text)
    assert positions == ["0", "1", "2"]
    assert 'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 0.0' in text
    assert "vllm:spec_decode_num_drafts_created" in text


async def test_served_page_parses_and_has_model_name() -> None:
    async with running_sim(preset="gemma4-31b-h100", served_model_name="g31", speed=50) as url:
        import httpx

        async with httpx.AsyncClient() as client:
            resp = await client.get(url + "/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    families = {f.name for f in text_string_to_metric_families(resp.text)}
    assert "vllm:spec_decode_num_drafts" in families
    positions = set(re.findall(r'per_pos_total\{engine="0",model_name="g31",position="(\d+)"\}', resp.text))
    assert positions == {str(i) for i in range(8)}
