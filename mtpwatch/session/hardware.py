"""`Hardware`: the NVML reading a panel shows, from the sampler the screen starts and stops, or a replay's.

The sampler (`core.roofline.nvml.Sampler`) runs in a thread while the roofline panel shows; the
reading shown is taken at each scrape (so a recording holds exactly what was shown). A replay
restores the recorded reading instead. `line` says it in words, or why there is none.
"""

from __future__ import annotations

from mtpwatch.core.roofline.nvml import HardwareReading, Sampler
from mtpwatch.session.views import describe_hardware


class Hardware:
    """One server's NVML sampler and the reading shown (None while no sampler runs)."""

    def __init__(self) -> None:
        self._sampler: Sampler | None = None
        self.reading: HardwareReading | None = None
        """The reading the panel shows: the sampler's at the last scrape, or a replay's recorded one."""

    @property
    def running(self) -> bool:
        return self._sampler is not None

    def start(self, peak_gbps: float | None) -> HardwareReading | None:
        """Start the sampler thread; returns its first reading."""
        self._sampler = Sampler(peak_gbps=peak_gbps).start()
        self.reading = self._sampler.latest()
        return self.reading

    def stop(self) -> bool:
        """Stop the sampler thread; False when none ran."""
        sampler, self._sampler = self._sampler, None
        if sampler is None:
            return False
        sampler.stop(timeout=2.0)
        self.reading = None
        return True

    def sample(self) -> bool:
        """Take the sampler's latest reading (a scrape landed); False when no sampler runs."""
        if self._sampler is None:
            return False
        self.reading = self._sampler.latest()
        return True

    def restore(self, reading: HardwareReading | None) -> None:
        """Show a recorded reading (a replay's 'nvml' record; None: the sampler stopped)."""
        self.reading = reading

    def line(self, *, identified: bool, local: bool, simulated: bool) -> str:
        """The reading in words, or why there is none ('' before the server is identified)."""
        if not identified:
            return ""
        if self.reading is None:
            return describe_hardware(None, local=local, simulated=simulated)
        return describe_hardware(self.reading, local=True)
