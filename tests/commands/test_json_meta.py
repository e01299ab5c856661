"""Every JSON mtpwatch writes starts with the same `meta` block (README: "Reports that stand on
their own")."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner

from mtpwatch import __version__
from mtpwatch.cli import cli
from mtpwatch.commands.options import JSON_ALIAS_NOTE
from tests.httpd import loopback_server

E4B, E4B_D = "google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant"
QUICK = ["--prompts", "short", "--limit", "1", "--runs", "2", "--no-progress"]
META_KEYS = {
    "schema",
    "mtpwatch_version",
    "created_utc",
    "argv",
    "host",
    "python",
    "label",
    "metadata",
    "arms",
}


class _Prometheus(BaseHTTPRequestHandler):
    """Just enough of Prometheus' query API: one vLLM instance that is up, no other series."""

    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query).get("query", [""])[0]
        result = (
            [{"metric": {"instance": "10.0.0.1:8000", "job": "vllm"}, "value": [1.0e9, "1"]}]
            if query.startswith("up")
            else []
        )
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def prometheus() -> Iterator[str]:
    with loopback_server(_Prometheus) as url:
        yield url


@pytest.fixture(scope="module")
def report(sims: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("meta") / "ab.json"
    res = CliRunner().invoke(cli, ["bench", "--ab", *sims, *QUICK, "--json-file", str(path)])
    assert res.exit_code == 0, res.output
    return path


Case = Callable[[tuple[str, str], str, Path, Path, Any], Any]


def _stdout(args: list[str]) -> Any:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _file(args: list[str], path: Path) -> Any:
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    return json.loads(path.read_text(encoding="utf-8"))


def _sweep(sims: Any, prom: str, report: Path, tmp: Path, mp: pytest.MonkeyPatch) -> Any:
    mp.setenv("MTPWATCH_SIM_GPU_DIR", str(tmp))
    sim = f"{sys.executable} -m mtpwatch sim --speed 40"
    args = ["bench", "--start", E4B, "--drafter", E4B_D, "--sweep-k", "0,1", "--vllm", sim, "--gpu", "GB10"]
    return _file([*args, *QUICK, "--json-file", str(tmp / "sweep.json")], tmp / "sweep.json")


def _sweep_plan(sims: Any, prom: str, report: Path, tmp: Path, mp: pytest.MonkeyPatch) -> Any:
    args = ["bench", "--start", E4B, "--drafter", E4B_D, "--sweep-k", "0,1", "--gpu", "GB10", "--plan"]
    return _file([*args, "--json-file", str(tmp / "plan.json")], tmp / "plan.json")


CASES: dict[str, Case] = {
    "bench --json-file": lambda s, p, r, t, m: json.loads(r.read_text(encoding="utf-8")),
    "bench --json": lambda s, p, r, t, m: _stdout(["bench", "--ab", *s, *QUICK, "--json"]),
    "snapshot URL --json": lambda s, p, r, t, m: _stdout(["snapshot", s[1], "--json"]),
    "snapshot --prometheus --json": lambda s, p, r, t, m: _stdout(
        ["snapshot", "--prometheus", p, "--json", "--label", "fleet-1"]
    ),
    "attach URL URL --json": lambda s, p, r, t, m: _stdout(["attach", *s, "--json", "--window", "1"]),
    "attach --prometheus --json": lambda s, p, r, t, m: _stdout(["attach", "--prometheus", p, "--json"]),
    "replay --json": lambda s, p, r, t, m: _stdout(
        [
            "replay",
            str(Path(__file__).parents[1] / "data/recordings/vllm-0.32-cpu-ngram-k4.mtpw.gz"),
            "--json",
        ]
    ),
    "compare --json": lambda s, p, r, t, m: _stdout(["compare", str(r), str(r), "--json"]),
    "compare --json-file": lambda s, p, r, t, m: _file(
        ["compare", str(r), str(r), "--json-file", str(t / "c.json")], t / "c.json"
    ),
    "roofline --json": lambda s, p, r, t, m: _stdout(
        ["roofline", "--config", "gemma-4-31B-it", "--gpu", "GB10", "-k", "2", "--json"]
    ),
    "bench --start --plan --json": lambda s, p, r, t, m: _stdout(
        ["bench", "--start", E4B, "--drafter", E4B_D, "--sweep-k", "0,1", "--gpu", "GB10", "--plan", "--json"]
    ),
    "ab --start --plan --json": lambda s, p, r, t, m: _stdout(
        ["ab", "--start", E4B, "--drafter", E4B_D, "-k", "2", "--gpu", "GB10", "--plan", "--json"]
    ),
}


@pytest.mark.parametrize(
    "name", [*CASES, "bench --start --sweep-k --json-file", "bench --start --sweep-k --plan --json-file"]
)
def test_every_json_starts_with_meta(
    name: str,
    sims: tuple[str, str],
    prometheus: str,
    report: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = CASES.get(name) or (_sweep_plan if "--plan" in name else _sweep)
    doc = case(sims, prometheus, report, tmp_path, monkeypatch)
    assert isinstance(doc, dict) and next(iter(doc)) == "meta", f"{name}: keys start {list(doc)[:3]}"
    meta = doc["meta"]
    assert set(meta) >= META_KEYS, f"{name}: meta lacks {META_KEYS - set(meta)}"
    assert meta["mtpwatch_version"] == __version__ and meta["created_utc"].endswith("Z")
    assert isinstance(meta["argv"], list) and isinstance(meta["arms"], dict)


def test_the_meta_blocks_say_what_was_measured(sims: tuple[str, str], prometheus: str) -> None:
    snap = _stdout(
        ["snapshot", "--prometheus", prometheus, "--json", "--label", "fleet-1", "--metadata", "dc=x"]
    )
    assert snap["meta"]["label"] == "fleet-1" and snap["meta"]["metadata"]["dc"] == "x"
    assert snap["meta"]["metadata"]["source"] == f"Prometheus {prometheus}"
    fleet = _stdout(["attach", *sims, "--json", "--window", "1"])
    assert fleet["meta"]["metadata"]["source"] == "direct /metrics"
    recording = Path(__file__).parents[1] / "data/recordings/vllm-0.32-cpu-ngram-k4.mtpw.gz"
    replay = _stdout(["replay", str(recording), "--json"])
    arm = replay["meta"]["arms"]["a"]
    assert arm["model"] == replay["servers"][0]["model"] and arm["k"] == 4 and arm["method"] == "ngram"
    assert replay["meta"]["metadata"]["recording"] == str(recording)


def test_the_old_json_path_spelling_still_writes_the_file_and_says_it_is_deprecated(
    report: Path, tmp_path: Path
) -> None:
    out = tmp_path / "c.json"
    res = CliRunner().invoke(cli, ["compare", str(report), str(report), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines().count(JSON_ALIAS_NOTE) == 1
    assert next(iter(json.loads(out.read_text(encoding="utf-8")))) == "meta"
    assert "--json" not in res.stdout and res.stdout.strip()  # the table, as before
    flag = CliRunner().invoke(cli, ["compare", str(report), str(report), "--json"])
    assert flag.exit_code == 0 and JSON_ALIAS_NOTE not in flag.stderr
    assert next(iter(json.loads(flag.stdout))) == "meta"


def test_json_takes_no_url_and_one_file() -> None:
    res = CliRunner().invoke(cli, ["bench", "--json", "http://127.0.0.1:9", "--runs", "2"])
    assert res.exit_code == 2 and "--json takes no value now" in res.output
    both = CliRunner().invoke(cli, ["compare", "a.json", "--json", "x.json", "--json-file", "y.json"])
    assert both.exit_code == 2 and "give --json-file PATH once" in both.output
