"""Screenshots of the fleet view over 1,000 generated instances in Debian's Prometheus, at 160×48 and 80×24.

    python tests/bench/fleet_store_screens.py [--instances 1000] [--out screenshots]

The fleet is tests/real_prometheus/fleetgen.py's (seven injected faults); the pictures are taken when
the wall clock reaches the data's end, so the faults read as a user would meet them: the group view
(the groups needing attention first), then the instances of the group holding the collapsed one,
outliers first. Writes fleet-1000-160x48.svg, fleet-1000-160x48-group.svg and fleet-1000-80x24.svg.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mtpwatch.commands.options import free_port  # noqa: E402
from tests.real_prometheus import fleetgen  # noqa: E402


async def shoot(url: str, size: tuple[int, int], out: Path, collapsed: str, drill: bool) -> list[Path]:
    from mtpwatch.config import AppConfig, FleetSettings
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.screens.fleet import FleetScreen
    from mtpwatch.ui.widgets.fleet_table import GroupTable

    app = make_app(AppConfig(servers=[], fleet=FleetSettings(prometheus=url, window_s=10.0)))
    saved = []
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        groups = screen.query_one(GroupTable)
        while not groups.rows_shown:
            await pilot.pause(0.2)
        await pilot.pause(0.5)
        name = f"fleet-{len(screen.rows)}-{size[0]}x{size[1]}"
        saved.append(Path(app.save_screenshot(filename=f"{name}.svg", path=str(out))))
        if drill:
            index = next(
                i for i, g in enumerate(groups.rows_shown) if any(r.source == collapsed for r in g.rows)
            )
            groups.move_cursor(row=index)
            await pilot.press("enter")
            while screen.sort_index != 4:  # outliers first
                await pilot.press("s")
            await pilot.pause(0.5)
            saved.append(Path(app.save_screenshot(filename=f"{name}-group.svg", path=str(out))))
        await pilot.press("ctrl+q")
    return saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--out", default=str(ROOT / "screenshots"))
    args = ap.parse_args()
    prom = (
        subprocess.run(
            ["bash", str(ROOT / "tests/real_prometheus/setup_prometheus.sh")],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
        .split("=", 1)[1]
    )
    procs: list[subprocess.Popen[bytes]] = []

    def start(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        p = subprocess.Popen(argv, start_new_session=True, **kw)
        procs.append(p)
        return p

    fleet = fleetgen.make_fleet(args.instances, 1800, lead_s=90, seed=41)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            url = fleetgen.load_prometheus(start, prom, fleet, Path(tmp), free_port())
            time.sleep(max(0.0, fleet.end - 20 - time.time()))  # the faults as a user meets them
            out = Path(args.out)
            for size, drill in (((160, 48), True), ((80, 24), False)):
                for path in asyncio.run(shoot(url, size, out, fleet.faults["collapsed"], drill)):
                    print(path)
        finally:
            for p in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=10)


if __name__ == "__main__":
    main()
