"""Hostile /metrics pages and `mtpwatch snapshot` inputs: one clear line, non-zero exit, never NaN in JSON.

Each test is the regression test of a bug found by adversarial QA (see the test's docstring).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from mtpwatch.cli import cli
from mtpwatch.commands.options import free_port
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.errors import NotVllmError
from mtpwatch.core.http.urls import normalize_url
from mtpwatch.core.metrics.parse import MetricsFormatError
from mtpwatch.core.metrics.rates import Collector
from mtpwatch.core.metrics.snapshot import parse_snapshot
from tests.datadir import DataDir

DRAFTS = re.compile(r"^(vllm:spec_decode_num_drafts_total\{[^}]*\}) \S+$", re.MULTILINE)


@pytest.fixture
def after_page(data: DataDir) -> Path:
    """A real vLLM 0.32 page (ngram k=4) after a request."""
    return data.path("metrics-ngram-k4-after.txt")


@pytest.fixture
def before_page(data: DataDir) -> Path:
    """The same server's page before it."""
    return data.path("metrics-ngram-k4-before.txt")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["snapshot", *args])


def one_line_error(result: Result, *fragments: str) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _strict_json(text: str) -> Any:
    def reject(constant: str) -> Any:
        raise AssertionError(f"JSON contains {constant}")

    return json.loads(text, parse_constant=reject)


def _with_drafts_value(page: Path, value: str) -> str:
    return DRAFTS.sub(lambda m: f"{m.group(1)} {value}", page.read_text(encoding="utf-8"))


def test_duplicate_series_is_an_error_not_a_doubled_count(tmp_path: Path, after_page: Path) -> None:
    """Bug: a repeated series was summed twice (drafts 102 instead of 51, mean acceptance length 2.88)."""
    text = after_page.read_text(encoding="utf-8")
    repeated = "\n".join(m.group(0) for m in DRAFTS.finditer(text))
    with pytest.raises(MetricsFormatError, match="duplicate series vllm:spec_decode_num_drafts_total"):
        parse_snapshot(text + repeated + "\n")
    page = tmp_path / "dup.txt"
    page.write_text(text + repeated + "\n", encoding="utf-8")
    one_line_error(run(str(page)), "duplicate series")


@pytest.mark.parametrize("value", ["+Inf", "NaN", "-5"])
def test_non_finite_or_negative_counter_is_an_error(tmp_path: Path, value: str, after_page: Path) -> None:
    """Bug: `+Inf` drafts reached `--json` as `Infinity` (invalid JSON) and a mean acceptance length of 1."""
    page = tmp_path / "bad.txt"
    page.write_text(_with_drafts_value(after_page, value), encoding="utf-8")
    with pytest.raises(MetricsFormatError, match="finite number"):
        parse_snapshot(page.read_text(encoding="utf-8"))
    one_line_error(run(str(page), "--json"), "spec_decode_num_drafts_total")


def test_nan_gauges_become_unknown_and_json_stays_valid(tmp_path: Path, after_page: Path) -> None:
    text = after_page.read_text(encoding="utf-8")
    text = re.sub(r"^(vllm:num_requests_(?:running|waiting)\{[^}]*\}) \S+$", r"\1 NaN", text, flags=re.M)
    snap = parse_snapshot(text)
    assert snap.requests_running is None and snap.requests_waiting is None
    page = tmp_path / "nan.txt"
    page.write_text(text, encoding="utf-8")
    result = run(str(page), "--json")
    assert result.exit_code == 0, result.output
    data = _strict_json(result.stdout)
    assert data["requests_running"] is None
    assert data["drafts"] == snap.drafts


def test_swapped_pages_are_named_not_reported_as_a_restart(after_page: Path, before_page: Path) -> None:
    """Bug: `snapshot BEFORE --since AFTER` printed zeros labelled "server restarted in between"."""
    assert parse_snapshot(before_page.read_text()).created == parse_snapshot(after_page.read_text()).created
    one_line_error(run(str(before_page), "--since", str(after_page)), "swap")


