"""When a panel's view is built: as its scrape lands, at most `VIEW_HZ` times a second per panel.

A view built on a fixed 2 Hz tick would show a scrape up to one tick old (0.25 s on average at 2
Hz scrapes); built as the scrape lands, it shows it at once, and a server scraped at the view rate
needs no scrape that no view shows. A scrape that lands sooner than
`1 / hz` after the panel's last view waits until then, with any other that lands meanwhile: one
view, the newest page. Panels are paced apart, so two servers' scrapes do not wait for each other.
"""

from __future__ import annotations

from collections.abc import Iterable

VIEW_HZ = 2.0
"""Views reach a panel at most this often: the numbers' repaints cost, and a reader takes in two
a second (the default scrape interval is this rate's period, `DisplaySettings.scrape_interval_s`)."""


class ViewPacer:
    """Which panels' views are due now, and when the next one comes of age (clock: seconds)."""

    def __init__(self, hz: float = VIEW_HZ) -> None:
        self.period = 1.0 / hz
        self._built: dict[int, float] = {}
        self._due: set[int] = set()

    @property
    def due(self) -> frozenset[int]:
        """Panels whose feed changed since their last view."""
        return frozenset(self._due)

    def mark(self, indices: Iterable[int]) -> None:
        """These panels' feeds changed (a scrape landed, a replayed record, a status change)."""
        self._due.update(indices)

    def take(self, now: float, *, force: bool = False) -> list[int]:
        """The due panels whose last view is at least a period old (every due one with `force`), in
        order; they count as built at `now` and are no longer due."""
        ready = sorted(i for i in self._due if force or self.wait(i, now) <= 0.0)
        for i in ready:
            self._due.discard(i)
            self._built[i] = now
        return ready

    def wait(self, index: int, now: float) -> float:
        """Seconds until panel `index` may get its next view (0: now)."""
        last = self._built.get(index)
        return 0.0 if last is None else max(0.0, last + self.period - now)

    def next_in(self, now: float) -> float | None:
        """Seconds until the first due panel may be built; None when none is due."""
        return min((self.wait(i, now) for i in self._due), default=None)
