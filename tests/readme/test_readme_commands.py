"""Every command line of the README, run as written, in the shell of someone who just followed it.

Each block is read from README.md itself, so the README cannot drift from what is tested. A line
runs through bash with a new user's PATH (`tests/readme/shell.py`): this test run's virtual
environment is not on it. "Try it" runs in a copy of the working tree, exactly as written (its own
`.venv`, its own `pip install .`); the sections after "Install" find `mtpwatch` where "Install"
put it (the first Install line, `uv tool install .`, into a temporary tool folder). What changes:
the ports (free ones instead of 8000/8001/...), files land in a temporary folder, and where a GPU
and vLLM would be needed the simulator stands in (``--vllm "mtpwatch sim ..."`` appended, or
``vllm serve`` in a ``--launch-a`` read as ``mtpwatch sim serve``), with a stand-in nvidia-smi
that reports the GPU the simulator simulates. Benches run with fewer runs through
``MTPWATCH_BENCH_*`` (the README's own way to set an option's default). TUIs run in a
pseudo-terminal, are quit with Ctrl+Q and must leave no process behind.

Not run here: ``bash tests/run.sh`` (it runs this file) and ``mtpwatch start --engine llama.cpp ...``
(needs llama.cpp's llama-server and a GGUF: tests/real_llamacpp starts that command).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.readme.shell import (
    TEST_BIN,
    Tty,
    free_port,
    kill_group,
    nothing_listens,
    run,
    user_env,
    wait_healthy,
)

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CACHE = Path.home() / ".cache" / "mtpwatch"
SIM_VLLM = ' --vllm "mtpwatch sim --speed 40"'
QUICK = {"MTPWATCH_BENCH_RUNS": "3", "MTPWATCH_BENCH_WARMUP": "1", "MTPWATCH_BENCH_LIMIT": "1",
         "MTPWATCH_BENCH_MAX_TOKENS": "48", "MTPWATCH_BENCH_PROGRESS": "false"}  # fmt: skip
NOT_RUN = {
    "bash tests/run.sh": "the whole suite, which runs this file",
    "mtpwatch start --engine llama.cpp": "needs llama.cpp's llama-server and a GGUF (tests/real_llamacpp)",
}


def section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match, title
    return match.group(1)


def blocks(title: str, lang: str = "bash") -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section(title), re.S)


def commands(title: str) -> list[str]:
    """The command lines of a section's bash blocks (comments and blank lines left out)."""
    lines = [line for b in blocks(title) for line in b.splitlines()]
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def sections_with_commands() -> list[str]:
    titles = re.findall(r"^## (.+)$", README, re.M)
    return [t for t in titles if blocks(t)]


def ported(line: str, ports: dict[str, int]) -> str:
    for old, new in ports.items():
        line = re.sub(rf"(?<=:){old}\b|(?<=--port ){old}\b", str(new), line)
    return line


def spec_arg(line: str) -> str:
    """`line` with the simulator as vLLM: SIM_VLLM before the flags after `--` (else at the end)."""
    head, sep, tail = line.partition(" -- ")
    return head + SIM_VLLM + (sep + tail if sep else "")


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working tree as a fresh clone has it (tracked and new files, no build output, no .venv)."""
    dest = tmp_path_factory.mktemp("clone")
    listed = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    files = subprocess.run(listed, cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        src = ROOT / raw.decode()
        if src.is_file():
            (dest / raw.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / raw.decode())
    return dest


@pytest.fixture(scope="module")
def user_tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's own uv and pipx (the Install lines presume them), and nothing else."""
    folder = tmp_path_factory.mktemp("user-tools")
    for tool in ("uv", "pipx"):
        found = shutil.which(tool, path=str(TEST_BIN))
        assert found, tool
        (folder / tool).symlink_to(found)
    return folder


