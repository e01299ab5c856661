"""`mtpwatch snapshot` on saved pages and on a loopback HTTP server; errors are one line, non-zero exit."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mtpwatch.cli import cli
from mtpwatch.commands.options import free_port
from mtpwatch.core.metrics.snapshot import parse_snapshot
from tests.datadir import DataDir

REQUIRED_KEYS = {
    "model",
    "speculative",
    "num_speculative_tokens",
    "drafts",
    "draft_tokens",
    "accepted",
    "acceptance_rate",
    "mean_acceptance_length",
    "per_position",
    "per_position_conditional",
    "generation_tokens",
    "prompt_tokens",
    "requests_running",
    "kv_cache_usage",
}


@pytest.fixture
def after_page(data: DataDir) -> str:
    """A real vLLM 0.32 page (ngram k=4) after a request."""
    return str(data.path("metrics-ngram-k4-after.txt"))


@pytest.fixture
def before_page(data: DataDir) -> str:
    """The same server's page before it."""
    return str(data.path("metrics-ngram-k4-before.txt"))


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["snapshot", *args], env=env)


@pytest.fixture
def baseline_page(data: DataDir) -> str:
    """A real vLLM 0.32 page of a server without speculation."""
    return str(data.path("metrics-baseline-after.txt"))


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_json_between_pages(after_page: str, before_page: str) -> None:
    result = run(after_page, "--since", before_page, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) >= REQUIRED_KEYS
    after = parse_snapshot(Path(after_page).read_text(encoding="utf-8"))
    before = parse_snapshot(Path(before_page).read_text(encoding="utf-8"))
    drafts = after.drafts - before.drafts
    assert data["window"] == "between pages"
    assert data["model"] == "spec" and data["speculative"] is True
    assert data["num_speculative_tokens"] == 4
    assert data["drafts"] == drafts
    assert data["per_position"] == pytest.approx(
        [(a - b) / drafts for a, b in zip(after.accepted_per_pos, before.accepted_per_pos, strict=True)]
    )
    assert data["mean_acceptance_length"] == pytest.approx(1 + (after.accepted - before.accepted) / drafts)


def test_json_totals_for_baseline(baseline_page: str) -> None:
    result = run(baseline_page, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["window"] == "since server start"
    assert data["speculative"] is False and data["num_speculative_tokens"] == 0
    assert data["acceptance_rate"] is None and data["per_position"] == []


def test_table_labels_every_number(after_page: str, before_page: str) -> None:
    result = run(after_page, "--since", before_page)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if line.startswith("  ")]
    assert len(rows) >= 10
    assert all(("between pages" in r) or ("second page" in r) or r.rstrip().endswith("page") for r in rows)
    assert "on, k=4" in result.stdout
    totals = run(after_page)
    assert "since server start" in totals.stdout and "between pages" not in totals.stdout


def test_table_names_other_models(tmp_path: Path) -> None:
    text = 'vllm:generation_tokens_total{engine="0",model_name="a"} 1\n'
    text += 'vllm:generation_tokens_total{engine="0",model_name="b"} 2\n'
    path = tmp_path / "two.txt"
    path.write_text(text, encoding="utf-8")
    result = run(str(path), "--model", "b")
    assert result.exit_code == 0, result.output
    assert "models on the page: a, b (showing b" in result.stdout


def test_missing_file() -> None:
    assert_one_line_error(run("no-such-page.txt"), "no such file", "no-such-page.txt")


def test_not_a_metrics_page(data: DataDir) -> None:
    assert_one_line_error(run(str(data.path("sse-baseline.txt"))), "not a Prometheus /metrics page")


def test_page_without_vllm_families(tmp_path: Path) -> None:
    path = tmp_path / "stats-off.txt"
    path.write_text("# TYPE http_requests_total counter\nhttp_requests_total 3.0\n", encoding="utf-8")
    assert_one_line_error(run(str(path)), "--disable-log-stats")


def test_unknown_model(after_page: str) -> None:
    assert_one_line_error(run(after_page, "--model", "nope"), "'nope'", "spec")


def test_malformed_page(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_text('vllm:generation_tokens_total{model_name="x"} twelve\n', encoding="utf-8")
    assert_one_line_error(run(str(path)), "line 1", "invalid value")


def test_connection_refused() -> None:
    result = run(f"http://127.0.0.1:{free_port()}")
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.fixture
def server(after_page: str) -> Iterator[tuple[str, list[str | None]]]:
    """A loopback /metrics server that wants `Authorization: Bearer secret`."""
    seen: list[str | None] = []
    body = Path(after_page).read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            auth = self.headers.get("Authorization")
            seen.append(auth)
            if auth != "Bearer secret":
                self.send_response(401)
                self.end_headers()
                return
            if self.path != "/metrics":
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_url_with_api_key(server: tuple[str, list[str | None]]) -> None:
    url, seen = server
    result = run(url, "--api-key", "secret", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["num_speculative_tokens"] == 4
    assert seen[-1] == "Bearer secret"


def test_url_with_env_api_key_and_metrics_path(server: tuple[str, list[str | None]]) -> None:
    url, _ = server
    result = run(url + "/metrics", "--json", env={"VLLM_API_KEY": "secret"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == "spec"


def test_url_without_key_is_one_line_error(server: tuple[str, list[str | None]]) -> None:
    url, _ = server
    result = run(url, env={"VLLM_API_KEY": ""})
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert any(w in result.stderr.lower() for w in ("401", "api key", "api-key", "unauthorized"))
