"""MonitorScreen: one or two server panels, the A/B lines and the prompt console; its keys.

Its driver (`session/drivers`) stands behind the panels: live servers or a recording. Its parts,
one job each: `feeding.PanelFeeds` (each server's worker, the view tick), `console` (a prompt
streamed into the panes, ABBA or race), `ab_lines.ABLines` (the speed-up and lossless lines, F6's
measurement), `prompt_gate.PromptGate` (a prompt held until its arms are up). Panels only draw.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from textual import events, on, work
from textual.app import ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Footer, Input, Static
from textual.worker import Worker, WorkerState

from mtpwatch.config import AppConfig, MeasureSettings
from mtpwatch.session.demo_loop import DemoLoop, loop_prompts
from mtpwatch.session.drivers import Driver, LiveDriver
from mtpwatch.session.sources import Source
from mtpwatch.session.views import WINDOWS, ServerView
from mtpwatch.ui.fastpaint.frame import FrameScreen
from mtpwatch.ui.markup.ab import RESTART_WAITING
from mtpwatch.ui.markup.titles import render_title
from mtpwatch.ui.screens.ab_lines import ABLines
from mtpwatch.ui.screens.console import stream_prompt
from mtpwatch.ui.screens.feeding import PanelFeeds
from mtpwatch.ui.screens.keys import HELP, MONITOR_KEYS, PAUSE, QUIT, app_keys, monitor_help_text
from mtpwatch.ui.screens.prompt_gate import PromptGate
from mtpwatch.ui.widgets.packed_line import PackedLine
from mtpwatch.ui.widgets.prompt_input import PromptInput
from mtpwatch.ui.widgets.server_panel import ServerPanel

NARROW_BELOW = 120
"""Columns under which the app is narrow (its first horizontal breakpoint, `MtpWatchApp`)."""

SAMPLE_PROMPT = (
    "Explain in three short paragraphs how speculative decoding with a multi-token-prediction "
    "drafter speeds up generation."
)


class MonitorScreen(FrameScreen):
    """The main view: panels side by side (stacked when narrow), one console."""

    BINDINGS = [QUIT, HELP, PAUSE, *MONITOR_KEYS]  # `keys.MONITOR_KEYS` and `keys.QUIT` say why

    def __init__(
        self,
        config: AppConfig,
        *,
        autostart: bool,
        clock: Callable[[], float],
        driver: Driver | None = None,
        returns: bool = False,
    ) -> None:
        super().__init__()  # FrameScreen: on the RowCompositor while the fast paint is on
        self.returns = returns
        """Pushed over another screen (a fleet row's monitor): Escape with nothing to cancel stops
        this screen's servers and returns to it."""
        self.driver: Driver = driver or LiveDriver(config, clock=clock, schedule=config.schedule)
        """What stands behind the panels (`session.drivers`): live servers (a fleet row's: read from
        Prometheus), or a recording; it says when it cannot send, measure or seek."""
        self.loop = DemoLoop(loop_prompts(config.prefill or SAMPLE_PROMPT)) if config.loop else None
        """`demo --loop`: sends the built-in prompts in turn until quit."""
        self.sent_any = False
        self.measure_settings = config.measure or MeasureSettings()
        self.last_prompt: str | None = None
        self.config = config
        self.autostart = autostart
        self.clock = clock
        self.schedule = config.schedule
        self.window_index = 0
        self.prompt_index = 0
        self.opened = not autostart
        """The driver's sources are built (with autostart, just after the first frame)."""
        self.stopping = False
        """`stop_servers` ran: nothing starts any more."""
        self.generating = False
        self.feeding = PanelFeeds(self, float(config.display.max_fps))  # servers' workers, view tick
        self.gate = PromptGate(self)  # holds a console prompt until the arms it goes to are up
        self.ab = ABLines(self)  # the speed-up, lossless and measure lines, and F6

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # The app's breakpoint classes (HORIZONTAL_/VERTICAL_BREAKPOINTS) for the terminal's size, as
        # Textual sets them on a Resize: it does on the screen's first one, after a first frame drawn
        # side by side at 80×24.
        app = self.app
        for breakpoints, size in (
            (app.HORIZONTAL_BREAKPOINTS or [], app.size.width),
            (app.VERTICAL_BREAKPOINTS or [], app.size.height),
        ):
            reached = [name for at, name in breakpoints if size >= at]
            for _, name in breakpoints:
                self.set_class(bool(reached) and name == reached[-1], name)
        yield Static(id="title-bar")
        with Horizontal(id="panels", classes=f"-{self.config.mode} -n{len(self.config.servers)}"):
            for i, spec in enumerate(self.config.servers):
                yield ServerPanel(
                    ServerView(
                        label=spec.label, url=spec.url, status="starting" if spec.launch else "connecting"
                    ),
                    index=i,
                    starts_server=spec.launch is not None,
                    max_fps=self.config.display.max_fps,
                )
        if self.config.mode == "ab":
            yield PackedLine(id="speedup")
            yield Static(id="lossless")
            yield Static(id="measure")
        # The console in one docked container: Textual composes a widget on every frame whose
        # container overlaps what changed, so a streaming answer no longer composes these two.
        with Vertical(id="console"):
            yield PromptInput(
                value=self.config.prefill, placeholder="type a prompt, Enter sends it", id="prompt"
            )
            narrow = self.app.size.width < NARROW_BELOW
            yield Footer(compact=narrow, show_command_palette=not narrow)

    def on_mount(self) -> None:
        getattr(self.app, "monitors_opened", []).append(self)  # its servers stop at the app's exit
        if hasattr(self.app, "paused"):
            self.watch(self.app, "paused", self._paused_changed, init=False)
        self.update_title()
        if self.config.mode == "ab":
            self.ab.show_waiting()
        self.query_one(PromptInput).focus()
        if self.autostart:
            self.gate.check()  # the first frame says which arms a prompt would wait for: all
            # After the first frame: opening builds the sources (importing the HTTP client and the
            # server watch) and starting spawns the servers; the first frame waits for neither.
            self.call_after_refresh(self.open_driver)

    def open_driver(self) -> None:
        """Build the sources, then start the servers (or, in restart mode, the measurement); not once
        the screen has stopped its servers (a quit before this ran must not start one)."""
        if self.stopping:
            return
        error = self.driver.open()
        self.opened = True
        if error:
            self.notify(error, severity="error", timeout=10)
        if self.restart_mode:
            for panel in self.panels:
                panel.show_startup(RESTART_WAITING, [])
            if self.measure_settings.prompts:
                self.ab.start_measurement(list(self.measure_settings.prompts))
        else:  # every server's worker: launch it if its spec says so, then poll it
            for index in range(len(self.feeds)):
                self.run_worker(self.feeding.run_server(index), group="servers", exit_on_error=False)
        if self.loop is not None:
            self.set_interval(1.0, self._loop_tick, name="demo-loop")
        self.gate.check()

    def on_resize(self, event: events.Resize) -> None:
        # Narrow (the app's -narrow breakpoint): the footer drops the padding around its keys, so
        # every label fits in 80 columns (F6's was cut), the palette hint last.
        narrow = event.size.width < NARROW_BELOW
        for footer in self.query(Footer):
            footer.compact = narrow
            footer.show_command_palette = not narrow  # Ctrl+P stays; its hint cut F6's label
        self.update_title()

    def _loop_tick(self) -> None:
        """`--loop`: send the next built-in prompt once every server is up and idle long enough."""
        assert self.loop is not None  # the interval runs only with --loop
        ready = bool(self.feeds) and all(feed.state().status == "up" for feed in self.feeds)
        prompt = self.loop.due(self.clock(), busy=self.generating or self.ab.measuring, ready=ready)
        if prompt is not None:
            self.action_clear_answers()  # a booth runs for hours: the panes hold one answer each
            self.send(prompt)

    @property
    def feeds(self) -> list[Source]:
        """One source per server panel (`session.sources.Source`), in config order: the driver's."""
        return self.driver.sources

    @property
    def panels(self) -> list[ServerPanel]:
        """The server panels, in config order."""
        return list(self.query(ServerPanel))

    def is_paused(self) -> bool:
        return bool(getattr(self.app, "paused", False))

    @property
    def window(self) -> str:
        """The acceptance window shown: '10 s', '60 s' or 'prompt'."""
        return WINDOWS[self.window_index]

    def title_width(self) -> int | None:
        """The title bar's cells: the terminal's, less its padding (None before there is one)."""
        return max(self.app.size.width - 2, 1) if self.app.size.width else None

    def update_title(self) -> None:
        title = render_title(
            self.window,
            title=self.config.title,
            schedule=self.schedule if self.config.mode == "ab" else None,
            paused=self.is_paused(),
            demo_sent=self.loop.sent if self.loop is not None else None,
            suggest=bool(self.config.prefill) and not self.sent_any,
            width=self.title_width(),
            waiting=self.gate.waiting(),
            queued=self.gate.pending is not None,
        )
        self.query_one("#title-bar", Static).update(Content.from_markup(title))

    # -- servers and views (`feeding.PanelFeeds`) --------------------------------------------

    @property
    def restart_mode(self) -> bool:
        """One server at a time: the bench engine starts and stops them (A, B, A sessions)."""
        return self.config.mode == "ab" and self.measure_settings.restart

    async def stop_servers(self) -> None:
        """Stop owned server processes (unless `keep`) and close clients."""
        self.stopping = True
        await self.driver.stop()

    # -- console -------------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    def submit(self, event: Input.Submitted) -> None:
        prompt = event.value.strip()
        if not prompt:
            return
        if self.generating or self.ab.measuring or self.gate.pending is not None:
            self.notify("A generation is running or waiting; Escape cancels it.", severity="warning")
            return
        prompt_input = self.query_one(PromptInput)
        prompt_input.remember(prompt)
        prompt_input.value = ""
        self.gate.offer(prompt)

    def send(self, prompt: str) -> None:
        """Send `prompt` to every server (the worker does the rest), unless the driver cannot."""
        why = self.driver.cannot("send")
        if why:
            self.notify(why, severity="warning")
            return
        self.last_prompt = prompt
        if not self.sent_any or self.loop is not None:
            self.sent_any = True
            self.update_title()
        if self.restart_mode:  # one server at a time: a prompt runs as a measurement (of `last_prompt`)
            self.ab.start_measurement()
            return
        self.generating = True
        self.generate(prompt)

    def cancel_generation(self) -> bool:
        """Cancel the running generation or measurement; True if one was running."""
        if self.gate.cancel():
            return True
        group = "measure" if self.ab.measuring else "generate" if self.generating else None
        if group is not None:
            self.workers.cancel_group(self, group)
        return group is not None

    @work(exclusive=True, group="generate", exit_on_error=False)
    async def generate(self, prompt: str) -> None:
        """Stream `prompt` to each server: A then B, the second prompt B first (ABBA across prompts),
        or all at once in a race (the order they begin in)."""
        race = self.schedule == "race"
        order = list(range(len(self.feeds)))
        if not race and self.prompt_index % 2 == 1:
            order.reverse()
        self.prompt_index += 1
        try:
            answers = await stream_prompt(prompt, self.panels, self.feeds, order, race=race)
        finally:
            self.generating = False
        if self.config.mode == "ab" and len(answers) == 2:
            self.ab.show_comparison(answers[0], answers[1])

    # -- keys ----------------------------------------------------------------------------------

    def help_text(self) -> str:
        """The help (`MtpWatchApp.action_help`): every number, this screen's keys and the player's."""
        return monitor_help_text([*MonitorScreen.BINDINGS, *app_keys(self.app)])

    def system_commands(self) -> Iterable[SystemCommand]:
        """This screen's commands in the palette (after the app's help and pause)."""
        yield SystemCommand("Cycle acceptance window", "10 s → 60 s → this prompt", self.action_cycle_window)
        yield SystemCommand("Send sample prompt", "One prompt to every server", self.action_sample_prompt)
        yield SystemCommand("Cancel generation", "Stop the running prompt", self.action_cancel)
        yield SystemCommand(
            "Measure (A/B)",
            "Run the last prompt N times per arm: paired speed-up with CI",
            self.action_measure,
        )
        yield SystemCommand("Clear answers", "Empty the answer panes", self.action_clear_answers)

    def _paused_changed(self, paused: bool) -> None:
        """The app's pause (F2): the title says so; on resume the numbers jump to what was collected."""
        self.set_class(paused, "-paused")
        self.update_title()
        if not paused:
            self.feeding.views_due(now=True)

    def action_cycle_window(self) -> None:
        self.window_index = (self.window_index + 1) % len(WINDOWS)
        self.update_title()
        self.feeding.views_due(now=True)

    def action_measure(self) -> None:
        self.ab.start_measurement()

    def action_save_results(self) -> None:
        self.ab.save_and_say()

    def action_sample_prompt(self) -> None:
        if self.generating or self.ab.measuring:
            self.notify("A generation is running; Escape cancels it.", severity="warning")
            return
        self.send(SAMPLE_PROMPT)

    def action_clear_answers(self) -> None:
        for panel in self.panels:
            panel.stream.reset()

    def action_scroll_answers(self, direction: int) -> None:
        """Page the answer panes back (-1) or forward (+1); the end follows new text again."""
        for panel in self.panels:
            panel.stream.page(direction)

    async def action_cancel(self) -> None:
        """Escape: cancel what runs; else, in a fleet row's monitor, stop it and return to the fleet."""
        if self.cancel_generation():
            return
        if self.returns:
            await self.stop_servers()
            if self.app.screen is self:
                self.app.pop_screen()
            return
        self.notify("Nothing to cancel.", timeout=1.5)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A generation that failed with an unexpected error says so in one line (and in a recording)."""
        if event.state != WorkerState.ERROR or event.worker.group != "generate":
            return
        error = event.worker.error
        reason = (str(error).splitlines() or [""])[0] or type(error).__name__
        self.notify(f"Error: the generation stopped: {reason}", severity="error", timeout=8)
        if self.driver.recorder is not None:
            self.driver.recorder.mark(self.clock(), "error", reason=reason)
