"""Retry delays and a server's reachability (up / down since T / recovered): pure, clock injected."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal


@dataclass(slots=True, eq=False)
class Backoff:
    """Retry delays: initial, ×factor per failure, capped at maximum; optional ±jitter (rng injectable)."""

    initial: float = 0.5
    factor: float = 2.0
    maximum: float = 10.0
    jitter: float = field(default=0.0, kw_only=True)
    """Fraction: each delay is scaled by a uniform factor in [1 − jitter, 1 + jitter], then capped."""
    rng: Callable[[], float] = field(default=random.random, kw_only=True)
    attempts: int = field(default=0, init=False)
    """Delays handed out since the last reset."""
    _delay: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.factor < 1 or self.maximum < self.initial or not 0 <= self.jitter <= 1:
            raise ValueError("Backoff needs initial > 0, factor ≥ 1, maximum ≥ initial and 0 ≤ jitter ≤ 1")
        self._delay = self.initial

    def next(self) -> float:
        """The delay before the next attempt (advances the sequence)."""
        delay = self._delay
        self._delay = min(self.maximum, self._delay * self.factor)
        self.attempts += 1
        if self.jitter:
            delay = min(self.maximum, delay * (1.0 - self.jitter + 2.0 * self.jitter * self.rng()))
        return delay

    def reset(self) -> None:
        """Back to the initial delay (after a success)."""
        self._delay = self.initial
        self.attempts = 0


@dataclass(frozen=True, slots=True)
class ConnectionStatus:
    """What the UI shows about a server's reachability."""

    state: Literal["unknown", "up", "down", "recovered"]
    """'unknown' before the first answer; 'recovered' for a while after an outage, then 'up'."""
    since: float | None
    """Clock time the current state began (down: the first failure)."""
    reason: str | None
    """Down: the latest failure's one-line reason. Recovered: the reason of the outage."""
    failures: int
    """Consecutive failures (0 when up)."""
    outage_s: float | None
    """Recovered: how long the outage lasted."""

    def describe(self, now: float | None = None) -> str:
        """One short line: 'up', 'down since 14:03:07 (connection refused)', 'recovered after 12 s down'."""
        if self.state == "unknown":
            return "connecting…"
        if self.state == "up":
            return "up"
        if self.state == "down":
            assert self.since is not None
            clock = time.strftime("%H:%M:%S", time.localtime(self.since))
            lasted = f", {now - self.since:.0f} s" if now is not None else ""
            return f"down since {clock} ({self.reason}){lasted}"
        return f"recovered after {self.outage_s or 0.0:.0f} s down"


@dataclass(slots=True, eq=False)
class ConnectionState:
    """Tracks up/down/recovered from scrape outcomes; pure, the clock (wall time, for 'since') injected."""

    clock: Callable[[], float] = time.time
    recovered_hold_s: float = field(default=5.0, kw_only=True)
    """How long 'recovered' shows before it becomes 'up'."""
    _status: ConnectionStatus = field(default=ConnectionStatus("unknown", None, None, 0, None), init=False)

    def success(self) -> ConnectionStatus:
        """Record a successful request; returns the new status."""
        now = self.clock()
        s = self._status
        if s.state == "down":
            assert s.since is not None
            self._status = ConnectionStatus("recovered", now, s.reason, 0, now - s.since)
        elif s.state == "unknown":
            self._status = ConnectionStatus("up", now, None, 0, None)
        return self.status()

    def failure(self, reason: str) -> ConnectionStatus:
        """Record a failed request with its one-line reason; returns the new status."""
        now = self.clock()
        s = self._status
        if s.state == "down":
            self._status = ConnectionStatus("down", s.since, reason, s.failures + 1, None)
        else:
            self._status = ConnectionStatus("down", now, reason, 1, None)
        return self.status()

    def status(self) -> ConnectionStatus:
        """The current status ('recovered' turns into 'up' after `recovered_hold_s`)."""
        s = self._status
        if s.state == "recovered" and s.since is not None and self.clock() - s.since >= self.recovered_hold_s:
            self._status = s = ConnectionStatus("up", s.since, None, 0, None)
        return s
