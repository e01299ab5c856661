"""`mtpwatch screenshots [DIR]`: SVGs of the main views, filmed from the simulator.

Two simulators (MTP off / on, in-process threads on loopback) serve the app as in `mtpwatch demo`;
the start-up view launches a simulator subprocess through the demo's launcher. The numbers are real
simulator output (they vary slightly from run to run); the snapshot tests use fixed sample states.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from mtpwatch.commands.options import one_line
from mtpwatch.config import AppConfig, DisplaySettings, FleetSettings, MeasureSettings, ServerSpec

if TYPE_CHECKING:  # Textual loads inside the command
    from mtpwatch.ui.screens.monitor import MonitorScreen

LIMIT_S = 120.0
"""Longest wait for any one step (a generation at speed 1 takes ~15 s)."""


async def _wait(pilot: Any, predicate: Callable[[], bool], what: str, limit_s: float = LIMIT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not predicate():
        if loop.time() > deadline:
            raise click.ClickException(f"screenshots: timed out after {limit_s:.0f} s waiting for {what}")
        await pilot.pause(0.1)


def _save(app: Any, path: Path) -> Path:
    # xml:space="preserve": renderers that honour SVG whitespace rules (rsvg, Inkscape) would
    # otherwise drop the leading space of a text run ("62 %mean length").
    svg = app.export_screenshot(title="mtpwatch").replace("<svg ", '<svg xml:space="preserve" ', 1)
    path.write_text(svg, encoding="utf-8")
    return path


def _stop_quietly(sim: Any) -> None:
    """Stop a SimThread; a second stop (already closed loop) is a no-op."""
    with contextlib.suppress(RuntimeError):
        sim.__exit__(None, None, None)


def _monitor(app: Any) -> MonitorScreen:
    """The monitor screen the app shows (the default screen: no help or fleet over it)."""
    from mtpwatch.ui.screens.monitor import MonitorScreen

    screen = app.screen
    assert isinstance(screen, MonitorScreen)
    return screen


async def _prepare(pilot: Any) -> None:
    from textual.widgets import Input

    for widget in pilot.app.screen.query(Input):
        widget.cursor_blink = False
    await pilot.pause()


async def _settle(pilot: Any, panels: Any) -> None:
    await pilot.pause(1.2)  # panels draw feed views at 2 Hz
    for panel in panels:
        await panel.settle()
    await pilot.pause(0.3)


async def _prompt_and_settle(pilot: Any) -> None:
    """Select the 'this prompt' window, send the sample prompt, wait for answers and fresh scrapes."""
    from mtpwatch.ui.screens.monitor import SAMPLE_PROMPT

    screen = pilot.app.screen
    panels = screen.panels
    await _wait(
        pilot,
        lambda: all(
            p.view is not None and p.view.status == "up" and p.view.bandwidth.peak_gbps for p in panels
        ),
        "the simulators to answer",
    )
    while screen.window != "prompt":
        await pilot.press("f3")
    screen.send(SAMPLE_PROMPT)
    await _wait(pilot, lambda: not screen.generating and all(p.prompt_count for p in panels), "the answers")
    from mtpwatch.session.watch import ServerFeed  # lazy: loaded only when filming, as above

    feeds = [feed.watch for feed in screen.feeds if isinstance(feed, ServerFeed)]
    polls = [watch.collector.latest for watch in feeds]
    await _wait(
        pilot,
        lambda: all(w.collector.latest is not s for w, s in zip(feeds, polls, strict=True)),
        "the next scrapes",
    )
    await _settle(pilot, panels)


async def write_screenshots(
    out: Path,
    *,
    preset: str | None = None,
    speed: float = 1.0,
    max_tokens: int = 160,
    startup_delay: float = 6.0,
) -> list[Path]:
    """Film the simulator into `out/<view>.svg`, the views the README shows; returns the paths written.

    `startup_delay` is the simulated model-load time of the start-up view (filmed half-way).
    """
    # lazy: the simulator and Textual load only when filming
    from mtpwatch.sim.harness import SimThread
    from mtpwatch.sim.presets import DEFAULT_PRESET, get_preset

    name = get_preset(preset or DEFAULT_PRESET).name
    pace = "" if speed == 1 else f", {speed:g}× speed"
    title = f"mtpwatch demo ({name}, simulated{pace})"
    display = DisplaySettings(max_tokens=max_tokens, temperature=0.0)
    written: list[Path] = []
    recording = out / ".ab-session.mtpw.gz"
    with contextlib.ExitStack() as stack:
        url_a = stack.enter_context(SimThread(preset=name, spec=False, speed=speed))
        sim_b = SimThread(preset=name, spec=True, speed=speed)
        url_b = sim_b.__enter__()
        stack.callback(_stop_quietly, sim_b)
        written += await _film_ab(out, url_a, url_b, display, title, recording)
        written += await _film_single(out, sim_b, url_b, display, title)

    written.append(await _film_fleet(out / "fleet.svg", name, speed, display))
    written.append(await _film_replay(recording, out / "replay.svg"))
    recording.unlink(missing_ok=True)
    written.append(await _film_start(out / "start.svg", name, startup_delay))
    return written


async def _film_ab(
    out: Path, url_a: str, url_b: str, display: DisplaySettings, title: str, recording: Path
) -> list[Path]:
    """The A/B view after a prompt (recorded, for the replay view), after F6, and at 80×24."""
    from mtpwatch.ui.app import make_app

    written: list[Path] = []
    ab = AppConfig(
        servers=[ServerSpec(label="A · MTP off", url=url_a), ServerSpec(label="B · MTP on", url=url_b)],
        display=display,
        mode="ab",
        title=title,
        record=str(recording),
        schedule="alternate",
        measure=MeasureSettings(runs=6, warmup=1, max_tokens=48),
    )
    app = make_app(ab)
    async with app.run_test(size=(200, 50)) as pilot:
        await _prepare(pilot)
        await _prompt_and_settle(pilot)
        written.append(_save(app, out / "ab.svg"))
        monitor = _monitor(app)
        monitor.driver.stop_recording()  # the replay shows the prompt, not the F6 runs
        monitor.ab.start_measurement()  # F6: the last prompt, 6 runs per arm, first dropped
        await _wait(pilot, lambda: bool(monitor.ab.measurement_summaries), "measurement", limit_s=180)
        for panel in monitor.panels:
            await panel.settle()
        await pilot.pause(0.5)
        written.append(_save(app, out / "ab-measure.svg"))
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.5)
        written.append(_save(app, out / "compact.svg"))
        await app.shutdown_servers()
    return written


async def _film_single(out: Path, sim_b: Any, url_b: str, display: DisplaySettings, title: str) -> list[Path]:
    """The single-server monitor, at 80×24, the help screen, then the server gone."""
    from mtpwatch.ui.app import make_app

    written: list[Path] = []
    single = AppConfig(servers=[ServerSpec(label="MTP on", url=url_b)], display=display, title=title)
    app = make_app(single)
    async with app.run_test(size=(200, 50)) as pilot:
        await _prepare(pilot)
        await _prompt_and_settle(pilot)
        written.append(_save(app, out / "monitor.svg"))
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.5)
        written.append(_save(app, out / "compact-single.svg"))
        await pilot.resize_terminal(120, 40)
        await pilot.press("f1")
        await pilot.pause(0.5)
        written.append(_save(app, out / "help.svg"))
        await pilot.press("escape")
        await pilot.resize_terminal(120, 32)
        _stop_quietly(sim_b)  # the server goes away
        panel = _monitor(app).panels[0]
        await _wait(pilot, lambda: panel.view is not None and panel.view.status == "down", "disconnect")
        await pilot.pause(0.5)
        written.append(_save(app, out / "disconnected.svg"))
        await app.shutdown_servers()
    return written


async def _film_start(path: Path, preset: str, startup_delay: float) -> Path:
    """`mtpwatch start` half-way through a simulated model load: phases and facts, no /health yet."""
    from textual.widgets import Log

    from mtpwatch.commands.demo import demo_config
    from mtpwatch.ui.app import make_app

    # `mtpwatch demo --single`'s server, launched by the app as `mtpwatch start` launches vLLM
    app = make_app(AppConfig(servers=demo_config(preset, single=True, startup_delay=startup_delay).servers))
    async with app.run_test(size=(120, 32)) as pilot:
        await _prepare(pilot)
        log = _monitor(app).panels[0].query_one(".server-log", Log)
        await _wait(pilot, lambda: log.line_count >= 6, "start-up log lines", limit_s=60)
        await pilot.pause(startup_delay / 2)  # mid-load: phase and facts shown, /health not up yet
        written = _save(app, path)
        await app.shutdown_servers()
    return written


async def _film_fleet(path: Path, preset: str, speed: float, display: DisplaySettings) -> Path:
    """Six simulators with background traffic (the fifth with acceptance collapsed to 5 % of the
    preset's), plus a URL where nothing listens, in the fleet view once its window is full."""
    from mtpwatch.sim.harness import SimThread
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.screens.fleet import FleetScreen
    from mtpwatch.ui.widgets.fleet_table import FleetTable

    window = 10.0 if speed <= 1 else 3.0
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(
                SimThread(
                    preset=preset, speed=speed, load=2, seed=i, acceptance_scale=0.05 if i == 4 else 1.0
                )
            )
            for i in range(6)
        ]
        fleet = FleetSettings(urls=(*urls, "http://127.0.0.1:9"), window_s=window)
        config = AppConfig(servers=[], display=replace(display, scrape_interval_s=0.25), fleet=fleet)
        app = make_app(config)
        async with app.run_test(size=(180, 24)) as pilot:
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            table = screen.query_one(FleetTable)

            def full() -> bool:
                rows = [r for r in table.rows_shown if r.state == "up"]
                return len(rows) == 6 and all((r.window_s or 0) >= window - 0.5 for r in rows)

            await _wait(pilot, full, "six full windows")
            await pilot.pause(0.6)
            saved = _save(app, path)
            await pilot.press("ctrl+q")
    return saved


