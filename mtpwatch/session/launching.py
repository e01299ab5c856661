"""Starting a server for the app: launch it, show its log's phases, wait for /health (`launch_server`).

`core.launch.launcher.Launch` does the work (the process group, the log watcher, the /health wait);
this module turns its progress into `StartupView`s for the start-up pane every 0.1 s and reads the
header facts the log told (`log_facts`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from mtpwatch.config import LaunchSpec
from mtpwatch.core.launch.launcher import Launch, kept_log_path
from mtpwatch.core.launch.logparse import LogWatcher
from mtpwatch.core.launch.process import ServerProcess, StartupError
from mtpwatch.session.views import StartupView

StartupProgress = Callable[[StartupView, list[str]], None]
"""Called during a launch with the phase (or failure) and the log lines since the last call."""


@dataclass(slots=True)
class LaunchOutcome:
    """What `launch_server` left: the process (None when it did not start), the launch, the outcome."""

    process: ServerProcess | None
    server: Launch
    """The core launch: its watcher has the phases and facts; it keeps reading the log (the pipe
    never fills; lines after start-up are dropped)."""
    error: str | None = None
    """Why the server did not come up (None: it answers /health)."""
    hint: str = ""


async def launch_server(
    launch: LaunchSpec,
    url: str,
    progress: StartupProgress,
    clock: Callable[[], float],
    on_start: Callable[[ServerProcess], None],
) -> LaunchOutcome:
    """Start `launch` (see the module) and wait for `url`/health.

    `on_start` gets the process as soon as it exists, so its owner can stop it even when this call
    is cancelled. A process that dies or does not answer in `launch.startup_timeout_s` is stopped;
    the result then carries the error and the log's hint, and `progress` got them with the last lines.
    """
    pending: list[str] = []
    log_path = kept_log_path(url) if launch.keep else None  # a kept server outlives the pipe
    server = Launch(launch.argv, env=launch.env, keep=launch.keep, log_path=log_path, on_line=pending.append)
    watcher = server.watcher
    t0 = clock()
    try:
        process = await server.start()
    except StartupError as exc:
        progress(StartupView(error=str(exc)), [])
        return LaunchOutcome(None, server, error=str(exc))
    on_start(process)

    def flush() -> None:
        view = StartupView(phase=watcher.phase.value, elapsed_s=clock() - t0, facts=log_facts(watcher))
        progress(view, pending[:])
        pending.clear()

    async def ticker() -> None:
        while True:
            flush()
            await asyncio.sleep(0.1)

    tick_task = asyncio.create_task(ticker())
    try:
        await server.wait_ready(url, launch.startup_timeout_s)
    except StartupError as exc:
        await asyncio.sleep(0.2)
        tick_task.cancel()
        hint = str(watcher.hints[-1]) if watcher.hints else ""
        tail = [] if pending else exc.tail[-5:]
        progress(StartupView(error=str(exc), hint=hint), pending[:] + tail)
        if process.returncode is None:
            await server.stop()
        return LaunchOutcome(process, server, error=str(exc), hint=hint)
    finally:
        tick_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await tick_task
    flush()
    server.drop_lines()  # from here on the log is read and dropped
    return LaunchOutcome(process, server)


def log_facts(watcher: LogWatcher) -> tuple[str, ...]:
    """Header facts from the server log: weights, MTP detected, centroids masking, KV cache."""
    f = watcher.facts
    out: list[str] = []
    if f.weights_gib is not None:
        out.append(f"weights {f.weights_gib:.1f} GiB")
    if f.mtp_detected:
        out.append("Detected MTP model")
    if f.spec_method:
        k = f" k={f.num_spec_tokens}" if f.num_spec_tokens else ""
        out.append(f"spec {f.spec_method}{k}")
    if f.centroids_masking:
        out.append("centroids masking on")
    if f.kv_cache_gib is not None:
        out.append(f"KV cache {f.kv_cache_gib:.1f} GiB")
    elif f.kv_cache_tokens is not None:
        out.append(f"KV cache {f.kv_cache_tokens:,} tokens")
    return tuple(out)