def test_real_restart_between_pages_still_counts_from_the_restart(
    tmp_path: Path, after_page: Path, before_page: Path
) -> None:
    after = parse_snapshot(after_page.read_text(encoding="utf-8"))
    assert after.created is not None
    # Same counters as BEFORE (zeros) but a later _created: the server restarted, nothing was swapped.
    later = after.created + 60.0
    text = re.sub(
        r"^(vllm:\w+_created\{[^}]*\}) \S+$",
        lambda m: f"{m.group(1)} {later!r}",
        before_page.read_text(),
        flags=re.M,
    )
    restarted = tmp_path / "restarted.txt"
    restarted.write_text(text, encoding="utf-8")
    assert parse_snapshot(text).created == later
    result = run(str(restarted), "--since", str(after_page), "--json")
    assert result.exit_code == 0, result.output
    data = _strict_json(result.stdout)
    assert data["restarted"] is True
    assert data["drafts"] == parse_snapshot(text).drafts


def test_empty_source_is_not_the_current_directory() -> None:
    """Bug: `snapshot ""` said " is a directory" (Path("") is ".")."""
    one_line_error(run(""), "empty source")


def test_other_scheme_is_a_bad_url_not_a_missing_file() -> None:
    """Bug: `snapshot ftp://x` said "no such file"."""
    one_line_error(run("ftp://x"), "scheme must be http:// or https://")


def test_unbalanced_ipv6_bracket_is_named() -> None:
    """Bug: `http://[::1` was reported as a bad port."""
    with pytest.raises(ValueError, match=r"unbalanced \[ \]"):
        normalize_url("http://[::1")
    with pytest.raises(ValueError, match="port must be a number"):
        normalize_url("http://[::1]:99999")


def test_refused_without_port_says_which_port_was_tried() -> None:
    """Bug: `localhost` (port 80) only said "is the server running?"; vLLM listens on 8000."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(
            "[Errno 111] Connection refused", request=request
        ) from ConnectionRefusedError(111, "Connection refused")

    async def scrape(url: str) -> str:
        client = VllmClient(url, transport=httpx.MockTransport(refuse))
        try:
            await client.scrape_text()
        except Exception as exc:
            return str(exc)
        finally:
            await client.aclose()
        raise AssertionError("no error")

    import asyncio

    no_port = asyncio.run(scrape("http://localhost"))
    assert "connection refused" in no_port and "8000" in no_port
    with_port = asyncio.run(scrape(f"127.0.0.1:{free_port()}"))
    assert "connection refused" in with_port and "is the server running?" in with_port


async def test_scrape_of_duplicate_page_is_not_vllm_error(data: DataDir) -> None:
    text = data.text("metrics-ngram-k4-after.txt")
    page = text + "\n".join(m.group(0) for m in DRAFTS.finditer(text)) + "\n"

    def serve(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=page, headers={"content-type": "text/plain; version=0.0.4"})

    async with VllmClient("127.0.0.1:8000", transport=httpx.MockTransport(serve)) as client:
        with pytest.raises(NotVllmError, match="duplicate series"):
            await client.scrape()


def test_rates_never_nan_or_negative_across_restart_and_idle(after_page: Path, before_page: Path) -> None:
    before = parse_snapshot(before_page.read_text(encoding="utf-8"))
    after = parse_snapshot(after_page.read_text(encoding="utf-8"))
    c = Collector()
    c.add(before, 0.0)
    c.add(after, 1.0)
    c.add(after, 2.0)  # idle second: every ratio must be None, not NaN
    assert c.add(before, 3.0) is True  # counters went down: restart
    c.add(after, 4.0)
    for rates in (c.window(1.0, 2.0), c.window(10.0, 4.0), c.since(0.5, 4.0)):
        assert rates is not None
        for name in ("acceptance_rate", "mean_acceptance_length", "server_tok_s", "mean_step_s"):
            value = getattr(rates, name)
            assert value is None or (math.isfinite(value) and value >= 0), (name, value)
        assert all(d >= 0 for d in rates.accepted_per_pos)
