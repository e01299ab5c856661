"""mtpwatch's numbers against a real vLLM: counters, vLLM's own log line, token counts, clean quits.

One server per kind (baseline, ngram k=4, MTP on the tiny MiMo model), started through
`mtpwatch start --headless` and quit at the end of its group of tests in a different way each
(Ctrl-C, SIGTERM, SIGHUP), after which no process of that server may be left.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest, StreamEvent
from mtpwatch.core.launch.logparse import LogWatcher, SpecDecodingLine
from mtpwatch.core.metrics.rates import delta_rates
from mtpwatch.core.metrics.snapshot import parse_snapshot

from .conftest import RunningServer, ServerPool

pytestmark = pytest.mark.real_vllm

# ngram copies a repeated paragraph almost perfectly: high, realistic acceptance.
PROMPT = (
    "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    + "The quick brown fox jumps over the lazy dog near the river"
)
MAX_TOKENS = 64
LOG_LIMIT_S = 40.0  # vLLM logs SpecDecoding metrics every 10 s


# --- raw counters, parsed independently of mtpwatch ---------------------------------------------

_RAW = re.compile(r"^(vllm:[a-z_]+)\{([^}]*)\} ([0-9.e+-]+)$", re.MULTILINE)


@dataclass(frozen=True)
class Raw:
    drafts: float
    draft_tokens: float
    accepted: float
    per_pos: tuple[float, ...]
    generation_tokens: float


def raw_counters(text: str, model: str) -> Raw:
    values: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for name, labels, value in _RAW.findall(text):
        if f'model_name="{model}"' not in labels:
            continue
        if name == "vllm:spec_decode_num_accepted_tokens_per_pos_total":
            pos = int(re.search(r'position="(\d+)"', labels).group(1))  # type: ignore[union-attr]
            per_pos[pos] = per_pos.get(pos, 0.0) + float(value)
        else:
            values[name] = values.get(name, 0.0) + float(value)
    return Raw(
        drafts=values.get("vllm:spec_decode_num_drafts_total", 0.0),
        draft_tokens=values.get("vllm:spec_decode_num_draft_tokens_total", 0.0),
        accepted=values.get("vllm:spec_decode_num_accepted_tokens_total", 0.0),
        per_pos=tuple(per_pos[i] for i in sorted(per_pos)),
        generation_tokens=values["vllm:generation_tokens_total"],
    )


def read_log(path: Path) -> LogWatcher:
    watcher = LogWatcher()
    for line in path.read_text(errors="replace").splitlines():
        watcher.feed(line)
    return watcher


@dataclass
class Window:
    before_text: str
    after_text: str
    dt_s: float
    events: list[StreamEvent]
    completion_tokens: int
    start: int
    """Number of SpecDecoding lines in the log before the request."""
    spec_lines: list[SpecDecodingLine] = field(default_factory=list)


async def one_request(server: RunningServer) -> Window:
    """Scrape, stream one completion, scrape again."""
    start = len(read_log(server.log_path).spec_lines)
    async with VllmClient(server.url) as client:
        before_text = await client.scrape_text()
        t0 = time.monotonic()
        events: list[StreamEvent] = []
        request = GenerationRequest(PROMPT, model=server.served_name, max_tokens=MAX_TOKENS, ignore_eos=True)
        result = await client.generate(request, on_event=events.append)
        assert result.error is None, result.error
        after_text = await client.scrape_text()
        dt = time.monotonic() - t0
    return Window(before_text, after_text, dt, events, result.completion_tokens, start)


async def collect_spec_lines(server: RunningServer, window: Window, accepted: float, drafted: float) -> None:
    """Wait until vLLM's SpecDecoding lines since the window began add up to the counter deltas."""
    deadline = time.monotonic() + LOG_LIMIT_S
    while time.monotonic() < deadline:
        window.spec_lines = read_log(server.log_path).spec_lines[window.start :]
        if (
            sum(s.accepted for s in window.spec_lines) >= accepted
            and sum(s.drafted for s in window.spec_lines) >= drafted
        ):
            return
        await asyncio.sleep(0.5)


async def measured_window(server: RunningServer) -> tuple[Window, Raw, Raw]:
    """One request whose drafting vLLM logged in exactly one line, when 3 tries allow it.

    vLLM logs every 10 s; a 2-3 s request straddles two log intervals now and then.
    """
    for _attempt in range(3):
        window = await one_request(server)
        before = raw_counters(window.before_text, server.served_name)
        after = raw_counters(window.after_text, server.served_name)
        await collect_spec_lines(
            server, window, after.accepted - before.accepted, after.draft_tokens - before.draft_tokens
        )
        if len(window.spec_lines) == 1:
            break
    return window, before, after


# --- (a) acceptance numbers -------------------------------------------------------------------


