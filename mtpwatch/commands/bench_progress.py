"""Progress of a long bench on stderr: done/total, elapsed, ETA, the run going on and the last result.

On a terminal it is one line rewritten in place (`\\r`). When stderr is not a terminal (`nohup`,
CI logs, `tee`) it is one plain line every `interval_s` seconds (and one when the bench ends), so
a log shows the bench is alive without a line per run.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Literal, TextIO

from mtpwatch.core.ab.events import BenchEvent, BenchFinished, PairFinished, RunFinished, StatusChanged
from mtpwatch.core.ab.plan import RunUnits, Step
from mtpwatch.render.numbers import MISSING, percent, ratio, tok_s

Mode = Literal["tty", "lines", "off"]


def progress_mode(flag: bool | None) -> Mode:
    """--progress/--no-progress: in place on a terminal (or --progress), else lines; off: --no-progress."""
    if flag is None:
        return "tty" if sys.stderr.isatty() else "lines"
    return "tty" if flag else "off"


def duration(seconds: float) -> str:
    """'42s', '3m05s', '1h02m'."""
    s = round(max(seconds, 0.0))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def upcoming_runs(plan: Sequence[Step], prompt_ids: Sequence[str]) -> list[str]:
    """A label per run left in `plan`, in order: 'ja-bandwidth B c1 L128'."""
    units = [u for step in plan if isinstance(step, RunUnits) for u in step.units]
    return [f"{prompt_ids[u.prompt]} {u.arm.upper()} {u.point.name}" for u in units]


class Progress:
    """Turns bench events into progress lines on `stream`."""

    def __init__(
        self,
        stream: TextIO,
        mode: Mode,
        *,
        interval_s: float = 30.0,
        upcoming: Sequence[str] = (),
        already_done: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.mode: Mode = mode
        self.interval_s = interval_s
        self.upcoming = list(upcoming)
        self.clock = clock
        self.started = clock()
        self.already_done = already_done
        """Runs finished before this session (a resume): not counted for the ETA."""
        self.done = already_done
        self.total = already_done + len(self.upcoming)
        self.speedup = ""
        self.last = ""
        self.status = ""
        self.width = 0
        self._last_line_at: float | None = None
        self._last_text = ""

    def line(self) -> str:
        elapsed = self.clock() - self.started
        new = self.done - self.already_done
        left = self.total - self.done
        eta = f"ETA {duration(elapsed / new * left)}" if new > 0 and left > 0 else "ETA —" if left else "done"
        pct = percent(self.done / self.total, 0) if self.total else MISSING
        parts = [f"[{self.done}/{self.total} {pct}] {duration(elapsed)} elapsed, {eta}"]
        if self.status:
            parts.append(self.status)
        elif 0 <= new < len(self.upcoming):
            parts.append(f"now: {self.upcoming[new]}")
        if self.last:
            parts.append(f"last: {self.last}")
        if self.speedup:
            parts.append(self.speedup)
        return " · ".join(parts)

    def _emit(self, force: bool = False) -> None:
        if self.mode == "tty":
            text = self.line()[: shutil.get_terminal_size((120, 24)).columns - 1]
            pad = max(0, self.width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
            self.width = len(text)
        elif self.mode == "lines":
            now = self.clock()
            text = self.line()
            due = self._last_line_at is None or now - self._last_line_at >= self.interval_s
            if (due or force) and text != self._last_text:
                self.stream.write("mtpwatch bench: " + text + "\n")
                self.stream.flush()
                self._last_line_at = now
                self._last_text = text

    def __call__(self, event: BenchEvent) -> None:
        if self.mode == "off":
            return
        if isinstance(event, StatusChanged):
            self.status = event.message
            self._emit()
        elif isinstance(event, PairFinished) and event.running_speedup is not None:
            self.speedup = f"speed-up B/A {ratio(event.running_speedup)} ({event.pairs_done} pairs)"
        elif isinstance(event, RunFinished):
            r = event.record
            self.status = ""
            self.done = event.done
            self.total = event.total
            rate = f"{tok_s(r.rate, 1)} tok/s" if r.rate is not None else "failed" if r.error else "-"
            tag = " warm-up" if r.warmup else ""
            self.last = f"{r.prompt} {r.arm.upper()} run {r.run}{tag} {rate}"
            self._emit()
        elif isinstance(event, BenchFinished):
            self.status = ""
            if self.mode == "tty":
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
            else:
                self._emit(force=True)

    def interrupted(self) -> None:
        """End the in-place line before another message is written."""
        if self.mode == "tty" and self.width:
            self.stream.write("\n")
            self.stream.flush()
