"""`DemoLoop`: which prompt a self-running demo sends next, and when (`demo --loop`).

Pure: the screen asks `DemoLoop.due` once a second whether to send; the loop cycles through the
built-in prompts until the app quits.
"""

from __future__ import annotations

from collections.abc import Sequence

PAUSE_S = 4.0
"""Seconds between the end of one answer and the next prompt (time to read the numbers)."""


def loop_prompts(first: str) -> tuple[str, ...]:
    """`first` (the suggested prompt), then the built-in English long-answer and code prompts."""
    from mtpwatch.core.ab.workloads import builtin  # only with --loop: the prompt files stay unread

    texts = [p.text for p in (*builtin("long-en"), *builtin("code"))]
    return (first, *texts)


class DemoLoop:
    """Sends `prompts` in turn, `pause_s` after the previous answer finished, forever."""

    def __init__(self, prompts: Sequence[str], *, pause_s: float = PAUSE_S) -> None:
        if not prompts:
            raise ValueError("a demo loop needs at least one prompt")
        self.prompts = tuple(prompts)
        self.pause_s = pause_s
        self.sent = 0
        self._idle_since: float | None = None

    def due(self, now: float, *, busy: bool, ready: bool) -> str | None:
        """The prompt to send now, or None (busy, servers not up yet, or still pausing)."""
        if busy or not ready:
            self._idle_since = None
            return None
        if self._idle_since is None:
            self._idle_since = now
        if self.sent and now - self._idle_since < self.pause_s:
            return None
        prompt = self.prompts[self.sent % len(self.prompts)]
        self.sent += 1
        self._idle_since = None
        return prompt
