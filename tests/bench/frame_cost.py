"""What one frame costs, headless: the monitor against the floor app.

    .venv/bin/python tests/bench/frame_cost.py [--size 160x48] [--frames 300]

The real app (the snapshot tests' sample state, no server) and floor_app.py run under
`App.run_test`; each frame feeds one burst of ~2.5 tokens to the answer pane and, every 7th frame (15
frames a second, views at 2 Hz), shows the panel's view again with other numbers; Textual's own
update timer then composes the frame. Only Textual's frame is timed (CPU time), so the figures
are per frame, and what a frame renders does not depend on the machine's load.

- ms_per_frame: CPU time of Textual's frames (composing, relayouts), per step;
- lines_per_frame: lines rendered by `Widget.render_lines`, all widgets, per frame;
- widgets_per_frame: widgets asked to render, per frame; `by_widget` says which;
- bytes_per_frame: what the frame writes to the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from textual.app import App
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

BURST = "memory bandwidth bounds "


def _name(widget: Widget) -> str:
    classes = ".".join(sorted(widget.classes))
    return type(widget).__name__ + (f"#{widget.id}" if widget.id else "") + (f".{classes}" if classes else "")


class FrameMeter:
    """While installed (a context manager): Textual's frames (`Screen._compositor_refresh`: the dirty
    regions composed and written; `Screen._refresh_layout`: a relayout) timed in CPU time, the lines
    `Widget.render_lines` renders inside it counted per widget, and the terminal bytes of the update
    (headless, the app's `_display` would drop them) counted."""

    def __init__(self, app: App[Any]) -> None:
        self.app = app
        self.lines: collections.Counter[str] = collections.Counter()
        self.calls: collections.Counter[str] = collections.Counter()
        self.times: list[float] = []
        self.bytes = 0
        self._render_lines = Widget.render_lines
        self._refresh = Screen._compositor_refresh
        self._layout = Screen._refresh_layout

    def __enter__(self) -> FrameMeter:
        render_lines, meter = self._render_lines, self

        def counted(self: Widget, crop: Region) -> list[Strip]:  # `self`: it stands in for the method
            meter.lines[_name(self)] += crop.height
            meter.calls[_name(self)] += 1
            return render_lines(self, crop)

        def timed(method: Any) -> Any:
            def run(screen: Screen[Any], *args: Any, **kwargs: Any) -> Any:
                t0 = time.process_time()
                try:
                    return method(screen, *args, **kwargs)
                finally:
                    meter.times.append(time.process_time() - t0)

            return run

        def display(screen: Any, renderable: Any) -> None:
            if renderable is not None:
                meter.bytes += len(renderable.render_segments(meter.app.console).encode())

        Widget.render_lines = counted  # type: ignore[method-assign]
        Screen._compositor_refresh = timed(self._refresh)  # type: ignore[method-assign]
        Screen._refresh_layout = timed(self._layout)  # type: ignore[method-assign]
        self.app._display = display  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Widget.render_lines = self._render_lines  # type: ignore[method-assign]
        Screen._compositor_refresh = self._refresh  # type: ignore[method-assign]
        Screen._refresh_layout = self._layout  # type: ignore[method-assign]
        del self.app._display


async def _measure(app: App[Any], size: tuple[int, int], steps: int, step: Any) -> dict[str, Any]:
    async with app.run_test(size=size) as pilot:
        await step(pilot, -1)
        await pilot.pause(0.3)
        with FrameMeter(app) as meter:
            for i in range(steps):
                await step(pilot, i)
                await pilot.pause(1 / 30)  # the screen's update timer composes the frame
    return {
        "ms_per_frame": round(1000 * sum(meter.times) / steps, 3),
        "lines_per_frame": round(sum(meter.lines.values()) / steps, 1),
        "widgets_per_frame": round(sum(meter.calls.values()) / steps, 2),
        "bytes_per_frame": round(meter.bytes / steps),
        "by_widget": {k: round(v / steps, 1) for k, v in meter.lines.most_common()},
    }


async def measure_app(size: tuple[int, int], frames: int) -> dict[str, Any]:
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.widgets.server_panel import ServerPanel
    from tests.ui import samples

    app = make_app(samples.config("single"), autostart=False)
    base = samples.view_mtp()

    async def step(pilot: Any, i: int) -> None:
        panel = app.screen.query_one(ServerPanel)
        if i < 0:
            await samples.load(app, "single")
            panel.begin_answer("Write a very long essay about memory bandwidth.")
            return
        panel.stream.feed(BURST)
        panel.stream.flush(final=False)  # what the pane's painter does
        if i % 7 == 0:  # 15 frames a second, views at 2 Hz
            tok_s = (base.server_tok_s or 40.0) + (i % 13) / 10
            panel.show(dataclasses.replace(base, server_tok_s=tok_s, kv_cache_usage=(i % 50) / 100))

    return await _measure(app, size, frames, step)


async def measure_floor(size: tuple[int, int], frames: int) -> dict[str, Any]:
    from floor_app import FloorApp

    app = FloorApp("lines", idle=True)

    async def step(pilot: Any, i: int) -> None:
        if i < 0:
            return
        app.grow()
        if i % 7 == 0:
            app.update_rows()

    return await _measure(app, size, frames, step)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="160x48")
    p.add_argument("--frames", type=int, default=300)
    args = p.parse_args()
    cols, rows = (int(x) for x in args.size.split("x"))
    out = {
        "size": args.size,
        "app": asyncio.run(measure_app((cols, rows), args.frames)),
        "floor": asyncio.run(measure_floor((cols, rows), args.frames)),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
