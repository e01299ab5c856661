"""The edges a new user trips over say what is wrong, in one line, naming what exists."""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mtpwatch.cli import cli
from mtpwatch.ui.screens.help import HELP_TEXT
from tests.httpd import loopback_server

E4B, E4B_D = "google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant"
RECORDING = Path(__file__).parents[1] / "data/recordings/vllm-0.32-cpu-ngram-k4.mtpw.gz"


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env)


def _one_line_error(res: Result) -> str:
    assert res.exit_code != 0, res.output
    assert "Traceback" not in res.output
    lines = [line for line in res.stderr.splitlines() if line.startswith("Error")]
    assert len(lines) == 1, res.stderr
    return lines[0]


class _NotVllm(BaseHTTPRequestHandler):
    """A web server that is not vLLM: an HTML page on every path."""

    def do_GET(self) -> None:
        body = b"<html><body>hello</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    with loopback_server(_NotVllm) as url:
        yield url


@pytest.fixture()
def no_tui(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Replace the app: the list gets each config the command would have opened the screen with."""
    opened: list[Any] = []

    def run_app(config: Any, **kwargs: Any) -> int:
        opened.append((config, kwargs))
        return 0

    monkeypatch.setattr("mtpwatch.ui.app.run_app", run_app)
    return opened


def test_ab_port_in_a_args_names_what_ab_does() -> None:
    res = _run("ab", "--start", E4B, "--drafter", E4B_D, "-a", "--port 8001", "--gpu", "GB10", "--plan")
    line = _one_line_error(res)
    assert "--port is set by mtpwatch" in line and "ab --start and bench --start pick free ports" in line
    assert "ab --port" not in line and "drop it from the vLLM flags" in line


def test_snapshot_since_the_same_server(sims: tuple[str, str]) -> None:
    port = sims[1].rsplit(":", 1)[1]
    for since in (sims[1], f"localhost:{port}", f"http://127.0.0.1:{port}/metrics"):
        line = _one_line_error(_run("snapshot", sims[1], "--since", since))
        assert "is the same server as" in line and "an earlier saved page" in line
        assert "swap" not in line
    assert _run("snapshot", sims[1], "--since", sims[0]).exit_code == 0  # two servers: fine


def test_attach_refuses_a_server_that_is_not_vllm_before_the_screen(web: str, no_tui: list[Any]) -> None:
    line = _one_line_error(_run("attach", web))
    assert web in line and "Prometheus" in line
    assert no_tui == []  # no screen saying "disconnected"
    snapshot = _one_line_error(_run("snapshot", web))
    assert line.split(": ", 1)[1] == snapshot.split(": ", 1)[1]  # the same words as snapshot


def test_attach_still_waits_for_a_server_that_is_not_up_yet(no_tui: list[Any]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = _run("attach", f"127.0.0.1:{port}")  # nothing listens: the monitor opens and waits
    assert res.exit_code == 0, res.output
    assert len(no_tui) == 1


def test_attach_usage_makes_the_url_optional() -> None:
    usage = _run("attach", "--help").output.splitlines()[0]
    assert usage == "Usage: cli attach [OPTIONS] [URL]..." or usage.endswith("attach [OPTIONS] [URL]...")


def test_a_config_file_that_is_not_there_is_an_error(tmp_path: Path) -> None:
    line = _one_line_error(_run("snapshot", "--help", env={"MTPWATCH_CONFIG": "nosuch.toml"}))
    assert "MTPWATCH_CONFIG=nosuch.toml: no such file" in line
    line = _one_line_error(_run("snapshot", "--help", env={"MTPWATCH_CONFIG": str(tmp_path)}))
    assert "is a folder" in line
    assert _run("snapshot", "--help", env={"MTPWATCH_CONFIG": "/dev/null"}).exit_code == 0


@pytest.fixture(scope="module")
def report(sims: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("edges")
    res = _run("bench", "--ab", *sims, "--prompts", "short", "--limit", "1", "--runs", "4", "--no-progress",
               "--json-file", str(folder / "ab.json"), "--jsonl", str(folder / "ab.jsonl"))  # fmt: skip
    assert res.exit_code == 0, res.output
    return folder / "ab.json"


def _corrupt(good: bytes) -> bytes:
    bad = bytearray(gzip.compress(good))
    for i in range(12, min(len(bad) - 8, 40)):
        bad[i] ^= 0xFF
    return bytes(bad)


def test_a_corrupt_gzip_is_called_corrupt_not_empty(report: Path, tmp_path: Path) -> None:
    rec = tmp_path / "rec.mtpw.gz"
    rec.write_bytes(_corrupt(gzip.decompress(RECORDING.read_bytes())))
    cut = tmp_path / "cut.mtpw.gz"
    cut.write_bytes(RECORDING.read_bytes()[:15])  # the gzip header, then nothing whole
    empty = tmp_path / "empty.mtpw.gz"
    empty.write_bytes(b"")
    for path in (rec, cut):
        line = _one_line_error(_run("replay", str(path), "--json"))
        assert "corrupt gzip" in line and "empty" not in line
    assert "is empty" in _one_line_error(_run("replay", str(empty), "--json"))
    log = tmp_path / "ab.jsonl.gz"
    log.write_bytes(_corrupt((report.parent / "ab.jsonl").read_bytes()))
    assert "corrupt gzip" in _one_line_error(_run("bench", "--resume", str(log)))
    bad_report = tmp_path / "ab.json.gz"
    bad_report.write_bytes(_corrupt(report.read_bytes()))
    for command in (("compare", str(bad_report), str(report)), ("plot", str(bad_report))):
        assert "corrupt gzip" in _one_line_error(_run(*command))
    good = tmp_path / "good.json.gz"
    good.write_bytes(gzip.compress(report.read_bytes()))  # a gzipped report is read as it is
    assert _run("compare", str(good), str(report)).exit_code == 0


def test_compare_footnote_only_with_a_marked_row(report: Path, tmp_path: Path) -> None:
    same = _run("compare", str(report), str(report))
    assert same.exit_code == 0, same.output
    assert "excludes 0" not in same.stdout and "]*" not in same.stdout
    # The two reports' runs set to fixed speeds (every pair 1.0× in the reference, 3.0× in the other):
    # the loaded machine's scatter between the simulators' runs cannot blur the difference.
    doc = json.loads(report.read_text(encoding="utf-8"))
    for name, b_speed in (("ref.json", 10.0), ("faster.json", 30.0)):
        for run in doc["runs"]:
            if run["decode_tok_s"]:
                run["decode_tok_s"] = b_speed if run["arm"] == "b" else 10.0
        (tmp_path / name).write_text(json.dumps(doc), encoding="utf-8")
    marked = _run("compare", str(tmp_path / "ref.json"), str(tmp_path / "faster.json"))
    assert marked.exit_code == 0, marked.output
    assert "]*" in marked.stdout and "* the 95% CI of Δ excludes 0" in marked.stdout


def test_help_says_esc_closes_it() -> None:
    head = HELP_TEXT.split("\n## ", 1)[0]
    assert "**Esc**" in head and "closes this help" in head


@pytest.mark.parametrize(("extra", "expected"), [((), {8}), (("--max-tokens", "64"), {64})])
def test_ab_restart_measures_the_sets_own_length(
    extra: tuple[str, ...], expected: set[int], no_tui: list[Any]
) -> None:
    args = ["ab", "--start", E4B, "--drafter", E4B_D, "--gpu", "GB10", "--restart", "--prompts", "short"]
    res = _run(*args, *extra)
    assert res.exit_code == 0, res.output
    ((config, _kwargs),) = no_tui
    prompts = config.measure.prompts
    assert prompts and {p.max_tokens for p in prompts} == expected
