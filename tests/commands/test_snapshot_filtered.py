"""`mtpwatch snapshot URL` scrapes through vLLM's `/metrics/?name[]=…` and says so; where the filter is
not honoured it reads the whole page; the numbers are the full page's either way."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.core.http.generation import GenerationRequest
from mtpwatch.sim.harness import SimThread

_NOT_NUMBERS = {"meta", "source", "since", "scrape"}


def _traffic(url: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        for i in range(2):
            body = GenerationRequest(prompt=f"say {i}", max_tokens=20).body(
                include_usage=True, continuous_usage=False, return_token_ids=False
            )
            assert http.post("/v1/completions", json={**body, "stream": False}).status_code == 200


@pytest.mark.parametrize(
    ("mode", "text"),
    [
        ("honour", "filtered, "),
        ("ignore", "full page (filter ignored)"),
        ("404", "full page (filter refused: 404"),
    ],
)
def test_snapshot_json_says_how_it_scraped(tmp_path: Path, mode: str, text: str) -> None:
    with SimThread(speed=400, k=3, seed=2, metrics_filter=mode) as url:
        _traffic(url)
        page = tmp_path / "page.txt"
        page.write_text(httpx.get(url + "/metrics").text, encoding="utf-8")  # the idle server's full page
        live = CliRunner().invoke(cli, ["snapshot", url, "--json"])
        table = CliRunner().invoke(cli, ["snapshot", url])
    saved = CliRunner().invoke(cli, ["snapshot", str(page), "--json"])
    assert live.exit_code == 0 and saved.exit_code == 0 and table.exit_code == 0, live.output + saved.output
    doc, ref = json.loads(live.stdout), json.loads(saved.stdout)
    assert doc["scrape"]["text"].startswith(text)
    assert doc["scrape"]["mode"] == ("filtered" if mode == "honour" else "full page")
    assert doc["generation_tokens"] > 0 and doc["drafts"] > 0
    assert {k: v for k, v in doc.items() if k not in _NOT_NUMBERS} == {
        k: v for k, v in ref.items() if k not in _NOT_NUMBERS
    }
    assert ref["scrape"] is None  # a saved page was not scraped
    assert f"scrape: {doc['scrape']['text']}" in table.stdout
    if mode == "honour":
        assert doc["scrape"]["bytes"] < page.stat().st_size / 2