async def _film_replay(recording: Path, path: Path) -> Path:
    """The replay of `recording`, paused just after its first prompt's answers (no server runs)."""
    from mtpwatch.session.replay import ReplaySource
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.screens.replay import ReplayScreen

    source = ReplaySource.open(recording)
    done = [float(r["t"]) for r in source.recording.records if r["kind"] == "done"]
    app = make_app(source.config, replay=source)
    async with app.run_test(size=(200, 50)) as pilot:
        await _prepare(pilot)
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        await pilot.press("space")  # pause
        screen.seek_to((done[-1] if done else source.t_end) + 0.5)
        await _settle(pilot, screen.panels)
        return _save(app, path)


@click.command("screenshots")
@click.argument("directory", default="screenshots", type=click.Path(file_okay=False))
@click.option("--preset", help="Simulator preset (default: the demo's).")
@click.option(
    "--speed",
    type=click.FloatRange(0.5, 50.0),
    default=1.0,
    help="Simulator time factor; above 1 every rate on screen is that many times the real figure.",
)
@click.option("--max-tokens", type=click.IntRange(16, 4096), default=160, help="Sample answer length.")
def command(directory: str, preset: str | None, speed: float, max_tokens: int) -> None:
    """Film the simulator: SVG screenshots of the main views into DIRECTORY (default: screenshots/)."""
    from mtpwatch.sim.presets import UnknownPresetError, get_preset

    if preset is not None:
        with one_line(UnknownPresetError):
            get_preset(preset)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)  # save paths need the folder; done before the event loop
    for path in asyncio.run(write_screenshots(out, preset=preset, speed=speed, max_tokens=max_tokens)):
        click.echo(str(path))
