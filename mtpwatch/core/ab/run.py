"""One `mtpwatch bench` run: its provenance and `--jsonl` run log (`BenchRun`), the
settings a `--resume` takes from its log (`resumed`), the arms it measures (`bench_arms`), and the run
itself, stopped cleanly by SIGTERM/SIGHUP as by Ctrl-C (`run_bench`).

`commands/bench.py` is the click command around it; nothing here prints (lines go to `echo`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import shlex
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mtpwatch.core import provenance
from mtpwatch.core.ab import runlog
from mtpwatch.core.ab.events import BenchEvent, RunFinished
from mtpwatch.core.ab.http_arm import HttpArm, LaunchedArm
from mtpwatch.core.ab.options import BenchOptions
from mtpwatch.core.ab.plan import BenchConfig, BenchConfigError
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.ab.runner import BenchRunner
from mtpwatch.core.launch.servers import mask_argv
from mtpwatch.core.launch.vllm_cmd import is_loopback


@dataclass(kw_only=True)
class BenchRun:
    """The provenance block and the run log of one bench invocation; `echo` gets the lines for stderr."""

    arms: Sequence[HttpArm]
    config: BenchConfig
    label: str | None
    metadata: Mapping[str, str]
    gpu: str | None
    workload: str
    log: runlog.RunLog | None
    jsonl_path: Path | None
    options: Mapping[str, Any]
    launch: Mapping[str, str | None]
    echo: Callable[[str], None]
    infos: dict[str, provenance.ArmInfo] = field(default_factory=dict, init=False)
    meta: dict[str, Any] | None = field(default=None, init=False)
    writer: runlog.RunLogWriter | None = field(default=None, init=False)

    @property
    def names(self) -> list[str]:
        return ["a", "b"][: len(self.arms)]

    async def start(self) -> None:
        """Collect the provenance (asking the servers) and open the run log."""
        for name, arm in zip(self.names, self.arms, strict=True):
            self.infos[name] = await provenance.describe_arm(arm)
        overflow = context_overflow(self.config, self.infos)
        if overflow:  # before any request: each would fail the same way
            raise BenchConfigError(overflow)
        infos = {name: info.to_json() for name, info in self.infos.items()}
        served = [f"{n.upper()} {i['url']} serves {provenance.arm_model(i)}" for n, i in infos.items()]
        if any(provenance.arm_model(i) for i in infos.values()):  # launched servers are not up yet
            self.echo("mtpwatch bench: " + "; ".join(served))
        for line in provenance.arm_warnings(infos):
            self.echo(f"warning: {line}")
        if self.log is not None:
            meta = dict(self.log.header.get("meta") or {})
            meta["metadata"] = {**(meta.get("metadata") or {}), **self.metadata}
            meta["resumed"] = [
                *(meta.get("resumed") or []),
                {
                    "created_utc": provenance.utc_now(),
                    "argv": mask_argv(sys.argv),
                    "runs_before": len(self.log.records),
                },
            ]
            self.meta = meta
        else:
            local = all(is_loopback(urlsplit(arm.url).hostname or "") for arm in self.arms)
            self.meta = provenance.build_meta(
                label=self.label,
                metadata=self.metadata,
                arms=self.infos,
                prompts=provenance.prompt_set(self.workload, self.config.prompts),
                gpu=provenance.report_gpu(self.gpu, list(self.infos.values()), local=local),
                temperature=self.config.temperature,
            )
        if self.jsonl_path is None:
            return
        self.writer = runlog.RunLogWriter(self.jsonl_path, append=self.log is not None)
        if self.log is None:
            arms = {
                name: {"url": arm.url, "label": arm.label, "launch": self.launch.get(name)}
                for name, arm in zip(self.names, self.arms, strict=True)
            }
            self.writer.header(meta=self.meta, config=self.config, arms=arms, options=self.options)
        else:
            failed = f", {self.log.failed} failed run(s) to run again" if self.log.failed else ""
            self.writer.note(
                f"resumed at {provenance.utc_now()} with {len(self.log.finished)} runs done{failed}"
            )

    def on_event(self, event: BenchEvent) -> None:
        """Append every finished run to the log before the next one starts."""
        if self.writer is not None and isinstance(event, RunFinished):
            self.writer.run(event.record)

    def close(self, note: str | None = None) -> None:
        """Close the log (a note says why it ended early)."""
        if self.writer is not None:
            if note:
                self.writer.note(note)
            self.writer.close()

    def final_meta(self) -> dict[str, Any] | None:
        """The provenance for the report; servers started by the bench are described as they ran."""
        if self.meta is None:
            return None
        meta = dict(self.meta)
        arms = dict(meta.get("arms") or {})
        launched: list[provenance.ArmInfo] = []
        for name, arm in zip(self.names, self.arms, strict=True):
            if isinstance(arm, LaunchedArm):
                launched.append(provenance.launched_arm_info(arm))
                arms[name] = launched[-1].to_json()
        meta["arms"] = arms
        gpu = meta.get("gpu")
        found = provenance.server_gpu(launched) if len(launched) == len(self.arms) else None
        if found is not None and not (isinstance(gpu, dict) and gpu.get("name")):
            meta["gpu"] = found.to_json()  # simulators started by the bench answer only once up
        return meta


def context_overflow(config: BenchConfig, infos: Mapping[str, provenance.ArmInfo]) -> str | None:
    """Why no request of `config` can fit an arm's context (one line), or None (or unknown: a server
    started by the bench is not up yet). A request's prompt and completion share the context
    (`max_model_len` of /v1/models, vLLM's `ModelCard`), so `max_tokens` must be below it: more is
    answered 400 "maximum context length", as the simulator does (mtpwatch/sim/completions.py)."""
    asked = max(config.lengths) if config.lengths else max((p.max_tokens for p in config.prompts), default=0)
    flag = "--lengths" if config.lengths else "--max-tokens"
    for name, info in infos.items():
        limit = info.max_model_len
        if limit is not None and asked >= limit:
            return (
                f"{flag} asks for {asked:,} tokens, but {name.upper()}'s context is {limit:,} tokens"
                f" (max_model_len, from its /v1/models), the prompt included: give fewer than {limit:,}"
            )
    return None


def resumed(log: runlog.RunLog, opts: BenchOptions, *, default_url: str) -> BenchOptions:
    """`opts` with the servers and settings of its run log (what the log lacks keeps the flag's value)."""
    given = log.header.get("options") or {}
    arms_h = log.arms
    url = ab = None
    if "b" in arms_h:
        ab = (str(arms_h["a"]["url"]), str(arms_h["b"]["url"]))
    else:
        url = str(arms_h.get("a", {}).get("url", default_url))
    return dataclasses.replace(
        opts,
        url=url,
        ab=ab,
        launch_a=arms_h.get("a", {}).get("launch"),
        launch_b=arms_h.get("b", {}).get("launch"),
        schedule=log.config.schedule,
        chat=bool(given.get("chat", False)),
        model=given.get("model"),
        startup_timeout=float(given.get("startup_timeout", opts.startup_timeout)),
        prompts_spec=str(given.get("prompts", opts.prompts_spec)),
        label=opts.label or (log.header.get("meta") or {}).get("label"),
    )


def bench_arms(
    *,
    url: str | None,
    ab: tuple[str, str] | None,
    schedule: str,
    launch_a: str | None,
    launch_b: str | None,
    startup_timeout: float,
    common: Mapping[str, Any],
) -> list[HttpArm]:
    """The arms of a bench: launched (restart schedule), two servers (--ab) or one. Raises
    `BenchConfigError` for launch commands without the restart schedule or the reverse, `ValueError`
    for a bad URL."""
    if schedule == "restart":
        if ab is None or not launch_a or not launch_b:
            raise BenchConfigError(
                "--schedule restart needs --ab URL_A URL_B and both --launch-a and --launch-b"
            )
        return [
            LaunchedArm(
                at, shlex.split(cmd), startup_timeout_s=startup_timeout, label=f"{at} ({cmd})", **common
            )
            for at, cmd in zip(ab, (launch_a, launch_b), strict=True)
        ]
    if launch_a or launch_b:
        raise BenchConfigError("--launch-a/--launch-b are for --schedule restart")
    if ab is not None:
        return [HttpArm(ab[0], **common), HttpArm(ab[1], **common)]
    assert url is not None
    return [HttpArm(url, **common)]


class Stopped(Exception):
    """The bench was stopped by a signal; `str()` names it ('Ctrl-C', 'SIGTERM', 'SIGHUP')."""


async def run_bench(
    runner: BenchRunner,
    arms: Sequence[HttpArm],
    progress: Callable[[BenchEvent], None],
    check: bool,
    before: Callable[[], Awaitable[None]] | None = None,
) -> BenchReport:
    """Check the arms (`check`), run `before`, then the bench; `Stopped` when a signal ended it, and the
    arms closed in any case."""
    # SIGTERM/SIGHUP (a closed SSH session) cancel the run like Ctrl-C does, so the runs measured
    # so far are still reported and written instead of vanishing with the process.
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    stopped_by: list[str] = []

    def stop(name: str) -> None:
        stopped_by.append(name)
        if task is not None:
            task.cancel()

    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop, sig.name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no such signal
            pass
    try:
        if check:
            for arm in arms:
                await arm.check()
        if before is not None:
            await before()
        return await runner.run(progress)
    except asyncio.CancelledError:
        if stopped_by:
            raise Stopped(stopped_by[0]) from None
        raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        for arm in arms:
            await arm.aclose()
