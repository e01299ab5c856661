"""How a window, staleness and the refresh period fit the store (core/sources/prometheus_fit)."""

from __future__ import annotations

import pytest

from mtpwatch.core.fleet.rows import FleetRow
from mtpwatch.core.sources.prometheus_fit import (
    Key,
    finish_row,
    fit_window,
    history_note,
    median_gap,
    missing_rows,
    refresh_period,
    stale_limit,
)


def test_window_never_shorter_than_four_scrape_intervals() -> None:
    assert fit_window(10.0, 15.0) == (
        60.0,
        "window 60 s, not 10 s: at least 4 × the store's 15 s scrape interval",
    )
    assert fit_window(60.0, 15.0) == (60.0, "")
    assert fit_window(10.0, 1.0) == (10.0, "")
    assert fit_window(10.0, None) == (10.0, "")  # nothing to measure: as asked


def test_history_shorter_than_the_window_is_flagged() -> None:
    assert history_note(60.0, 15.0, 3) == "only 30 s of history for a 60 s window"
    assert history_note(60.0, 15.0, 4) == ""  # 4 samples at 15 s: all a 60 s range can hold
    assert history_note(60.0, 1.0, 43) == "only 42 s of history for a 60 s window"
    assert history_note(60.0, None, 3) == ""


def test_stale_after_three_scrape_intervals_and_a_slow_store_stretches_the_refresh() -> None:
    assert stale_limit(15.0, 15.0) == 45.0 and stale_limit(15.0, 1.0) == 15.0
    assert refresh_period(5.0, 0.4) == (5.0, "")
    period, note = refresh_period(5.0, 2.5)
    assert period == 10.0 and "store slow" in note and "every 10 s" in note


def test_median_gap_missing_rows_and_restarts() -> None:
    matrix = [{"values": [[0, "1"], [15, "2"], [30, "3"], [48, "4"]]}, {"values": [[1, "1"], [16, "2"]]}]
    assert median_gap(matrix) == 15.0
    assert median_gap([]) is None
    seen: dict[Key, tuple[str | None, int | None]] = {
        ("a:1", "m", "0"): ("mtp", 2),
        ("b:1", "m", "0"): ("mtp", 2),
    }
    (row,) = missing_rows(seen, {("a:1", "m", "0")})
    assert (row.source, row.state, row.k, row.method) == ("b:1", "missing", 2, "mtp")
    live = FleetRow(source="a:1", model="m", engine="0", state="up", k=None)
    done = finish_row(live, "eagle3", 3, reset=True)
    assert (done.method, done.k, done.state) == ("eagle3", 3, "restarted")
    assert finish_row(live, None, None, reset=False) == live


@pytest.mark.parametrize("asked", [1.0, 5.0, 30.0])
def test_fit_is_monotonic(asked: float) -> None:
    window, _ = fit_window(asked, 15.0)
    assert window >= max(asked, 60.0)