def tool_env(root: Path) -> dict[str, dict[str, str]]:
    return {
        "uv": {"UV_TOOL_DIR": str(root / "uv"), "UV_TOOL_BIN_DIR": str(root / "uv-bin"),
               "UV_CACHE_DIR": str(CACHE / "uv-cache")},
        "pipx": {"PIPX_HOME": str(root / "pipx"), "PIPX_BIN_DIR": str(root / "pipx-bin"),
                 "PIPX_MAN_DIR": str(root / "pipx-man")},
    }  # fmt: skip


@pytest.fixture(scope="module")
def installed(clone: Path, user_tools: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder the first Install line (`uv tool install .`) puts `mtpwatch` in."""
    line = commands("Install")[0]
    assert line.startswith("uv tool install")
    extra = tool_env(tmp_path_factory.mktemp("tools"))["uv"]
    res = run(line, clone, user_env(user_tools, **extra), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return Path(extra["UV_TOOL_BIN_DIR"])


def env(installed: Path, **extra: str) -> dict[str, str]:
    """A README line's environment after "Install": `mtpwatch` from the tool folder, nothing else."""
    return user_env(installed, **extra)


def test_every_command_line_of_the_readme_is_covered() -> None:
    """Each section with commands is run by a test below; a new section needs one."""
    tested = {"Try it (no GPU, no vLLM needed)", "Install", "Use it", "Plots and comparisons",
              "Reports that stand on their own", "Defaults, https and shell completion"}  # fmt: skip
    assert set(sections_with_commands()) == tested | {"Run the tests"}
    assert commands("Run the tests") == ["bash tests/run.sh"]
    assert any(line.startswith("mtpwatch start --engine llama.cpp") for line in commands("Use it"))


@pytest.mark.timeout(1200)
def test_try_it(clone: Path) -> None:
    """ "Try it" as written, in a fresh clone, with nothing of mtpwatch on PATH."""
    lines = commands("Try it (no GPU, no vLLM needed)")
    assert len(lines) == 6, lines
    first, loop, record, replay, replay_json, ab = lines
    assert first == "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/mtpwatch demo"
    user = user_env()
    assert shutil.which("mtpwatch", path=user["PATH"]) is None
    for line in (first, loop):
        tty = Tty(line, clone, user)
        try:
            tty.wait_up(2, limit_s=900 if line == first else 300)  # both simulators answer
            tty.wait_for("acceptance", "mean length")
            if line == loop:
                tty.wait_for("tok · TTFT")  # the loop sent a prompt and its summary line shows
            assert tty.quit() == 0
        finally:
            tty.close()
    tty = Tty(record, clone, user)
    try:
        tty.wait_for("tok · TTFT")
        assert tty.quit() == 0
    finally:
        tty.close()
    assert (clone / "demo.mtpw.gz").stat().st_size > 0
    tty = Tty(replay, clone, user)
    try:
        tty.wait_for("acceptance")
        assert tty.quit() == 0
    finally:
        tty.close()
    res = run(replay_json, clone, user)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)
    # the flagship with the simulator as vLLM: `mtpwatch` in --vllm is the running one
    assert '--vllm "mtpwatch sim' in ab
    tty = Tty(ab, clone, user)
    try:
        tty.wait_up(2)  # both twins started: planned shares, and `mtpwatch` in --vllm found
        tty.wait_for("acceptance", "mean length")
        assert "cannot run" not in tty.screen
        assert tty.quit() == 0
    finally:
        tty.close()


