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

The browser lines of "Try it" (``textual serve -c ...``) run in a fresh clone of their own, with
a browser-like client (tests/readme/browser.py) on the page.

Not run here: ``bash tests/run.sh`` (it runs this file) and ``mtpwatch start --engine llama.cpp ...``
(needs llama.cpp's llama-server and a GGUF: tests/real_llamacpp starts that command).
`test_every_readme_block_is_run_or_listed` fails when a README block is neither run by a test here
nor listed in NOT_RUN.
"""

from __future__ import annotations

import contextlib
import inspect
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

from tests.readme.browser import browse_demo, clean_exit
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
TRY_IT = "Try it (no GPU, no vLLM needed)"
RUN_BY = {
    TRY_IT: ("test_try_it", "test_try_it_in_a_browser"),
    "Install": ("installed", "test_install_with_uv_and_pipx"),
    "Use it": ("test_use_it",),
    "Plots and comparisons": ("test_plots_and_comparisons",),
    "Reports that stand on their own": ("reports_that_stand",),
    "Defaults, https and shell completion": ("test_config_example_is_valid", "test_shell_completion_lines"),
}
"""Each section with blocks: the functions of this file that read its lines (`commands(...)` or
`blocks(...)` with its title) and run them; each asserts the exact lines or their number."""
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
    return copy_tree(tmp_path_factory.mktemp("clone"))


def copy_tree(dest: Path) -> Path:
    """The working tree's tracked and new files (no build output, no .venv) copied into `dest`."""
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


def fenced_blocks() -> list[tuple[str, str, str]]:
    """Every fenced block of the README: (its section's title, "" before the first; language; text)."""
    out: list[tuple[str, str, str]] = []
    title = ""
    for part in re.split(r"^(## .+)$", README, flags=re.M):
        if part.startswith("## ") and "\n" not in part:
            title = part[3:]
            continue
        out += [(title, lang, text) for lang, text in re.findall(r"^```(\w*)\n(.*?)^```", part, re.S | re.M)]
    return out


def test_every_readme_block_is_run_or_listed() -> None:
    """A README block that no test here runs and NOT_RUN does not list fails this test: each line of
    a bash block is in a section RUN_BY names (functions that exist here and read that section) or
    starts with a NOT_RUN entry; every NOT_RUN entry names one README line; a command written in
    prose (an inline `.venv/bin/... args`) stands in a block, where it is run."""
    found = fenced_blocks()
    assert found and all(lang in ("bash", "toml") for _, lang, _ in found), [x[:2] for x in found]
    lines = [
        (title, line.strip())
        for title, lang, text in found
        if lang == "bash"
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    for title, line in lines:
        if any(line.startswith(excuse) for excuse in NOT_RUN):
            continue
        assert title in RUN_BY, (
            f"README line {line!r} (section {title!r}) is run by no test and not in NOT_RUN"
        )
        for name in RUN_BY[title]:
            func = globals().get(name)
            assert callable(func), name
            source = inspect.getsource(getattr(func, "__wrapped__", func))
            assert ("TRY_IT" if title == TRY_IT else f'"{title}"') in source, (name, title)
    for excuse in NOT_RUN:
        assert sum(line.startswith(excuse) for _, line in lines) == 1, excuse
    assert [t for t, lang, _ in found if lang == "toml"] == ["Defaults, https and shell completion"]
    block_lines = {line for _, line in lines}
    for span in re.findall(r"(?<!`)`([^`\n]+)`(?!`)", README):
        if span.startswith(".venv/bin/") and " " in span:
            assert span in block_lines, f"a command in prose, run by no test: {span!r}"


def test_the_guard_catches_a_block_no_test_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard above fails on a README with a block no test runs, and on a command in prose."""
    extra = {
        "a new section": "\n## Extra\n\n```bash\nmtpwatch demo --new\n```\n",
        "a new language": "\n## Install\n\n```sh\nmtpwatch demo\n```\n",
        "prose": "\n## Notes\n\nRun `.venv/bin/textual serve x` to see it.\n",
    }
    readme = README
    for text in extra.values():
        monkeypatch.setitem(globals(), "README", readme + text)
        with pytest.raises(AssertionError):
            test_every_readme_block_is_run_or_listed()
    monkeypatch.setitem(globals(), "README", readme)
    test_every_readme_block_is_run_or_listed()
    assert set(sections_with_commands()) == set(RUN_BY) | {"Run the tests"}
    assert commands("Run the tests") == ["bash tests/run.sh"]


@pytest.mark.timeout(1200)
def test_try_it(clone: Path) -> None:
    """ "Try it" as written, in a fresh clone, with nothing of mtpwatch on PATH."""
    *lines, _pip, _serve = commands(TRY_IT)  # the browser's two: test_try_it_in_a_browser
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


@pytest.mark.timeout(1200)
def test_try_it_in_a_browser(tmp_path: Path) -> None:
    """The browser lines of "Try it", exactly as written but for the port (a free one for 8765), in
    a fresh clone after the first line's install; a browser-like client opens the page, sees the
    self-running demo, closes the page; the demo stops, and nothing printed is a traceback."""
    first, *_, pip_line, serve_line = commands(TRY_IT)
    assert pip_line == ".venv/bin/pip install textual-dev"
    assert (
        serve_line
        == '.venv/bin/textual serve -c --host 127.0.0.1 --port 8765 ".venv/bin/mtpwatch demo --loop"'
    )
    clone = copy_tree(tmp_path / "clone")
    user = user_env()
    setup, demo = first.rsplit(" && ", 1)  # the first line's install; its TUI runs in test_try_it
    assert demo == ".venv/bin/mtpwatch demo"
    for line in (setup, pip_line):
        res = run(line, clone, user, timeout=900)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(["bash", "-c", ported(serve_line, {"8765": port})], cwd=clone, env=user,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        browse_demo(port, server.pid)
    finally:
        kill_group(server)
    clean_exit(log.read_text(encoding="utf-8", errors="replace"))


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
                raise AssertionError(f"a background line ended before it listened: {proc.args!r}")
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
    doc = json.loads((tmp_path / "lengths.json").read_text(encoding="utf-8"))
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
                subprocess.Popen(["bash", "-c", ported(line, ports)], cwd=tmp_path, env=user, text=True,
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
                text=True,
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
        prometheus_snapshot = take("mtpwatch snapshot --prometheus")
        line = ported(prometheus_snapshot, ports)
        deadline = time.monotonic() + 180
        while True:  # until Prometheus has scraped each target twice (a rate needs two)
            res = run(line, tmp_path, user)
            rows = json.loads(res.stdout).get("rows", []) if res.returncode == 0 else []
            if len(rows) == 3 and all(r.get("acceptance_rate") is not None for r in rows):
                break
            assert time.monotonic() < deadline, res.stdout + res.stderr
            time.sleep(1)
        tui(ported(take("mtpwatch attach --prometheus"), ports), tmp_path, user, str(ports["8001"]))
        # The same line over a store of a generated fleet (issue 41): 60 instances, 20 minutes at 15 s,
        # one of each fault; the store's data ends a little after now, so it reads as live.
        from tests.real_prometheus import fleetgen
        from tests.real_prometheus.conftest import prometheus_binary

        generated = fleetgen.make_fleet(60, 1200, lead_s=45, seed=7)
        (tmp_path / "fleet").mkdir()
        store = fleetgen.load_prometheus(
            procs.start, prometheus_binary(), generated, tmp_path / "fleet", free_port()
        )
        time.sleep(max(0.0, generated.end - 5 - time.time()))  # until the data's end, a time of day
        assert time.time() < generated.end + 10, "loading outlived the data's lead: raise lead_s"
        fleet_line = ported(prometheus_snapshot, {"9090": int(store.rsplit(":", 1)[1])})
        doc = json.loads(ok(fleet_line, tmp_path, user))
        flagged = {o["source"] for g in doc["groups"] for o in g["outliers"]}
        assert flagged == {generated.faults[x] for x in ("collapsed", "slow", "k")}, doc["groups"]
        assert len(doc["rows"]) == 60, "every instance listed, the silent ones too"
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
