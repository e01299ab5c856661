"""`mtpwatch start --headless`: start the server without the terminal UI, print the start-up phases
and facts from its log, wait for /health, say where to attach, then one status line per scrape (a
`session.watch.ServerFeed`'s `ServerView`, every number through `render.numbers`), and stop the
server's whole process group on Ctrl-C, SIGTERM or SIGHUP (or leave it running with ``--keep``).

Called by `commands.start`, which builds the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.launch.launcher import Launch, kept_log_path
from mtpwatch.core.launch.logparse import LogEvent
from mtpwatch.core.launch.process import ServerProcess, StartupError, describe_exit, kept_lines
from mtpwatch.render.numbers import count, fixed, percent, tok_s
from mtpwatch.session.views import ServerView
from mtpwatch.session.watch import ServerFeed

STATUS_WINDOW = "10 s"
"""The window of the headless status line's rates: the panel's shortest (`session.watch.WINDOW_SECONDS`)."""


def status_line(view: ServerView) -> str | None:
    """The headless status line of one view (None: no window to describe yet)."""
    if view.status != "up":
        return f"status: {view.status_detail or view.status}"
    if view.server_tok_s is None:
        return None  # one scrape so far: no window yet
    parts = [f"{tok_s(view.server_tok_s)} tok/s over {view.window}", f"running {count(view.running)}"]
    if view.speculative:
        parts.append(f"acceptance {percent(view.acceptance_rate)}")
        if view.acceptance_rate is not None:
            parts.append(f"mean length {fixed(view.mean_acceptance_length)}")
        parts.append(f"since start {percent(view.acceptance_since_start)}")
    else:
        parts.append("no speculative decoding")
    return "status: " + " | ".join(parts)


async def run_headless(
    argv: list[str],
    *,
    url: str,
    api_key: str | None,
    keep: bool,
    startup_timeout: float,
    status_interval: float,
    log_file: Path | None,
    served_model_name: str | None,
    env: Mapping[str, str] | None = None,
) -> int:
    t0 = time.monotonic()

    def say(text: str) -> None:  # one line per event, prefixed with seconds since start
        print(f"[{time.monotonic() - t0:6.1f}s] {text}", flush=True)

    say("starting: " + shlex.join(argv))
    server_log = kept_log_path(url) if keep else None
    log_fh = open(log_file, "a", encoding="utf-8") if log_file else None  # noqa: SIM115, ASYNC230

    def on_line(line: str) -> None:
        if log_fh is not None:
            log_fh.write(line + "\n")
            log_fh.flush()

    def on_event(event: LogEvent) -> None:
        # Hints are printed with the failure report, next to the log lines they explain.
        if event.kind in ("phase", "fact", "spec"):
            say(event.text if event.kind != "phase" else f"phase: {event.text}")

    launch = Launch(argv, env=env, keep=keep, log_path=server_log, on_line=on_line, on_event=on_event)
    try:
        proc = await launch.start()
    except StartupError as exc:
        say(f"error: {exc}")
        if log_fh is not None:
            log_fh.close()
        return 1
    say(f"process group {proc.pgid}" + (f", log {server_log}" if server_log else ""))

    loop = asyncio.get_running_loop()
    stop_event, received = _stop_on_signals(loop)
    try:
        try:
            elapsed = await _until_ready(launch, url, startup_timeout, stop_event)
        except StartupError as exc:
            _report_failure(say, proc, launch, f"error: {exc}", heading="last log lines:")
            if exc.returncode is None:  # timed out while still running: do not leave it behind
                await proc.stop()
            return 1
        if elapsed is None:
            say(f"stopping before the server was ready ({signal.Signals(received[0]).name})")
            return await _finish(proc, keep, url, say)
        say(f"ready in {elapsed:.0f} s: {url}")
        say(f"attach from another terminal: mtpwatch attach {url}")

        spec = ServerSpec(label="status", url=url, model=served_model_name, api_key=api_key)
        feed = ServerFeed(
            spec, DisplaySettings(scrape_interval_s=status_interval, idle_interval_s=status_interval)
        )
        try:
            if not await _status_until_stopped(feed, proc, stop_event, say):
                _report_failure(say, proc, launch, f"error: the server {describe_exit(proc.returncode)}")
                return 1
        finally:
            await feed.close()
        say(f"received {signal.Signals(received[0]).name}" if received else "stopping")
        return await _finish(proc, keep, url, say)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(signum)
        if not keep or proc.returncode is not None:
            await launch.close_log()
        if log_fh is not None:
            log_fh.close()


async def _until_ready(launch: Launch, url: str, timeout: float, stop_event: asyncio.Event) -> float | None:
    """Seconds until /health answered; None when told to stop first. Raises `StartupError`."""
    health = asyncio.create_task(launch.wait_ready(url, timeout))
    stopper = asyncio.create_task(stop_event.wait())
    await asyncio.wait({health, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if not health.done():
        health.cancel()
        with contextlib.suppress(asyncio.CancelledError, StartupError):
            await health
        return None
    return health.result()


def _stop_on_signals(loop: asyncio.AbstractEventLoop) -> tuple[asyncio.Event, list[int]]:
    """An event set by SIGINT, SIGTERM or SIGHUP (not those ignored, as under nohup), and the
    signals received."""
    stop_event = asyncio.Event()
    received: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue  # nohup: stay alive when the terminal goes

        def on_signal(signum: int = signum) -> None:
            received.append(signum)
            stop_event.set()

        loop.add_signal_handler(signum, on_signal)
    return stop_event, received


def _report_failure(
    say: Callable[[str], None], proc: ServerProcess, launch: Launch, line: str, heading: str | None = None
) -> None:
    """The error line, the server's last 25 log lines and the hints that explain them."""
    say(line)
    tail = proc.tail(25)
    if tail and heading:
        say(heading)
    for tail_line in tail:
        print(f"    {tail_line}")
    for hint in launch.watcher.hints:
        say(f"hint: {hint}")


async def _status_until_stopped(
    feed: ServerFeed, proc: ServerProcess, stop_event: asyncio.Event, say: Callable[[str], None]
) -> bool:
    """A status line every scrape (the feed's interval: --status-interval, or its backoff while the
    server is down) until told to stop (True) or the server exits (False)."""
    exited = asyncio.ensure_future(proc.wait())
    try:
        while not stop_event.is_set():
            delay = await feed.poll()  # the status interval, or the backoff while it is down
            status = status_line(feed.view(STATUS_WINDOW))
            if status:
                say(status)
            waiter = asyncio.ensure_future(stop_event.wait())
            await asyncio.wait({waiter, exited}, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if exited.done():
                return False
        return True
    finally:
        exited.cancel()


async def _finish(proc: ServerProcess, keep: bool, url: str, say: Callable[[str], None]) -> int:
    """Leave the server running (--keep) or stop it; the exit status is 0 either way."""
    if keep and proc.returncode is None:
        proc.detach(url)
        for line in kept_lines():
            say(line)
        return 0
    status = await proc.stop(timeout=10)
    say(f"server stopped (exit status {status})")
    return 0
