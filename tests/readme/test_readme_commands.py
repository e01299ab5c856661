"""The README's commands for installing, plotting, comparing, defaults and completion, run as written.

Each block is read from README.md itself, so the README cannot drift from what is tested. Only the
ports change (free ones instead of 8001/8002) and files land in a temporary folder.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mtpwatch.commands.options import free_port

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mtpwatch"


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, re.S | re.M)
    assert match, title
    return match.group(1)


def blocks(title: str, lang: str = "bash") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(title), re.S)


def commands(title: str) -> list[str]:
    return [line for b in blocks(title) for line in b.splitlines() if line.strip()]


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("MTPWATCH_")}
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    out["MTPWATCH_CONFIG"] = os.devnull  # no config file
    out.update(extra)
    return out


def run(line: str, cwd: Path, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env(**extra), capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.timeout(600)
def test_install_with_uv_and_pipx(tmp_path: Path) -> None:
    lines = commands("Install")
    assert lines == ["uv tool install '.[plot]'", "pipx install '.[plot]'"]
    assert shutil.which("uv", path=str(BIN)) and shutil.which("pipx", path=str(BIN))
    tools = {
        "uv": {"UV_TOOL_DIR": str(tmp_path / "uv"), "UV_TOOL_BIN_DIR": str(tmp_path / "uv-bin"),
               "UV_CACHE_DIR": str(CACHE / "uv-cache")},
        "pipx": {"PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "pipx-bin"),
                 "PIPX_MAN_DIR": str(tmp_path / "pipx-man")},
    }  # fmt: skip
    for line in lines:
        extra = tools[line.split()[0]]
        res = run(line, ROOT, **extra)
        assert res.returncode == 0, res.stdout + res.stderr
        exe = Path(next(v for k, v in extra.items() if k.endswith("BIN_DIR"))) / "mtpwatch"
        version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
        assert version.stdout.startswith("mtpwatch, version ")
        # the [plot] extra came along: plotext imports in the tool's own environment
        python = next(exe.resolve().parent.glob("python*"))
        subprocess.run([str(python), "-c", "import plotext"], check=True)


@pytest.mark.timeout(600)
def test_plots_and_comparisons(tmp_path: Path) -> None:
    lines = commands("Plots and comparisons")
    assert len(lines) == 5 and lines[0].endswith("&") and lines[1].endswith("&")
    ports = {"8001": str(free_port()), "8002": str(free_port())}

    def ported(line: str) -> str:
        for old, new in ports.items():
            line = line.replace(old, new)
        return line

    sims = [
        subprocess.Popen(shlex.split(ported(line.rstrip("& "))), cwd=tmp_path, env=env(),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in lines[:2]
    ]  # fmt: skip
    try:
        for proc in sims:  # each prints its URL once it listens
            assert proc.stdout is not None
            for out_line in proc.stdout:
                if "http://127.0.0.1:" in out_line:
                    break
        bench = run(ported(lines[2]), tmp_path)
        assert bench.returncode == 0, bench.stdout + bench.stderr
        reports_that_stand(tmp_path, ported)
    finally:
        for proc in sims:
            proc.terminate()
            proc.wait(timeout=30)
    doc = json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))
    assert [p["length"] for p in doc["points"]] == [8, 16, 32, 64, 128, 256]
    plot = run(lines[3], tmp_path)
    assert plot.returncode == 0, plot.stdout + plot.stderr
    assert max(len(x) for x in plot.stdout.splitlines()) <= 80
    assert "red line: 1.0 (break-even)" in plot.stdout
    assert (tmp_path / "plot-sweep.svg").read_text(encoding="utf-8").startswith("<svg")
    compare = run(lines[4], tmp_path)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    # a report against itself: a zero median difference whose CI holds 0 (no '*')
    assert re.search(r"\+0\.00 \[-\d+\.\d\d,\+\d+\.\d\d\] ", compare.stdout), compare.stdout


def reports_that_stand(tmp_path: Path, ported: Callable[[str], str]) -> None:
    """The 'Reports that stand on their own' block, against the running simulators."""
    first, resume = commands("Reports that stand on their own")
    bench = run(ported(first), tmp_path)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "speed-up vs" in bench.stdout or "decode tok/s per run" in bench.stdout  # --plot drew
    doc = json.loads((tmp_path / "k2.json").read_text(encoding="utf-8"))
    assert doc["meta"]["label"] == "k2-sim" and doc["meta"]["metadata"] == {"image": "sim"}
    assert doc["meta"]["arms"]["b"]["k"] == 2
    log = (tmp_path / "k2.jsonl").read_text(encoding="utf-8").splitlines()
    assert len([x for x in log if '"type": "run"' in x]) == 2 * 4 * 2
    # cut the log as a crash would (keep the header and the first 5 runs), then finish it
    (tmp_path / "k2.jsonl").write_text("\n".join(log[:6]) + "\n", encoding="utf-8")
    again = run(ported(resume), tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    doc = json.loads((tmp_path / "k2.json").read_text(encoding="utf-8"))
    assert len(doc["runs"]) == 16 and doc["gates"] == []
    assert doc["meta"]["resumed"][0]["runs_before"] == 5


def test_config_example_is_valid(tmp_path: Path) -> None:
    (toml,) = blocks("Defaults, https and shell completion", "toml")
    path = tmp_path / "config.toml"
    path.write_text(toml, encoding="utf-8")
    probe = (
        "from mtpwatch.cli import cli\n"
        "ctx = cli.make_context('mtpwatch', ['bench'])\n"
        "cmd = cli.get_command(ctx, 'bench')\n"
        "sub = cmd.make_context('bench', ['--ab', 'http://a:1', 'http://b:2'], parent=ctx)\n"
        "print(sub.params['runs'], sub.params['prompts_spec'], sub.params['api_key'])\n"
        "att = cli.get_command(ctx, 'attach').make_context('attach', [], parent=ctx)\n"
        "print(att.params['fps'], att.params['interval'])\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe], env=env(MTPWATCH_CONFIG=str(path)), capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["24", "all", "token-abc123", "8", "0.5"]


def test_shell_completion_lines(tmp_path: Path) -> None:
    lines = commands("Defaults, https and shell completion")
    assert len(lines) == 3
    home = tmp_path / "home"
    (home / ".config" / "fish" / "completions").mkdir(parents=True)
    for line in lines[:2]:
        code = line.split("#")[0].strip()
        # bash can load the bash script; zsh may be absent, so that one is checked as text
        if "bash_source" in code:
            res = run(f"{code} && complete -p mtpwatch", tmp_path, HOME=str(home))
            assert res.returncode == 0 and "_mtpwatch_completion" in res.stdout, res.stderr
        else:
            script = run(code.replace("eval ", "echo "), tmp_path, HOME=str(home))
            assert script.returncode == 0 and "compdef" in script.stdout
    res = run(lines[2], tmp_path, HOME=str(home))
    assert res.returncode == 0, res.stderr
    fish = (home / ".config" / "fish" / "completions" / "mtpwatch.fish").read_text(encoding="utf-8")
    assert "complete" in fish and "mtpwatch" in fish
