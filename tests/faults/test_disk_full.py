"""A full disk while writing results: one clear line, nothing lost, no half-written file.

The disk is a 16 KiB tmpfs filled up (when the suite runs as root and may mount one), and
/dev/full (always: every write to it fails with ENOSPC).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mtpwatch.sim.harness import SimThread

from .conftest import ROOT, run_mtpwatch


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A mounted 16 KiB tmpfs with an old result in it and no free space left."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the /dev/full case still runs")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        (mount / "ab.json").write_text('{"old": "result"}\n', encoding="utf-8")
        with (mount / "filler").open("wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"x" * 512)
            except OSError:
                pass
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def bench(out: Path, a: str, b: str) -> subprocess.CompletedProcess[str]:
    return run_mtpwatch(
        "bench", "--ab", a, b, "--prompts", "short", "--limit", "1", "--runs", "2", "--warmup", "0",
        "--max-tokens", "16", "--json-file", str(out), timeout=120,
    )  # fmt: skip


def fallback_of(result: subprocess.CompletedProcess[str], target: str) -> Path:
    """The one line saying the results went elsewhere; returns that file."""
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if target in line]
    assert len(lines) == 1, result.stderr
    assert "No space left on device" in lines[0] and "wrote " in lines[0], lines[0]
    return Path(lines[0].rsplit("wrote ", 1)[1].split()[0])


def test_bench_json_to_a_full_tmpfs_keeps_the_old_file_and_the_results(full_disk: Path) -> None:
    target = full_disk / "ab.json"
    with SimThread(speed=50, spec=False) as a, SimThread(speed=50) as b:
        result = bench(target, a, b)
    fallback = fallback_of(result, str(target))
    try:
        assert json.loads(fallback.read_text(encoding="utf-8"))["runs"]  # the results, complete
    finally:
        fallback.unlink(missing_ok=True)
    assert target.read_text(encoding="utf-8") == '{"old": "result"}\n'  # not truncated, not replaced
    assert sorted(p.name for p in full_disk.iterdir()) == ["ab.json", "filler"]  # no temp file left
    assert "speed-up B/A" in result.stdout  # the table was printed all the same


def test_bench_json_to_dev_full() -> None:
    with SimThread(speed=50, spec=False) as a, SimThread(speed=50) as b:
        result = bench(Path("/dev/full"), a, b)
    fallback_of(result, "/dev/full").unlink()
    assert "speed-up B/A" in result.stdout


def test_snapshot_json_to_a_full_disk_is_one_error_line() -> None:
    with SimThread(speed=50) as url, open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "mtpwatch", "snapshot", url, "--json"],
            cwd=ROOT,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert result.stderr.strip() == "Error: cannot write the output: No space left on device"
