"""MtpWatchApp: the app shell (bindings, palette, breakpoints), `make_app` and `run_app`."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable
from os import _exit as exit_at_once  # os._exit: no cleanup (the servers are stopped already)
from typing import TYPE_CHECKING

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.driver import Driver
from textual.reactive import reactive
from textual.screen import Screen

from mtpwatch.config import AppConfig
from mtpwatch.core.launch import process
from mtpwatch.ui.screens.monitor import NARROW_BELOW, SAMPLE_PROMPT, MonitorScreen

try:  # Textual's private driver internals (ui/fastpaint/driver.py); without them, Textual's driver
    from mtpwatch.ui.fastpaint.driver import terminal_driver
except (ImportError, AttributeError):  # pragma: no cover - a Textual release without those names

    def terminal_driver(chosen: type[Driver]) -> type[Driver]:
        return chosen


if TYPE_CHECKING:  # the replay and the help load when used: a monitor's first frame waits for neither
    from mtpwatch.session.replay import ReplaySource

_MONITOR_ACTIONS = frozenset(
    {"sample_prompt", "clear_answers", "measure", "cancel", "scroll_answers", "cycle_window"}
)
"""App actions that act on a monitor screen (disabled while the fleet table shows)."""


class MtpWatchApp(App[int]):
    """Live monitor for vLLM speculative-decoding servers, with a prompt console."""

    CSS_PATH = "mtpwatch.tcss"
    TITLE = "mtpwatch"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    # Function keys: the prompt Input has focus and swallows printable keys.
    BINDINGS = [
        Binding(
            "question_mark,f1",
            "help",
            "Help",
            key_display="?/F1",
            tooltip="What every number means (? with an empty prompt, or F1).",
            id="help",
        ),
        Binding(
            "f2", "toggle_pause", "Pause", tooltip="Freeze the display; collection continues.", id="pause"
        ),
        Binding(
            "f3", "cycle_window", "Window", tooltip="Acceptance window: 10 s, 60 s, this prompt.", id="window"
        ),
        Binding(
            "f4", "sample_prompt", "Sample", tooltip="Send a sample prompt to every server.", id="sample"
        ),
        Binding("f5", "clear_answers", "Clear", tooltip="Clear the answer panes.", id="clear"),
        Binding(
            "f6",
            "measure",
            "Measure",
            tooltip="A/B: run the last prompt N times per arm (paired runs, median speed-up, 95 % CI).",
            id="measure",
        ),
        Binding("escape", "cancel", "Cancel", tooltip="Cancel the running generation.", id="cancel"),
        Binding(
            "ctrl+s",
            "save_results",
            "Save",
            show=False,
            tooltip="Save the last F6 measurement as a bench report (JSON).",
            id="save",
        ),
        Binding("pageup", "scroll_answers(-1)", "Scroll back", show=False, id="answers-page-up"),
        Binding("pagedown", "scroll_answers(1)", "Scroll forward", show=False, id="answers-page-down"),
        Binding("f8", "screenshot", "Screenshot", show=False, id="screenshot"),
        Binding(
            "ctrl+q",
            "quit",
            "Quit",
            tooltip="Quit; stops servers mtpwatch started.",
            id="quit",
            priority=True,
        ),
        # Ctrl+C quits too, on every screen: what a terminal user reaches for first. Priority, so
        # the prompt Input's and the Screen's Ctrl+C (copy selected text) do not swallow it; Textual
        # keeps super+c for copying, and the terminal's own selection copies with the mouse.
        Binding(
            "ctrl+c",
            "quit",
            "Quit",
            show=False,
            tooltip="Quit, as Ctrl+Q does; stops servers mtpwatch started.",
            id="quit-ctrl-c",
            priority=True,
        ),
    ]

    paused: reactive[bool] = reactive(False)
    """Display frozen (collection continues)."""

    def __init__(
        self,
        config: AppConfig,
        *,
        autostart: bool = True,
        clock: Callable[[], float] = time.monotonic,
        replay: ReplaySource | None = None,
    ) -> None:
        super().__init__()
        self.speed = config.speed
        self.loop = config.loop
        self.replay = replay
        self.measure = config.measure
        self.config = config
        self.autostart = autostart
        self.clock = clock
        self.schedule = config.schedule
        self.prefill = config.prefill
        self.monitors_opened: list[MonitorScreen] = []
        """Every monitor screen mounted (`MonitorScreen.on_mount`), for `shutdown_servers`."""
        self.title = config.title
        if config.display.theme:
            self.theme = config.display.theme

    def get_driver_class(self) -> type[Driver]:
        """Textual's choice, with the Linux terminal's driver ending the app when its terminal
        goes away (`HangupDriver`; the web and headless drivers are left as they are)."""
        return terminal_driver(super().get_driver_class())

    def get_default_screen(self) -> Screen[object]:
        if self.config.fleet is not None:
            from mtpwatch.ui.screens.fleet import FleetScreen

            fleet = FleetScreen(self.config, autostart=self.autostart, clock=self.clock)
            return fleet  # type: ignore[return-value]
        if self.replay is not None:
            from mtpwatch.ui.screens.replay import ReplayScreen

            replay = ReplayScreen(self.config, self.replay, loop=self.loop, speed=self.speed)
            return replay  # type: ignore[return-value]
        screen = MonitorScreen(
            self.config,
            autostart=self.autostart,
            clock=self.clock,
            schedule=self.schedule,
            prefill=self.prefill,
            measure=self.measure,
            loop=self.loop,
        )
        return screen  # type: ignore[return-value]

    @property
    def monitor(self) -> MonitorScreen:
        """The monitor screen: the default screen, or the one a fleet row opened (even while help is open)."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, MonitorScreen):
                return screen
        raise LookupError("no monitor screen is open")

    def _fleet_on_top(self) -> bool:
        """The fleet view is showing (no row's monitor opened over it)."""
        return not any(isinstance(s, MonitorScreen) for s in self.screen_stack)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The prompt console's keys mean nothing in the fleet table: hide and disable them there.
        return not (action in _MONITOR_ACTIONS and self.config.fleet is not None and self._fleet_on_top())

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help: what every number means", "Formulas and sources", self.action_help)
        yield SystemCommand(
            "Pause / resume display", "Freeze every panel; keep collecting", self.action_toggle_pause
        )
        yield SystemCommand("Cycle acceptance window", "10 s → 60 s → this prompt", self.action_cycle_window)
        yield SystemCommand("Send sample prompt", "One prompt to every server", self.action_sample_prompt)
        yield SystemCommand("Cancel generation", "Stop the running prompt", self.action_cancel)
        yield SystemCommand(
            "Measure (A/B)",
            "Run the last prompt N times per arm: paired speed-up with CI",
            self.action_measure,
        )
        yield SystemCommand("Clear answers", "Empty the answer panes", self.action_clear_answers)

    def action_help(self) -> None:
        from mtpwatch.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            if self.config.fleet is not None:
                from mtpwatch.ui.screens.fleet import FleetScreen, fleet_help

                cost = self.screen.cost_words() if isinstance(self.screen, FleetScreen) else ""
                self.push_screen(HelpScreen(fleet_help(self.config.fleet, cost)))
            else:
                self.push_screen(HelpScreen())

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused

    def watch_paused(self, paused: bool) -> None:
        with contextlib.suppress(Exception):
            self.monitor.set_class(paused, "-paused")
            self.monitor.update_title()
            if not paused:  # catch up at once: the numbers jump to what was collected meanwhile
                self.monitor.views_due(now=True)

    def action_cycle_window(self) -> None:
        self.monitor.cycle_window()

    def action_measure(self) -> None:
        self.monitor.start_measurement()

    def action_sample_prompt(self) -> None:
        if self.monitor.generating or self.monitor.measuring:
            self.notify("A generation is running; Escape cancels it.", severity="warning")
            return
        self.monitor.send(SAMPLE_PROMPT)

    def action_clear_answers(self) -> None:
        self.monitor.clear_answers()

    def action_scroll_answers(self, direction: int) -> None:
        """Page the answer panes back (-1) or forward (+1); the end follows new text again."""
        for panel in self.monitor.panels:
            panel.stream.page(direction)

    async def action_cancel(self) -> None:
        if self.monitor.cancel_generation():
            return
        if self.config.fleet is not None:  # a row's monitor: Escape returns to the fleet
            monitor = self.monitor
            await monitor.stop_servers()
            if self.screen is monitor:
                self.pop_screen()
            return
        self.notify("Nothing to cancel.", timeout=1.5)

    def action_save_results(self) -> None:
        """Ctrl+S: write the last measurement where --save says, else mtpwatch-ab-<time>.json."""
        try:
            path = self.monitor.save_results()
        except LookupError as exc:
            self.notify(str(exc), severity="warning")
        except OSError as exc:
            self.notify(f"cannot save: {exc.strerror or exc}", severity="error")
        else:
            self.notify(f"saved the measurement to {path}")

    def save_on_exit(self) -> None:
        """With --save FILE, an unsaved measurement is written when the app exits."""
        if self.measure is None or not self.measure.save_path:
            return
        try:
            monitor = self.monitor
        except LookupError:  # the fleet view: no measurement to save
            return
        if monitor.last_report is not None and monitor.saved_to is None:
            with contextlib.suppress(OSError):
                monitor.save_results()

    async def action_quit(self) -> None:
        self.save_on_exit()
        await self.shutdown_servers()
        self.exit(0)

    async def shutdown_servers(self) -> None:
        """Stop servers mtpwatch started (unless keep); safe to call twice.

        Also those of monitor screens already closed: Textual closes the screens before the app's
        Unmount, where a stop that looked at the screen stack alone found none (textual-serve's
        "quit" when the page closes), and the simulators were killed by `process.stop_all` at
        interpreter exit, their transports collected after the loop closed (`RuntimeError: Event
        loop is closed`)."""
        for screen in dict.fromkeys([*self.screen_stack, *self.monitors_opened]):
            if isinstance(screen, MonitorScreen):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(screen.stop_servers(), timeout=20)

    async def on_unmount(self) -> None:
        with contextlib.suppress(Exception):  # the screen may already be gone
            self.save_on_exit()
        await self.shutdown_servers()