@pytest.mark.timeout(900)
def test_install_with_uv_and_pipx(installed: Path, clone: Path, user_tools: Path, tmp_path: Path) -> None:
    lines = commands("Install")
    assert lines == ["uv tool install .", "pipx install ."]
    extra = tool_env(tmp_path)["pipx"]
    res = run(lines[1], clone, user_env(user_tools, **extra), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    for exe in (installed / "mtpwatch", Path(extra["PIPX_BIN_DIR"]) / "mtpwatch"):
        version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
        assert version.stdout.startswith("mtpwatch, version ")
        # plain dependencies now: plots and the GPU's memory work without an extra
        python = next(exe.resolve().parent.glob("python*"))
        subprocess.run([str(python), "-c", "import plotext, pynvml"], check=True)


@contextlib.contextmanager
def background(lines: list[str], cwd: Path, environ: dict[str, str]) -> Iterator[list[subprocess.Popen[str]]]:
    """Lines ending in `&` (simulators), each in its own process group, stopped at the end; each
    has printed its URL (it listens) when the block starts."""
    procs = [
        subprocess.Popen(["bash", "-c", line.rstrip("& ")], cwd=cwd, env=environ, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
        for line in lines
    ]  # fmt: skip
    try:
        for proc in procs:
            assert proc.stdout is not None
            for out_line in proc.stdout:
                if "http://127.0.0.1:" in out_line:
                    break
            else:
                raise AssertionError(f"a background line ended before it listened: {proc.args}")
        yield procs
    finally:
        for proc in procs:
            kill_group(proc)
            assert proc.stdout is not None
            proc.stdout.close()


@pytest.mark.timeout(900)
def test_plots_and_comparisons(installed: Path, tmp_path: Path) -> None:
    lines = commands("Plots and comparisons")
    assert len(lines) == 5 and lines[0].endswith("&") and lines[1].endswith("&")
    ports = {"8001": free_port(), "8002": free_port()}
    user = env(installed)
    with background([ported(x, ports) for x in lines[:2]], tmp_path, user):
        bench = run(ported(lines[2], ports), tmp_path, user)
        assert bench.returncode == 0, bench.stdout + bench.stderr
        reports_that_stand(tmp_path, lambda x: ported(x, ports), user)
    doc = json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))
    assert [p["length"] for p in doc["points"]] == [8, 16, 32, 64, 128, 256]
    plot = run(lines[3], tmp_path, user)
    assert plot.returncode == 0, plot.stdout + plot.stderr
    assert "plotext" not in plot.stderr  # drawn by plotext, not the table fallback
    assert max(len(x) for x in plot.stdout.splitlines()) <= 80
    assert "red line: 1.0 (break-even)" in plot.stdout
    assert (tmp_path / "plot-sweep.svg").read_text(encoding="utf-8").startswith("<svg")
    compare = run(lines[4], tmp_path, user)
    assert compare.returncode == 0, compare.stdout + compare.stderr
    # a report against itself: a zero median difference whose CI holds 0 (no '*')
    assert re.search(r"\+0\.00 \[-\d+\.\d\d,\+\d+\.\d\d\] ", compare.stdout), compare.stdout


def reports_that_stand(tmp_path: Path, ported: Callable[[str], str], user: dict[str, str]) -> None:
    """The 'Reports that stand on their own' block, against the running simulators."""
    first, resume = commands("Reports that stand on their own")
    bench = run(ported(first), tmp_path, user)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "speed-up vs" in bench.stdout or "decode tok/s per run" in bench.stdout  # --plot drew
    doc = json.loads((tmp_path / "k2.json").read_text(encoding="utf-8"))
    assert doc["meta"]["label"] == "k2-sim" and doc["meta"]["metadata"] == {"image": "sim"}
    assert doc["meta"]["arms"]["b"]["k"] == 2
    log = (tmp_path / "k2.jsonl").read_text(encoding="utf-8").splitlines()
    assert len([x for x in log if '"type": "run"' in x]) == 2 * 4 * 2
    # cut the log as a crash would (keep the header and the first 5 runs), then finish it
    (tmp_path / "k2.jsonl").write_text("\n".join(log[:6]) + "\n", encoding="utf-8")
    again = run(ported(resume), tmp_path, user)
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
        [sys.executable, "-c", probe], env=user_env(MTPWATCH_CONFIG=str(path)), capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["24", "all", "token-abc123", "8", "1.0"]


