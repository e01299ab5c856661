"""mtpwatch's numbers against a real llama.cpp `llama-server` (draft model, up to 4 tokens per draft).

Counters parsed here independently of mtpwatch = what the snapshot, the stream client and the
app's panel show; exact token counts (per chunk, total, and the server's own counter); the
server's own log line; `mtpwatch start --engine llama.cpp` launches it and leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, ServerSpec
from mtpwatch.core.http import engines
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest, GenerationResult, StreamEvent
from mtpwatch.core.launch.llamacpp_cmd import build_llamacpp_argv, llamacpp_env
from mtpwatch.core.metrics.rates import delta_rates
from mtpwatch.core.metrics.snapshot import parse_snapshot
from mtpwatch.ui.app import make_app
from mtpwatch.ui.markup.panel import render_header, render_numbers
from tests.feeds import monitor_of, server_feeds
from tests.waits import wait_for

from .conftest import LLAMA_ARGS, N_MAX, ROOT, LlamaEnv, LlamaPool, RunningLlama

pytestmark = pytest.mark.real_llamacpp

PROMPT = (
    "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    + "The quick brown fox jumps over the lazy dog near the river"
)
MAX_TOKENS = 64


# --- raw counters, parsed independently of mtpwatch ---------------------------------------------

_RAW = re.compile(r"^llamacpp:([a-z_]+)(?:\{position=\"(\d+)\"\})? ([0-9.e+-]+)$", re.MULTILINE)


@dataclass(frozen=True)
class Raw:
    drafts: float
    draft_tokens: float
    accepted: float
    per_pos: tuple[float, ...]
    predicted: float


def raw_counters(text: str) -> Raw:
    values: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for name, pos, value in _RAW.findall(text):
        if pos:
            per_pos[int(pos)] = float(value)
        else:
            values[name] = float(value)
    return Raw(
        drafts=values["spec_decode_num_drafts_total"],
        draft_tokens=values["spec_decode_num_draft_tokens_total"],
        accepted=values["spec_decode_num_accepted_tokens_total"],
        per_pos=tuple(per_pos[i] for i in sorted(per_pos)),
        predicted=values["tokens_predicted_total"],
    )


@dataclass
class Window:
    before: str
    after: str
    result: GenerationResult
    events: list[StreamEvent]


async def one_request(url: str, name: str, *, extras: bool = True, ignore_eos: bool = True) -> Window:
    async with VllmClient(url) as client:
        before = await client.scrape_text()
        events: list[StreamEvent] = []
        request = GenerationRequest(
            PROMPT,
            model=name,
            max_tokens=MAX_TOKENS,
            ignore_eos=ignore_eos,
            extra=engines.stream_extras("llama.cpp") if extras else {},
        )
        result = await client.generate(request, on_event=events.append)
        assert result.error is None, result.error
        after = await client.scrape_text()
    return Window(before, after, result, events)


# llama-server's own per-request line (tools/server/server-context.cpp)
_LOG = re.compile(
    r"draft acceptance = ([0-9.]+) \(\s*(\d+) accepted /\s*(\d+) generated\), mean len =\s*([0-9.]+)"
)


def log_lines(path: Path) -> list[tuple[float, int, int, float]]:
    text = path.read_text(errors="replace")
    return [(float(a), int(b), int(c), float(d)) for a, b, c, d in _LOG.findall(text)]


# --- (a) counters, tokens, timings, the server's log ---------------------------------------------


async def test_counters_tokens_and_timings_are_exact(llama_pool: LlamaPool) -> None:
    server = llama_pool.get("draft")
    seen = len(log_lines(server.log_path))
    w = await one_request(server.url, server.served_name)
    b, a = raw_counters(w.before), raw_counters(w.after)
    d_drafts, d_tokens, d_acc = a.drafts - b.drafts, a.draft_tokens - b.draft_tokens, a.accepted - b.accepted
    d_pos = [
        x - y for x, y in zip(a.per_pos, b.per_pos + (0.0,) * (len(a.per_pos) - len(b.per_pos)), strict=True)
    ]
    assert d_drafts > 0 and d_tokens > 0, "the request made no drafts"

    # The page carries no model label; mtpwatch reads it under the name /v1/models gives.
    before = parse_snapshot(w.before, server.served_name)
    after = parse_snapshot(w.after, server.served_name)
    assert after.schema == "llamacpp" and after.model == server.served_name and after.speculative
    assert after.num_speculative_tokens == N_MAX  # one position per --spec-draft-n-max
    rates = delta_rates(before, after, 1.0, "request")
    assert (rates.drafts, rates.draft_tokens, rates.accepted) == (d_drafts, d_tokens, d_acc)
    assert list(rates.accepted_per_pos) == d_pos
    assert rates.acceptance_rate == pytest.approx(d_acc / d_tokens, rel=1e-12)
    assert rates.mean_acceptance_length == pytest.approx(1 + d_acc / d_drafts, rel=1e-12)
    assert d_tokens <= d_drafts * N_MAX  # drafts of varying length, at most n-max
    note = engines.draft_note("llama.cpp", after.num_speculative_tokens, rates.draft_tokens, rates.drafts)
    assert note == f"drafts ≤ {N_MAX}, mean {d_tokens / d_drafts:.2f} tokens"

    # Tokens: exactly max_tokens (ignore_eos), per chunk from timings.predicted_n, and the server's counter.
    r = w.result
    assert r.completion_tokens == MAX_TOKENS
    assert sum(e.tokens for e in w.events) == MAX_TOKENS
    assert r.tokens_exact and not r.approximate
    assert a.predicted - b.predicted == MAX_TOKENS
    # This request's own draft counts (final chunk's timings) = the counter deltas.
    assert r.timings is not None
    assert (r.timings.draft_n, r.timings.draft_n_accepted) == (d_tokens, d_acc)

    # llama-server's own log line for the request: the same counts and formulas.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # polling a log file another process writes
        if len(log_lines(server.log_path)) > seen:
            break
        await asyncio.sleep(0.2)
    lines = log_lines(server.log_path)[seen:]
    assert len(lines) == 1, lines
    rate, accepted, generated, mean_len = lines[0]
    assert (accepted, generated) == (d_acc, d_tokens)
    assert rate == pytest.approx(rates.acceptance_rate, abs=0.000005 + 1e-9)
    assert mean_len == pytest.approx(rates.mean_acceptance_length, abs=0.005 + 1e-9)


async def test_final_usage_makes_the_total_exact_without_timings_per_token(llama_pool: LlamaPool) -> None:
    server = llama_pool.get("draft")
    w = await one_request(server.url, server.served_name, extras=False)
    b, a = raw_counters(w.before), raw_counters(w.after)
    assert w.result.completion_tokens == MAX_TOKENS == a.predicted - b.predicted
    assert w.result.tokens_exact  # the final chunk's usage, though per-chunk counts were estimated


def test_snapshot_command_equals_the_page(llama_pool: LlamaPool) -> None:
    server = llama_pool.get("draft")
    out = subprocess.run(
        [sys.executable, "-m", "mtpwatch", "snapshot", server.url, "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    page = httpx.get(server.url + "/metrics", timeout=10).text
    raw = raw_counters(page)
    report = json.loads(out.stdout)
    assert report["schema"] == "llamacpp" and report["engine"] == "llama.cpp"
    assert (report["drafts"], report["draft_tokens"], report["accepted"]) == (
        raw.drafts,
        raw.draft_tokens,
        raw.accepted,
    )
    assert report["generation_tokens"] == raw.predicted
    assert report["mean_draft_length"] == pytest.approx(raw.draft_tokens / raw.drafts)
    assert report["mean_ttft_s"] is None and "histograms" in report["missing"]["latency"]
    table = subprocess.run(
        [sys.executable, "-m", "mtpwatch", "snapshot", server.url],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert "llama.cpp" in table and "n/a: llama-server exports no" in table


# --- (b) the app attached: counters = screen ------------------------------------------------------


async def scrape(url: str) -> str:
    async with httpx.AsyncClient() as client:
        return (await client.get(url + "/metrics", timeout=10)).text


async def test_attach_shows_acceptance_and_exact_tokens(llama_pool: LlamaPool) -> None:
    server = llama_pool.get("draft")
    config = AppConfig(
        servers=[ServerSpec(label="llama.cpp", url=server.url)],
        display=DisplaySettings(scrape_interval_s=0.25, max_tokens=MAX_TOKENS),
    )
    app = make_app(config)
    async with app.run_test(size=(160, 48)) as pilot:
        panel = monitor_of(app.screen).panels[0]
        await wait_for(pilot, lambda: panel.view is not None and panel.view.status == "up", "up", 60)
        view = panel.view
        assert view is not None and view.engine == "llama.cpp" and view.model == server.served_name
        assert view.status_detail == ""
        before = raw_counters(await scrape(server.url))
        await pilot.press("f3", "f3")  # the 'this prompt' window
        await pilot.press(*PROMPT, "enter")
        await wait_for(pilot, lambda: panel.prompt_count == 1, "the prompt to finish", 120)
        after = raw_counters(await scrape(server.url))
        summary = panel.last_summary
        assert summary is not None and summary.error is None, summary
        d_tokens = after.draft_tokens - before.draft_tokens
        d_acc = after.accepted - before.accepted
        d_drafts = after.drafts - before.drafts
        assert summary.tokens == after.predicted - before.predicted  # exact, from the stream
        assert not summary.approximate
        assert summary.acceptance_rate == pytest.approx(d_acc / d_tokens, rel=1e-12)
        feed = server_feeds(app.screen)[0]
        await wait_for(
            pilot,
            lambda: panel.view is not None and panel.view.drafts == d_drafts,
            "the prompt's drafts in the panel",
            30,
        )
        view = panel.view
        assert view is not None and feed.watch.engine == "llama.cpp"
        assert view.acceptance_rate == pytest.approx(d_acc / d_tokens, rel=1e-12)
        assert view.mean_acceptance_length == pytest.approx(1 + d_acc / d_drafts, rel=1e-12)
        assert view.k == N_MAX and view.method == "draft-simple"
        assert view.draft_note == f"drafts ≤ {N_MAX}, mean {d_tokens / d_drafts:.2f} tokens"
        numbers = render_numbers(view)
        assert "n/a: llama-server exports no TTFT/ITL/TPOT histograms" in numbers
        assert "n/a: llama-server exports no KV-cache gauge" in numbers
        assert "llama.cpp" in render_header(view) and f"k≤{N_MAX}" in render_header(view)
        await pilot.press("ctrl+q")


# --- (c) started by mtpwatch, quit clean ------------------------------------------------------------


def group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry))
    return pids


def processes_on_port(port: int) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and "llama-server" in cmd and f"--port {port} " in cmd + " ":
            found.append(f"{entry}: {cmd[:120]}")
    return found


def test_headless_start_quits_clean_on_sigterm(llama_pool: LlamaPool) -> None:
    server: RunningLlama = llama_pool.take("draft")
    assert server.pgid is not None, server.output_text()
    assert group_pids(server.pgid), "llama-server is not running in its own group"
    assert "acceptance" in server.output_text() or "status:" in server.output_text()
    assert server.quit(signal.SIGTERM) == 0, server.output_text()[-3000:]
    assert "server stopped" in server.output_text()
    assert group_pids(server.pgid) == []
    assert processes_on_port(server.port) == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/health", timeout=5)


async def test_tui_starts_llama_server_and_quits_clean(llama_env: LlamaEnv) -> None:
    port = free_port()
    argv = build_llamacpp_argv(
        str(llama_env.gguf), drafter=str(llama_env.gguf), k=N_MAX, port=port,
        server=str(llama_env.server), served_model_name="gemma-tui", extra=LLAMA_ARGS,
    )  # fmt: skip
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    url = f"http://127.0.0.1:{port}"
    launch = LaunchSpec(argv=tuple(argv), env=llamacpp_env(str(llama_env.server)), kind="llama.cpp")
    config = AppConfig(
        servers=[ServerSpec(label="llama.cpp", url=url, launch=launch)],
        display=DisplaySettings(scrape_interval_s=0.25, max_tokens=MAX_TOKENS),
    )
    app = make_app(config)
    async with app.run_test(size=(160, 48)) as pilot:
        panel = monitor_of(app.screen).panels[0]
        await wait_for(pilot, lambda: panel.view is not None and panel.view.status == "up", "/health", 180)
        assert processes_on_port(port), "the llama-server mtpwatch started is not running"
        await pilot.press(*PROMPT, "enter")
        await wait_for(pilot, lambda: panel.prompt_count == 1, "the prompt to finish", 120)
        summary = panel.last_summary
        assert summary is not None and summary.error is None and not summary.approximate, summary
        assert summary.acceptance_rate is not None and summary.acceptance_rate > 0
        await pilot.press("ctrl+q")
    for _ in range(100):
        if not processes_on_port(port):
            break
        await asyncio.sleep(0.1)  # polling /proc
    assert processes_on_port(port) == []
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(url + "/health", timeout=5)