def make_app(
    config: AppConfig,
    *,
    autostart: bool = True,
    clock: Callable[[], float] = time.monotonic,
    replay: ReplaySource | None = None,
) -> MtpWatchApp:
    """Build the app (CLI, tests and screenshots share this factory).

    Args:
        config: servers, display settings, the A/B schedule, measurements, prefill, loop, speed.
        autostart: start/poll servers; False leaves panels empty for injected states.
        clock: monotonic clock for every time the app measures.
        replay: play this recording instead of watching servers (`mtpwatch replay`).
    """
    return MtpWatchApp(config, autostart=autostart, clock=clock, replay=replay)


EXIT_GRACE_S = 20.0
"""Seconds a signalled app has to exit by itself before `run_app` ends the process."""


def run_app(config: AppConfig, *, replay: ReplaySource | None = None) -> int:
    """Run the app in the terminal; returns the exit status. Owned servers stop on any exit path."""
    app = make_app(config, replay=replay)
    timers: list[threading.Timer] = []

    def install_handlers() -> None:
        loop = asyncio.get_running_loop()

        # core.launch.process stops the servers first; then the app leaves cleanly (terminal restored).
        def on_signal(signum: int) -> None:
            loop.call_soon_threadsafe(app.exit, 128 + signum)
            # A last resort, should anything ever block the loop (the exit then never runs): the
            # servers are stopped already (the chained handler), so end the process after a grace.
            timer = threading.Timer(EXIT_GRACE_S, exit_at_once, args=(128 + signum,))
            timer.daemon = True
            timer.start()
            timers.append(timer)

        # SIGINT too: in the raw terminal Ctrl-C is a key, so a SIGINT comes from `kill -INT` or a
        # supervisor, and Python's KeyboardInterrupt would tear the event loop down mid-flight.
        process.install_signal_handlers(on_signal, signals=(signal.SIGTERM, signal.SIGHUP, signal.SIGINT))

    app.call_later(install_handlers)
    result = app.run()
    for timer in timers:  # the app has exited: what follows (stopping servers, a report) has its time
        timer.cancel()
    process.stop_all()
    return 0 if result is None else int(result)