def test_shell_completion_lines(installed: Path, tmp_path: Path) -> None:
    lines = commands("Defaults, https and shell completion")
    assert len(lines) == 3
    home = tmp_path / "home"
    (home / ".config" / "fish" / "completions").mkdir(parents=True)
    for line in lines[:2]:
        code = line.split("#")[0].strip()
        # bash can load the bash script; zsh may be absent, so that one is checked as text
        if "bash_source" in code:
            res = run(f"{code} && complete -p mtpwatch", tmp_path, env(installed, HOME=str(home)))
            assert res.returncode == 0 and "_mtpwatch_completion" in res.stdout, res.stderr
        else:
            script = run(code.replace("eval ", "echo "), tmp_path, env(installed, HOME=str(home)))
            assert script.returncode == 0 and "compdef" in script.stdout
    res = run(lines[2], tmp_path, env(installed, HOME=str(home)))
    assert res.returncode == 0, res.stderr
    fish = (home / ".config" / "fish" / "completions" / "mtpwatch.fish").read_text(encoding="utf-8")
    assert "complete" in fish and "mtpwatch" in fish


def fake_gpu(folder: Path) -> Path:
    """An nvidia-smi that reports the GPU the simulator simulates for Gemma 4 E4B (a GB10 as
    mtpwatch's table has it), in nvidia-smi's own CSV (tests/data/nvidia-h200 has a real capture)."""
    from mtpwatch.core.launch.gpumem import SMI_QUERY, gpu_from_table

    gb10 = gpu_from_table("GB10")
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    row = f"0, NVIDIA GB10, {gb10.total_bytes / 2**20:.0f}, {gb10.free_bytes / 2**20:.0f}"
    exe.write_text(
        f'#!/bin/sh\n[ "$1 $2" = "{" ".join(SMI_QUERY)}" ] || exit 99\necho "{row}"\n', encoding="utf-8"
    )
    exe.chmod(0o755)
    return folder


def tui(line: str, cwd: Path, environ: dict[str, str], *needles: str, up: int = 0) -> str:
    """Run a TUI line until it drew `needles` and `up` servers are up, quit it with Ctrl+Q; what it drew."""
    tty = Tty(line, cwd, environ)
    try:
        tty.wait_up(up)
        tty.wait_for(*needles)
        screen = tty.screen
        assert tty.quit() == 0, tty.screen[-2000:]
        return screen
    finally:
        tty.close()


def ok(line: str, cwd: Path, environ: dict[str, str], timeout: float = 600) -> str:
    res = run(line, cwd, environ, timeout=timeout)
    assert res.returncode == 0, f"{line}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout


