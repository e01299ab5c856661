"""A generated fleet of 200 vLLM instances (30 min at 15 s, seven injected faults: fleetgen.py) loaded
into Debian's Prometheus (promtool tsdb create-blocks-from openmetrics) and Debian's VictoriaMetrics
(/api/v1/import/prometheus, every flag at its default: a 30 s latency offset): every fault is found,
no healthy instance is flagged, on both stores; `snapshot --prometheus URL --json` gives the same
groups and outliers.

Why 200 × 30 min: 1.6 M samples, which both stores load in ~10 s on two busy cores, while every
group (40 instances) is large enough for the MAD rule to mean something; the benchmark
(tests/bench/fleet_store.py) runs 1,000.

Timing: the data ends `LEAD_S` seconds after it is generated (samples a store holds before their
time stay invisible until then), and the test queries when the wall clock is within `SLACK_S` of
that end: the stale instance (silent 120 s) is then older than 3 scrape intervals at the store's
instant (VictoriaMetrics's is 30 s earlier), and the restart (60 s before the end) lies inside the
120 s window on both stores.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mtpwatch.commands.options import free_port
from mtpwatch.core.fleet.rows import FleetRow
from mtpwatch.core.sources.prometheus import FleetRead, PrometheusSource

from . import fleetgen
from .conftest import Procs, prometheus_binary, victoria_binary

N, SPAN_S, LEAD_S, SLACK_S = 200, 1800, 45, 25


async def read(url: str, window_s: float) -> FleetRead:
    source = PrometheusSource(url)
    try:
        return await source.read(window_s)
    finally:
        await source.aclose()


def snapshot_json(url: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "mtpwatch", "snapshot", "--prometheus", url, "--window", "120", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def check_faults(rows: list[FleetRow], fleet: fleetgen.Fleet, store: str) -> None:
    by = {r.source: r for r in rows}
    f = fleet.faults
    assert len(by) == N, f"{store}: every instance listed, the silent ones too ({len(by)} rows)"
    assert "acceptance" in by[f["collapsed"]].outliers, (store, by[f["collapsed"]])
    assert "tok/s" in by[f["slow"]].outliers, (store, by[f["slow"]])
    assert "k" in by[f["k"]].outliers and by[f["k"]].why, (store, by[f["k"]])
    assert by[f["down"]].state == "down", (store, by[f["down"]])
    assert by[f["stale"]].state in ("stale", "missing"), (store, by[f["stale"]])
    assert by[f["missing"]].state == "missing", (store, by[f["missing"]])
    assert by[f["restart"]].state == "restarted" and not by[f["restart"]].outliers, (store, by[f["restart"]])
    healthy = [r for r in rows if r.source not in f.values()]
    flagged = [(r.source, r.state, r.outliers) for r in healthy if r.outliers or r.state != "up"]
    assert not flagged, f"{store}: healthy instances flagged: {flagged}"
    for r in rows:  # the method from the target label, k from the per-position series
        inst = next(i for i in fleet.instances if i.instance == r.source)
        assert (r.model, r.method, r.k) == (inst.model, inst.method, inst.k), (store, r)


async def check_view(url: str, fleet: fleetgen.Fleet) -> None:
    """The fleet screen at 160×48: by group (200 rows > 40), the groups needing attention first; Enter
    lists a group's instances (outliers first); cells built only for the lines in view; `/` filters;
    Escape goes back; the help says what a refresh asked."""
    from mtpwatch.config import AppConfig, FleetSettings
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.screens.fleet import FleetScreen
    from mtpwatch.ui.screens.help import HelpScreen
    from mtpwatch.ui.widgets.fleet_table import FleetTable, GroupTable

    app = make_app(AppConfig(servers=[], fleet=FleetSettings(prometheus=url, window_s=10.0)))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        groups = screen.query_one(GroupTable)
        deadline = time.monotonic() + 60
        while not groups.rows_shown:
            assert time.monotonic() < deadline, "no groups within 60 s"
            await pilot.pause(0.2)
        assert screen.by_group and len(groups.rows_shown) == len(fleetgen.PROFILES) + 1
        first = groups.rows_shown[0]
        assert first.attention > 0 and all(g.attention <= first.attention for g in groups.rows_shown)
        status = str(screen.query_one("#fleet-status").render())
        assert "queries" in status and "not 10 s" in status, status
        # Enter on the group of the collapsed instance: its rows, outliers first (the sort key)
        collapsed = fleet.faults["collapsed"]
        index = next(i for i, g in enumerate(groups.rows_shown) if any(r.source == collapsed for r in g.rows))
        groups.move_cursor(row=index)
        await pilot.press("enter")
        table = screen.query_one(FleetTable)
        assert not screen.by_group and len(table.rows_shown) == len(groups.rows_shown[index].rows)
        while screen.sort_index != 4:  # outliers first
            await pilot.press("s")
        assert table.rows_shown[0].source == collapsed
        assert 0 < table.drawn <= 48, "cells built only for the lines in view"
        await pilot.press("escape")
        assert screen.by_group
        await pilot.press("g")  # every row: still only a screenful built
        assert len(table.rows_shown) == N and table.drawn <= 48
        await pilot.press("slash")
        for ch in collapsed:
            await pilot.press(ch)
        await pilot.press("enter")
        assert [r.source for r in table.rows_shown] == [collapsed]
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        assert re.search(r"last refresh: \d+ queries, \d+ series, \d+ KiB in [\d.]+ s", app.screen.text)
        await pilot.press("ctrl+q")


async def test_generated_fleet_on_prometheus_and_victoria_metrics(procs: Procs, tmp_path: Path) -> None:
    fleet = fleetgen.make_fleet(N, SPAN_S, lead_s=LEAD_S, seed=41)
    t0 = time.monotonic()
    (tmp_path / "p").mkdir()
    (tmp_path / "v").mkdir()
    prom = fleetgen.load_prometheus(procs.start, prometheus_binary(), fleet, tmp_path / "p", free_port())
    t_prom = time.monotonic() - t0
    vm = fleetgen.load_victoria(procs.start, victoria_binary(), fleet, tmp_path / "v", free_port())
    t_vm = time.monotonic() - t0 - t_prom
    print(f"loaded {N} instances × {SPAN_S} s: Prometheus {t_prom:.1f} s, VictoriaMetrics {t_vm:.1f} s")
    # until the wall clock reaches the data's end (a time of day, not a duration guessed)
    await asyncio.sleep(max(0.0, fleet.end - SLACK_S - time.time()))
    assert time.time() < fleet.end + SLACK_S, "loading took longer than the data's lead: raise LEAD_S"

    reads = {"Prometheus": await read(prom, 120.0), "VictoriaMetrics": await read(vm, 120.0)}
    short = {"Prometheus": await read(prom, 10.0), "VictoriaMetrics": await read(vm, 10.0)}
    docs = {"Prometheus": snapshot_json(prom), "VictoriaMetrics": snapshot_json(vm)}
    assert time.time() < fleet.end + SLACK_S, "queries outlived the data's end: raise LEAD_S"

    for store, r in reads.items():
        check_faults(r.rows, fleet, store)
        assert r.fit.interval_s == pytest.approx(15.0, abs=0.5), store
        # 10 s asked of a store scraped every 15 s: 60 s used and said; the live rows are not idle
        s = short[store]
        assert s.fit.interval_s is not None
        assert s.fit.window_s == pytest.approx(4 * s.fit.interval_s) and "not 10 s" in s.fit.notes[0]
        assert sum(1 for x in s.rows if x.state == "up") >= N - len(fleetgen.FAULTS), store
        doc = docs[store]
        assert sorted(doc["outliers"]) == sorted(x.name for x in r.rows if x.outliers), store
        live_groups = {(g["model"], g["method"], g["k"]): g for g in doc["groups"]}
        assert len(live_groups) == len(fleetgen.PROFILES) + 1, "five profiles and the odd k"
        flagged = {o["source"] for g in doc["groups"] for o in g["outliers"]}
        assert flagged == {fleet.faults[x] for x in ("collapsed", "slow", "k")}, store
        assert all(o["why"] for g in doc["groups"] for o in g["outliers"]), "each outlier says why"
        assert doc["store"]["scrape_interval_s"] == pytest.approx(15.0, abs=0.5)
        assert doc["cost"]["queries"] >= 15 and doc["cost"]["bytes"] > 0
    await check_view(vm, fleet)
    # VictoriaMetrics answers 30 s behind; Prometheus at the time asked
    assert reads["VictoriaMetrics"].fit.lag_s == pytest.approx(30, abs=2)
    assert abs(reads["Prometheus"].fit.lag_s) < 1
    # the same numbers from both stores: group medians within 2 % (Prometheus extrapolates increase())
    p = {(g["model"], g["k"]): g for g in docs["Prometheus"]["groups"]}
    for g in docs["VictoriaMetrics"]["groups"]:
        a, b = g["acceptance_rate"], p[(g["model"], g["k"])]["acceptance_rate"]
        if a is not None:
            assert a["p50"] == pytest.approx(b["p50"], rel=0.02), g["model"]
