"""MtpWatchApp: the app shell (bindings, palette, breakpoints), `make_app` and `run_app`."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable
from os import _exit as exit_at_once  # os._exit: no cleanup (the servers are stopped already)
from typing import TYPE_CHECKING, Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.driver import Driver
from textual.reactive import reactive
from textual.screen import Screen

from mtpwatch.config import AppConfig
from mtpwatch.core.launch import process
from mtpwatch.ui.screens.keys import HELP, PAUSE, QUIT, QUIT_CTRL_C
from mtpwatch.ui.screens.monitor import NARROW_BELOW, MonitorScreen

try:  # Textual's private driver internals (ui/fastpaint/driver.py); without them, Textual's driver
    from mtpwatch.ui.fastpaint.driver import terminal_driver
except (ImportError, AttributeError):  # pragma: no cover - a Textual release without those names

    def terminal_driver(chosen: type[Driver]) -> type[Driver]:
        return chosen


if TYPE_CHECKING:  # the replay and the help load when used: a monitor's first frame waits for neither
    from mtpwatch.session.replay import ReplaySource


class MtpWatchApp(App[int]):
    """Live monitor for vLLM speculative-decoding servers, with a prompt console.

    `autostart=False` starts and polls no server (the panels wait for injected states); `replay`
    plays a recording instead (`mtpwatch replay`).
    """

    CSS_PATH = "mtpwatch.tcss"
    TITLE = "mtpwatch"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    # The keys of every screen; each screen binds its own (`MonitorScreen.BINDINGS`, `FleetScreen.BINDINGS`).
    BINDINGS = [
        HELP,
        PAUSE,
        Binding("f8", "screenshot", "Screenshot", show=False, id="screenshot"),
        QUIT,
        QUIT_CTRL_C,
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
        self.replay = replay
        self.config = config
        self.autostart = autostart
        self.clock = clock
        self.monitors_opened: list[MonitorScreen] = []
        """Every monitor screen mounted (`MonitorScreen.on_mount`), for `shutdown_servers`."""
        self.title = config.title
        if config.display.theme:
            self.theme = config.display.theme

    def get_driver_class(self) -> type[Driver]:
        """Textual's choice, with the Linux terminal's driver ending the app when its terminal
        goes away (`HangupDriver`; the web and headless drivers are left as they are)."""
        return terminal_driver(super().get_driver_class())

    def get_default_screen(self) -> Screen[Any]:
        config = self.config
        if config.fleet is not None:
            from mtpwatch.ui.screens.fleet import FleetScreen

            return FleetScreen(config, autostart=self.autostart, clock=self.clock)
        if self.replay is not None:
            from mtpwatch.ui.screens.replay import ReplayScreen

            return ReplayScreen(config, self.replay)
        return MonitorScreen(config, autostart=self.autostart, clock=self.clock)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help: what every number means", "Formulas and sources", self.action_help)
        yield SystemCommand(
            "Pause / resume display", "Freeze every panel; keep collecting", self.action_toggle_pause
        )
        if isinstance(screen, MonitorScreen):
            yield from screen.system_commands()

    def action_help(self) -> None:
        """The help of the screen showing (`help_text`: its numbers and its keys), over it."""
        from mtpwatch.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            text = getattr(self.screen, "help_text", None)
            if callable(text):
                self.push_screen(HelpScreen(text()))

    def action_toggle_pause(self) -> None:
        self.paused = not self.paused  # each monitor screen watches it

    def save_on_exit(self) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, MonitorScreen):
                screen.ab.save_unsaved()

    async def action_quit(self) -> None:
        self.save_on_exit()
        await self.shutdown_servers()
        self.exit(0)

    async def shutdown_servers(self) -> None:
        """Stop servers mtpwatch started (unless keep); safe to call twice. Also those of monitor
        screens already closed: Textual closes the screens before the app's Unmount (textual-serve's
        "quit" when the page closes), and servers left to `process.stop_all` at interpreter exit had
        their transports collected after the loop closed (`RuntimeError: Event loop is closed`)."""
        for screen in dict.fromkeys([*self.screen_stack, *self.monitors_opened]):
            if isinstance(screen, MonitorScreen):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(screen.stop_servers(), timeout=20)

    async def on_unmount(self) -> None:
        with contextlib.suppress(Exception):  # the screen may already be gone
            self.save_on_exit()
        await self.shutdown_servers()


make_app = MtpWatchApp
"""The app's factory, the name the CLI, tests and screenshots build it by."""


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
    for line in process.kept_lines():  # --keep: the terminal is restored, so this stays on it
        print(line)
    return 0 if result is None else int(result)