@pytest.mark.timeout(1800)
def test_use_it(installed: Path, tmp_path: Path) -> None:
    """Every line of "Use it", in order of what it needs: servers first, then what watches them."""
    from tests.real_prometheus.conftest import Procs, start_prometheus

    lines = commands("Use it")
    todo = list(lines)

    def take(prefix: str) -> str:
        """The one line left that is `prefix` or starts with it (an exact match first)."""
        exact = [x for x in todo if x == prefix]
        (line,) = exact or [x for x in todo if x.startswith(prefix)]
        todo.remove(line)
        return line

    take("mtpwatch start --engine llama.cpp")  # NOT_RUN: llama.cpp's llama-server and a GGUF
    user = env(installed)
    gpu_user = user_env(installed, fake_gpu(tmp_path / "gpu"))

    # servers mtpwatch starts, with the simulator as vLLM
    start_port = free_port()
    line = take("mtpwatch start google/gemma-4-E4B-it")
    tui(spec_arg(line), tmp_path, {**user, "MTPWATCH_START_PORT": str(start_port)}, "acceptance", up=1)
    assert nothing_listens(start_port)  # the server it started stopped with it
    flagship = take(
        "mtpwatch ab --start google/gemma-4-E4B-it --drafter google/gemma-4-E4B-it-assistant -k 2"
    )
    assert flagship.endswith("-k 2"), flagship  # the README's flagship, exactly
    # no GPU memory known on this machine (no NVML, no nvidia-smi): one line, nothing started
    res = run(spec_arg(flagship), tmp_path, user)
    assert res.returncode == 1 and res.stdout == ""
    (refusal,) = res.stderr.splitlines()
    assert "--gpu NAME" in refusal and "--gpu-memory GIB" in refusal and "--restart" in refusal
    # where nvidia-smi reports the GPU, the twins get shares and both start
    tui(spec_arg(flagship), tmp_path, gpu_user, "acceptance", "mean length", up=2)
    tui(spec_arg(take("mtpwatch ab --start google/gemma-4-E4B-it --method ngram")), tmp_path, gpu_user,
        "acceptance", "mean length", up=2)  # fmt: skip
    assert "schedule: restart" in ok(take("mtpwatch ab --start google/gemma-4-31B-it"), tmp_path, user)
    sim_ab = take(
        "mtpwatch ab --start google/gemma-4-E4B-it --drafter google/gemma-4-E4B-it-assistant -k 2 --gpu"
    )
    assert sim_ab.endswith('--vllm "mtpwatch sim --speed 10"')
    tui(sim_ab, tmp_path, user, "acceptance", "mean length", up=2)
    sweep_line = "mtpwatch bench --start google/gemma-4-E4B-it --drafter google/gemma-4-E4B-it-assistant"
    sweep_line += " --sweep-k"
    out = ok(spec_arg(take(sweep_line + " 0,")), tmp_path, {**gpu_user, **QUICK})
    assert json.loads((tmp_path / "sweep.json").read_text())["ks"] == [0, 1, 2, 4, 8], out
    out = ok(spec_arg(take(sweep_line + " 0s,")), tmp_path, {**gpu_user, **QUICK})
    spec_on = json.loads((tmp_path / "spec-on.json").read_text())["speculation_on_k0"]
    assert spec_on["schedule"] == [[1, 1, 0]] and spec_on["drafted_share"] == 0.0, out
    # one server at a time, started by bench: `vllm serve` is the simulator's `serve`
    line = take("mtpwatch bench --ab http://127.0.0.1:8001 http://127.0.0.1:8002 --schedule restart")
    pair = {"8001": free_port(), "8002": free_port()}
    restart = ported(line, pair).replace("'vllm serve ", "'mtpwatch sim --speed 40 serve ")
    restart = restart.replace('"vllm serve ', '"mtpwatch sim --speed 40 serve ')
    assert restart.count("mtpwatch sim --speed 40 serve") == 2, restart
    out = ok(restart, tmp_path, {**user, **QUICK, "MTPWATCH_BENCH_JSON_PATH": str(tmp_path / "restart.json")})
    doc = json.loads((tmp_path / "restart.json").read_text())
    assert doc["meta"]["arms"]["b"]["k"] == 4, doc["meta"]["arms"]  # -sc reached B's simulator
    assert doc["meta"]["arms"]["a"]["k"] in (0, None)

    fleet = free_port(3)
    ports = {"8000": free_port(), "8001": fleet, "8002": fleet + 1, "8003": fleet + 2, "8080": free_port()}
    url = {k: f"http://127.0.0.1:{v}" for k, v in ports.items()}
    procs = Procs()
    try:
        # the simulator lines: one server on 8000, three busy ones on 8001-8003 (the fleet)
        sims = [take("mtpwatch sim --preset gemma4-31b-h100"), take("mtpwatch sim --count 3")]
        for line in sims:
            procs.procs.append(
                subprocess.Popen(["bash", "-c", ported(line, ports)], cwd=tmp_path, env=user,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            )  # fmt: skip
        procs.procs.append(
            subprocess.Popen(
                ["bash", "-c", f"mtpwatch sim --speed 10 --port {ports['8080']}"],
                cwd=tmp_path,
                env=user,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )  # fmt: skip  (the llama.cpp server of "vLLM vs llama.cpp", stood in for)
        wait_healthy(url.values())

        # watching
        tui(
            ported(take("mtpwatch attach http://127.0.0.1:8000 --record"), ports),
            tmp_path,
            user,
            "acceptance",
            up=1,
        )
        assert (tmp_path / "session.mtpw.gz").stat().st_size > 0
        tui(ported(take("mtpwatch attach http://127.0.0.1:8000"), ports), tmp_path, user, "acceptance", up=1)
        screen = tui(ported(take("mtpwatch attach http://127.0.0.1:8001 "), ports), tmp_path, user,
                     *(str(ports[k]) for k in ("8001", "8002", "8003")))  # fmt: skip
        assert "acceptance" in screen or "accept" in screen
        (tmp_path / "servers.txt").write_text("\n".join(url[k] for k in ("8001", "8002", "8003")) + "\n")
        doc = json.loads(ok(take("mtpwatch attach --file servers.txt --json"), tmp_path, user))
        assert len(doc["rows"]) == 3, doc
        ports["9090"] = int(
            start_prometheus(procs, tmp_path, [f"127.0.0.1:{ports[k]}" for k in ("8001", "8002", "8003")])
            .rsplit(":", 1)[1]
        )  # fmt: skip
        line = ported(take("mtpwatch snapshot --prometheus"), ports)
        deadline = time.monotonic() + 180
        while True:  # until Prometheus has scraped each target twice (a rate needs two)
            res = run(line, tmp_path, user)
            rows = json.loads(res.stdout).get("rows", []) if res.returncode == 0 else []
            if len(rows) == 3 and all(r.get("acceptance_rate") is not None for r in rows):
                break
            assert time.monotonic() < deadline, res.stdout + res.stderr
            time.sleep(1)
        tui(ported(take("mtpwatch attach --prometheus"), ports), tmp_path, user, str(ports["8001"]))
        snap = json.loads(
            ok(ported(take("mtpwatch snapshot http://127.0.0.1:8000 --json"), ports), tmp_path, user)
        )
        assert snap
        (tmp_path / "before.txt").write_text(httpx.get(url["8000"] + "/metrics").text)
        httpx.post(url["8000"] + "/v1/completions", json={"prompt": "hi", "max_tokens": 16}, timeout=60)
        (tmp_path / "after.txt").write_text(httpx.get(url["8000"] + "/metrics").text)
        assert "acceptance" in ok(take("mtpwatch snapshot after.txt --since before.txt"), tmp_path, user)

        # A/B against running servers
        tui(ported(take("mtpwatch ab http://127.0.0.1:8001 http://127.0.0.1:8002"), ports), tmp_path, user,
            "acceptance", "mean length", up=2)  # fmt: skip
        bench = {**user, **QUICK}
        line = take("mtpwatch bench --ab http://127.0.0.1:8001 http://127.0.0.1:8002 --prompts long")
        ok(ported(line, ports), tmp_path, bench)
        assert json.loads((tmp_path / "ab.json").read_text())["meta"]
        ok(
            ported(take("mtpwatch bench --ab http://127.0.0.1:8000 http://127.0.0.1:8080"), ports),
            tmp_path,
            bench,
        )
        line = take("mtpwatch bench --ab URL_A URL_B --prompts short --lengths")
        ok(line.replace("URL_A", url["8001"]).replace("URL_B", url["8002"]), tmp_path, bench)
        line = take("mtpwatch bench --ab URL_A URL_B --prompts short --context-lengths")
        out = ok(line.replace("URL_A", url["8001"]).replace("URL_B", url["8002"]), tmp_path, bench)
        assert "acceptance against context length" in out and "(server /tokenize)" in out, out
    finally:
        procs.stop()

    assert "ceiling" in ok(take("mtpwatch roofline"), tmp_path, user)
    assert todo == [], todo
