"""The fleet commands as a user runs them (README lines): in a terminal, headless --json, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import Procs, Tty, start_sims


def test_attach_several_urls_opens_the_fleet_view_in_a_terminal(procs: Procs) -> None:
    urls = start_sims(procs, ["--load", "2", "--speed", "4", "--count", "3"])
    assert len(urls) == 1  # start_sims reads one line per process; --count prints one per server
    sim = procs.procs[-1]
    assert sim.stdout is not None
    urls += [sim.stdout.readline().rsplit(" on ", 1)[1].strip() for _ in range(2)]
    tty = Tty(procs, ["attach", *urls])
    hosts = [u.split("://")[1] for u in urls]
    tty.wait_for("fleet", "accept", *hosts, "up")
    assert tty.quit() == 0


def test_attach_file_json_prints_one_document(procs: Procs, tmp_path: Path) -> None:
    urls = start_sims(
        procs, ["--load", "2", "--speed", "4"], ["--load", "2", "--speed", "4", "--acceptance", "0.05"]
    )
    listing = tmp_path / "servers.txt"
    listing.write_text(f"# my servers\n{urls[0]}\n\n{urls[1]}  # the odd one\nhttp://127.0.0.1:9\n")
    out = subprocess.run(
        [sys.executable, "-m", "mtpwatch", "attach", "--file", str(listing), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    rows = {r["source"]: r for r in doc["rows"]}
    assert list(rows) == [*urls, "http://127.0.0.1:9"]
    assert rows["http://127.0.0.1:9"]["state"] == "down"
    for url in urls:
        assert rows[url]["state"] == "up" and rows[url]["k"] == 2
        assert rows[url]["drafts"] > 0 and rows[url]["acceptance_rate"] is not None
    assert rows[urls[1]]["acceptance_rate"] < 0.2 < rows[urls[0]]["acceptance_rate"]
    # two rows with numbers cannot say which is odd: nothing is marked, and the rule says why
    assert doc["outliers"] == [] and "at least 2" in doc["outlier_rule"]
    # at least the two scrapes of each server that its window's numbers need (more at this machine's pace)
    assert doc["scraping"]["scrapes"] >= 2 * len(urls)


def _error(args: list[str]) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "mtpwatch", *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    lines = [x for x in out.stderr.splitlines() if x.startswith("Error:")]
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_fleet_bad_input_is_one_error_line(tmp_path: Path) -> None:
    assert "--file: no such file" in _error(["attach", "--file", str(tmp_path / "nope.txt")])
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    assert "lists no URL" in _error(["attach", "--file", str(empty)])
    bad = tmp_path / "bad.txt"
    bad.write_text("http://127.0.0.1:8000\nftp://x\n")
    assert "line 2" in _error(["attach", "--file", str(bad)])
    assert "give no URL" in _error(
        ["attach", "--prometheus", "http://127.0.0.1:9090", "http://127.0.0.1:8000"]
    )
    assert "not a PromQL label selector" in _error(
        ["attach", "--prometheus", "http://127.0.0.1:9090", "--selector", "job=vllm"]
    )
    assert "--selector goes with --prometheus" in _error(
        ["attach", "http://a:1", "http://b:2", "--selector", "{}"]
    )
    assert "cannot reach Prometheus" in _error(["snapshot", "--prometheus", "http://127.0.0.1:9", "--json"])
    assert "--model goes with one URL" in _error(["attach", "http://a:1", "http://b:2", "--model", "m"])


def test_fleet_scale_bench_runs() -> None:
    bench = Path(__file__).resolve().parents[1] / "bench" / "fleet_scale.py"
    out = subprocess.run(
        [sys.executable, str(bench), "--sizes", "2,4", "--seconds", "2", "--procs", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert any(
        line.startswith("fleet_scale:  4 servers at 4 Hz: app CPU") and "4 rows up" in line for line in lines
    )
    assert any("2 → 4 servers" in line for line in lines)