def check_counters(server: RunningServer, window: Window, before: Raw, after: Raw) -> None:
    d_drafts = after.drafts - before.drafts
    d_tokens = after.draft_tokens - before.draft_tokens
    d_accepted = after.accepted - before.accepted
    d_pos = [a - b for a, b in zip(after.per_pos, before.per_pos, strict=True)]
    assert d_drafts > 0 and d_tokens > 0, "the request made no drafts"

    rates = delta_rates(
        parse_snapshot(window.before_text, server.served_name),
        parse_snapshot(window.after_text, server.served_name),
        window.dt_s,
        "request",
    )
    assert rates.drafts == d_drafts
    assert rates.draft_tokens == d_tokens
    assert rates.accepted == d_accepted
    assert list(rates.accepted_per_pos) == d_pos
    assert rates.acceptance_rate == pytest.approx(d_accepted / d_tokens, rel=1e-12)
    assert rates.mean_acceptance_length == pytest.approx(1 + d_accepted / d_drafts, rel=1e-12)
    assert list(rates.per_position) == pytest.approx([p / d_drafts for p in d_pos], rel=1e-12)

    # vLLM's own log: the lines of this window add up to the same counts...
    assert window.spec_lines, "vLLM logged no SpecDecoding metrics line for the request"
    assert sum(s.accepted for s in window.spec_lines) == d_accepted
    assert sum(s.drafted for s in window.spec_lines) == d_tokens
    # ...and when one line covers the whole window, its rates are mtpwatch's, to the printed digits.
    if len(window.spec_lines) == 1:
        line = window.spec_lines[0]
        assert line.acceptance_rate == pytest.approx(rates.acceptance_rate, abs=0.0005 + 1e-9)
        assert line.mean_acceptance_length == pytest.approx(rates.mean_acceptance_length, abs=0.005 + 1e-9)
        assert line.per_position == pytest.approx(rates.per_position, abs=0.0005 + 1e-9)


# --- (b) token counts -------------------------------------------------------------------------


def check_tokens(window: Window, before: Raw, after: Raw) -> None:
    client_tokens = sum(e.tokens for e in window.events)
    assert window.completion_tokens == MAX_TOKENS  # ignore_eos: exactly max_tokens
    assert client_tokens == window.completion_tokens
    assert after.generation_tokens - before.generation_tokens == window.completion_tokens


# --- (c) nothing left after quitting ----------------------------------------------------------


def server_processes(server: RunningServer) -> list[str]:
    """Live processes of this server: its process group, or a command line naming its model and port."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = (
                Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except OSError:
            continue
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if state == "Z":
            continue
        if int(pgrp) == server.pgid or (str(server.model_path) in cmdline and str(server.port) in cmdline):
            found.append(f"{entry}: {cmdline[:120]}")
    return found


def tree_pids(pgid: int) -> list[int]:
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


def quit_and_check(pool: ServerPool, kind: str, sig: int) -> None:
    server = pool.take(kind)
    assert server.pgid is not None, server.output_text()
    members = tree_pids(server.pgid)
    assert len(members) >= 3, f"expected API server + EngineCore + worker in group {server.pgid}: {members}"
    assert server.quit(sig) == 0, server.output_text()[-3000:]
    assert "server stopped" in server.output_text()
    deadline = time.monotonic() + 30
    while server_processes(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server_processes(server) == []
    assert tree_pids(server.pgid) == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/health", timeout=5)


# --- the tests, one server at a time ------------------------------------------------------------


async def test_baseline_tokens_and_no_spec_counters(server_pool: ServerPool) -> None:
    server = server_pool.get("baseline")
    window = await one_request(server)
    before = raw_counters(window.before_text, "base")
    after = raw_counters(window.after_text, "base")
    check_tokens(window, before, after)
    # No speculation: no spec_decode family at all, and mtpwatch says so.
    assert "spec_decode" not in window.after_text
    assert parse_snapshot(window.after_text, "base").speculative is False
    facts = read_log(server.log_path).facts
    assert facts.vllm_version is not None and facts.vllm_version.startswith("0.32.0")
    assert facts.spec_method is None


def test_baseline_quit_with_ctrl_c_leaves_nothing(server_pool: ServerPool) -> None:
    quit_and_check(server_pool, "baseline", signal.SIGINT)


async def test_ngram_acceptance_matches_counters_and_vllm_log(server_pool: ServerPool) -> None:
    server = server_pool.get("ngram")
    window, before, after = await measured_window(server)
    check_counters(server, window, before, after)
    check_tokens(window, before, after)
    rates = delta_rates(parse_snapshot(window.before_text), parse_snapshot(window.after_text), 1.0, "w")
    assert rates.acceptance_rate is not None and rates.acceptance_rate > 0.5  # copying text: high
    facts = read_log(server.log_path).facts
    assert (facts.spec_method, facts.num_spec_tokens) == ("ngram", 4)
    assert "acceptance" in server.output_text()  # the headless status line


def test_ngram_quit_with_sigterm_leaves_nothing(server_pool: ServerPool) -> None:
    quit_and_check(server_pool, "ngram", signal.SIGTERM)


async def test_mtp_acceptance_matches_counters_and_vllm_log(server_pool: ServerPool) -> None:
    server = server_pool.get("mtp")
    window, before, after = await measured_window(server)
    check_counters(server, window, before, after)
    check_tokens(window, before, after)
    watcher = read_log(server.log_path)
    assert (watcher.facts.spec_method, watcher.facts.num_spec_tokens) == ("mtp", 2)
    assert watcher.facts.mtp_detected
    assert len(after.per_pos) == 2


def test_mtp_quit_with_sighup_leaves_nothing(server_pool: ServerPool) -> None:
    quit_and_check(server_pool, "mtp", signal.SIGHUP)
