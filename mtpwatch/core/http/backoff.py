"""Retry delays and a server's reachability (up / down since T): pure, clock injected."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal


@dataclass(slots=True, eq=False)
class Backoff:
    """Retry delays: initial, ×factor per failure, capped at maximum."""

    initial: float = 0.5
    factor: float = 2.0
    maximum: float = 10.0
    _delay: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.factor < 1 or self.maximum < self.initial:
            raise ValueError("Backoff needs initial > 0, factor ≥ 1 and maximum ≥ initial")
        self._delay = self.initial

    def next(self) -> float:
        """The delay before the next attempt (advances the sequence)."""
        delay = self._delay
        self._delay = min(self.maximum, self._delay * self.factor)
        return delay

    def reset(self) -> None:
        """Back to the initial delay (after a success)."""
        self._delay = self.initial


@dataclass(frozen=True, slots=True)
class ConnectionStatus:
    """A server's reachability, as the scrape outcomes say."""

    state: Literal["unknown", "up", "down"]
    """'unknown' before the first answer."""
    since: float | None
    """Clock time the current state began (down: the first failure)."""
    reason: str | None
    """Down: the latest failure's one-line reason."""
    failures: int
    """Consecutive failures (0 when up)."""


@dataclass(slots=True, eq=False)
class ConnectionState:
    """Tracks up/down from scrape outcomes; pure, the clock (wall time, for 'since') injected."""

    clock: Callable[[], float] = time.time
    status: ConnectionStatus = field(default=ConnectionStatus("unknown", None, None, 0), init=False)

    def success(self) -> ConnectionStatus:
        """Record a successful request; returns the new status."""
        if self.status.state != "up":
            self.status = ConnectionStatus("up", self.clock(), None, 0)
        return self.status

    def failure(self, reason: str) -> ConnectionStatus:
        """Record a failed request with its one-line reason; returns the new status."""
        s = self.status
        since, failures = (s.since, s.failures) if s.state == "down" else (self.clock(), 0)
        self.status = ConnectionStatus("down", since, reason, failures + 1)
        return self.status
