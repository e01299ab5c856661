"""MonitorScreen: one or two server panels, the A/B speed-up line and the prompt console.

The screen owns the workers: one per server (start it if asked, then poll it) and one for
the console's generation (alternate ABBA or race across servers). Panels only draw.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from textual import events, on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.timer import Timer
from textual.widgets import Footer, Input, Static
from textual.worker import Worker, WorkerState

from mtpwatch.config import AppConfig, MeasureSettings, Schedule
from mtpwatch.core.ab.plan import BenchConfigError
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.session import results
from mtpwatch.session.answers import Answer
from mtpwatch.session.demo_loop import DemoLoop, loop_prompts
from mtpwatch.session.drivers import Driver, LiveDriver
from mtpwatch.session.measure import FeedArm, Measurement, MeasureUpdate, measurement_prompt
from mtpwatch.session.sources import Source
from mtpwatch.session.speedups import SpeedupSeries
from mtpwatch.session.view_pacing import VIEW_HZ, ViewPacer
from mtpwatch.session.views import WINDOWS, ServerView, StartupView
from mtpwatch.ui.fastpaint.frame import FrameScreen
from mtpwatch.ui.markup.ab import (
    LOSSLESS_NEEDS_T0,
    LOSSLESS_WAITING,
    PAIRS_WAITING,
    RESTART_WAITING,
    advice_groups,
    render_lossless,
    render_measure,
    render_measure_hint,
    render_stopped,
    speedup_groups,
)
from mtpwatch.ui.markup.panel import render_startup
from mtpwatch.ui.markup.titles import render_title
from mtpwatch.ui.screens.keys import HELP, PAUSE, PLAYER_HELP, PLAYER_KEYS, QUIT, HelpRow, key_table
from mtpwatch.ui.screens.prompt_gate import PromptGate
from mtpwatch.ui.screens.sizing import size_classes, title_width
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

    # Function keys: the prompt Input has focus and swallows printable keys. Quit, Help and Pause are
    # the app's (every screen has them); listed first here, the footer shows them first, as it always has.
    BINDINGS = [
        QUIT,
        HELP,
        PAUSE,
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
    ]

    KEY_HELP: tuple[HelpRow, ...] = (
        (("send",), "send the prompt (to every server)"),
        (("history-previous", "history-next"), "prompt history"),
        (("cancel",), "cancel the running generation (the partial answer stays, marked cancelled)"),
        (
            ("answers-page-up", "answers-page-down"),
            "scroll the answers back / forward (the end follows new text again)",
        ),
        (
            ("help",),
            "this help — `?` works while the prompt box is empty or holds the suggested prompt (F1 is taken"
            " by VS Code Remote terminals); Esc closes it",
        ),
        (("pause",), "pause the display (collection continues; numbers jump on resume)"),
        (("window",), "cycle the acceptance window"),
        (("sample",), "send a sample prompt"),
        (("clear",), "clear the answers"),
        (("measure",), "A/B: measure the last prompt, N paired runs per arm (median speed-up, 95 % CI)"),
        (("save",), "save the last F6 measurement as a bench report (JSON; `--save FILE` names it)"),
        (("screenshot",), "save a screenshot of the screen (SVG)"),
        (("palette",), "command palette"),
        (("quit", "quit-ctrl-c"), "quit (stops servers mtpwatch started), on every screen"),
    )
    """The help's key table (`keys.key_table`: the keys come from the bindings these ids name)."""

    def __init__(
        self,
        config: AppConfig,
        *,
        autostart: bool,
        clock: Callable[[], float],
        schedule: Schedule = "alternate",
        prefill: str = "",
        measure: MeasureSettings | None = None,
        driver: Driver | None = None,
        loop: bool = False,
        returns: bool = False,
    ) -> None:
        super().__init__()  # FrameScreen: on the RowCompositor while the fast paint is on
        self.returns = returns
        """Pushed over another screen (a fleet row's monitor): Escape with nothing to cancel stops
        this screen's servers and returns to it."""
        self.driver: Driver = driver or LiveDriver(config, clock=clock, schedule=schedule)
        """What stands behind the panels (`session.drivers`): live servers (a fleet row's: read from
        Prometheus), or a recording; it says when it cannot send, measure or seek."""
        self.loop = DemoLoop(loop_prompts(prefill or SAMPLE_PROMPT)) if loop else None
        """`demo --loop`: sends the built-in prompts in turn until quit."""
        self.sent_any = False
        self.measure_settings = measure or MeasureSettings()
        self.measuring = False
        self.last_prompt: str | None = None
        self.measurement_summaries: list[str] = []
        """One line per finished (or cancelled) measurement."""
        self.last_report: BenchReport | None = None
        """The last measurement's report (what Ctrl+S saves)."""
        self.saved_to: Path | None = None
        """Where `last_report` was saved; None while it is unsaved."""
        self._pollers: dict[int, Worker[None]] = {}
        self.config = config
        self.autostart = autostart
        self.clock = clock
        self.schedule = schedule
        self.prefill = prefill
        self.window_index = 0
        self.speedups = SpeedupSeries()
        """The A/B speed-ups of the console's prompts (`session.speedups`)."""
        self.prompt_index = 0
        self.generating = False
        self._pacer = ViewPacer(min(VIEW_HZ, float(config.display.max_fps)))
        """Panels whose feed changed since their last view, and when each may get its next one."""
        self._views_timer: Timer | None = None
        self.gate = PromptGate(self)  # holds a console prompt until the arms it goes to are up

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        size_classes(self, self.app.size.width, self.app.size.height)  # before the first paint
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
            yield PromptInput(value=self.prefill, placeholder="type a prompt, Enter sends it", id="prompt")
            narrow = self.app.size.width < NARROW_BELOW
            yield Footer(compact=narrow, show_command_palette=not narrow)

    def on_mount(self) -> None:
        getattr(self.app, "monitors_opened", []).append(self)  # its servers stop at the app's exit
        if hasattr(self.app, "paused"):
            self.watch(self.app, "paused", self._paused_changed, init=False)
        self.update_title()
        if self.config.mode == "ab":
            waiting = speedup_groups(None, None, 0, race=self.schedule == "race")
            self.query_one("#speedup", PackedLine).show(waiting)
            self.query_one("#lossless", Static).update(Content.from_markup(LOSSLESS_WAITING))
            self.set_measure_line(self._measure_hint(), hint=True)
        self.query_one(PromptInput).focus()
        if self.autostart:
            error = self.driver.open()
            if error:
                self.notify(error, severity="error", timeout=10)
            for i in range(len(self.feeds)):
                if not self.restart_mode:
                    self.run_server(i)
            if self.restart_mode:
                for panel in self.panels:
                    panel.show_startup(RESTART_WAITING, [])
                if self.measure_settings.prompts:
                    self.start_measurement(list(self.measure_settings.prompts))
            if self.loop is not None:
                self.set_interval(1.0, self._loop_tick, name="demo-loop")
            self.gate.check()  # the first frame says which arms a prompt would wait for

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
        if self.loop is None:
            return
        ready = bool(self.feeds) and all(feed.status == "up" for feed in self.feeds)
        prompt = self.loop.due(self.clock(), busy=self.generating or self.measuring, ready=ready)
        if prompt is not None:
            self.clear_answers()  # a booth runs for hours: the panes hold one answer each
            self.send(prompt)

    @property
    def feeds(self) -> list[Source]:
        """One source per server panel (`session.sources.Source`), in config order: the driver's."""
        return self.driver.sources

    @property
    def panels(self) -> list[ServerPanel]:
        """The server panels, in config order."""
        return list(self.query(ServerPanel))

    def _is_paused(self) -> bool:
        return bool(getattr(self.app, "paused", False))

    @property
    def window(self) -> str:
        """The acceptance window shown: '10 s', '60 s' or 'prompt'."""
        return WINDOWS[self.window_index]

    def update_title(self) -> None:
        """Title bar: app title, mode, window, schedule, paused."""
        title = render_title(
            self.window,
            title=self.config.title,
            schedule=self.schedule if self.config.mode == "ab" else None,
            paused=self._is_paused(),
            demo_sent=self.loop.sent if self.loop is not None else None,
            suggest=bool(self.prefill) and not self.sent_any,
            width=title_width(self),
            waiting=self.gate.waiting(),
            queued=self.gate.pending is not None,
        )
        self.query_one("#title-bar", Static).update(Content.from_markup(title))

    # -- servers -------------------------------------------------------------------------------

    @work(group="servers", exit_on_error=False)
    async def run_server(self, index: int) -> None:
        """Start the server if its spec says so, then poll it forever."""
        feed = self.feeds[index]
        panel = self.panels[index]
        if feed.spec.launch is not None:
            ok = await feed.launch(_startup_to(panel))
            if not ok:
                self.views_due(index, now=True)
                panel.show_startup_pane()
                self.gate.check()
                return
            panel.show_monitor()
        await self._poll_forever(feed, panel)

    async def _poll_forever(self, feed: Source, panel: ServerPanel) -> None:
        """Scrape, sample the GPU only while the roofline panel shows; the view tick draws the result."""
        index = self.feeds.index(feed)
        while True:
            delay = await feed.poll()
            if panel.bandwidth_visible:
                feed.start_hardware()
            else:
                feed.stop_hardware()
            shown = panel.view
            self.views_due(index, now=shown is None or shown.status != feed.status)  # up → down: at once
            self.gate.check()
            await feed.rest(delay)

    # -- views ---------------------------------------------------------------------------------

    def views_due(self, index: int | None = None, *, now: bool = False) -> None:
        """Feed `index` (None: every feed) changed: its panel gets a fresh view as soon as `ViewPacer`
        allows (at once when its last view is a view period old: a scrape is drawn as it lands)."""
        self._pacer.mark(range(len(self.feeds)) if index is None else (index,))
        self.tick_views(force=now)

    def tick_views(self, *, force: bool = False) -> None:
        """The one way into a panel: build the views of the due feeds whose panels' last view is a
        view period old (all with `force`) over the shown window at the screen's clock (live:
        monotonic; replay: the recording's), shown in one update; a timer takes the others when they
        come of age. Not while paused (collection goes on; the first view after shows the newest)."""
        if self._is_paused():
            return
        wall = time.monotonic()
        ready = self._pacer.take(wall, force=force)
        if ready:
            panels = self.panels
            with self.app.batch_update():
                for index in ready:
                    if index < len(self.feeds) and index < len(panels):
                        panels[index].show(self.feeds[index].view(self.window))
        wait = self._pacer.next_in(wall)
        if wait is not None and self._views_timer is None:
            self._views_timer = self.set_timer(wait, self._views_timer_fired, name="views")

    def _views_timer_fired(self) -> None:
        self._views_timer = None
        self.tick_views()

    @property
    def restart_mode(self) -> bool:
        """One server at a time: the bench engine starts and stops them (A, B, A sessions)."""
        return self.config.mode == "ab" and self.measure_settings.restart

    @work(exit_on_error=False)
    async def poll_server(self, index: int) -> None:
        """Poll a server the restart schedule has started, until it is stopped."""
        feed, panel = self.feeds[index], self.panels[index]
        panel.show_monitor()
        await self._poll_forever(feed, panel)

    def _arm_up(self, index: int, up: bool) -> None:
        """Restart mode: a server came up (poll it) or is about to stop (stop polling)."""
        worker = self._pollers.pop(index, None)
        if worker is not None:
            worker.cancel()
        panel = self.panels[index]
        if up:
            self._pollers[index] = self.poll_server(index)
            self.set_measure_line(f"server {'AB'[index]} is up ({_label(self, index)}); the other is stopped")
        else:
            panel.show_startup(render_stopped("AB"[index]), [])
            panel.show_startup_pane()

    def stop_recording(self) -> None:
        """Close the `--record` file now (the session goes on unrecorded)."""
        self.driver.stop_recording()

    async def stop_servers(self) -> None:
        """Stop owned server processes (unless `keep`) and close clients."""
        await self.driver.stop()

    # -- console -------------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    def submit(self, event: Input.Submitted) -> None:
        prompt = event.value.strip()
        if not prompt:
            return
        if self.generating or self.measuring or self.gate.pending is not None:
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
        if self.restart_mode:  # one server at a time: a prompt runs as a measurement
            self.start_measurement(
                [
                    measurement_prompt(
                        prompt, self.measure_settings.max_tokens or self.config.display.max_tokens
                    )
                ]
            )
            return
        self.generating = True
        self.generate(prompt)

    def cancel_generation(self) -> bool:
        """Cancel the running generation or measurement; True if one was running."""
        if self.gate.cancel():
            return True
        if self.measuring:
            self.workers.cancel_group(self, "measure")
            return True
        if not self.generating:
            return False
        self.workers.cancel_group(self, "generate")
        return True

    # -- measurement ---------------------------------------------------------------------------

    def _measure_hint(self) -> str:
        s = self.measure_settings
        return render_measure_hint(s.runs, s.warmup, restart=self.restart_mode, race=self.schedule == "race")

    def set_measure_line(self, markup: str, *, hint: bool = False) -> None:
        """The progress line under the speed-up line (A/B mode); a mere hint hides on short screens."""
        if self.config.mode == "ab":
            line = self.query_one("#measure", Static)
            line.set_class(hint, "-hint")
            line.update(Content.from_markup(markup), layout=False)

    def start_measurement(self, prompts: list[Prompt] | None = None) -> bool:
        """Measure `prompts` (default: the last console prompt) with repeated paired runs."""
        why = self.driver.cannot("measure")
        if why:
            self.notify(why, severity="warning")
            return False
        if self.measuring or self.generating:
            self.notify("A generation is running; Escape cancels it.", severity="warning")
            return False
        if prompts is None:
            text = self.last_prompt or self.query_one(PromptInput).value.strip()
            if not text:
                self.notify("Send a prompt first; F6 measures it.", severity="warning")
                return False
            prompts = [
                measurement_prompt(text, self.measure_settings.max_tokens or self.config.display.max_tokens)
            ]
        self.measuring = True
        self.measure(prompts)
        return True

    @work(exclusive=True, group="measure", exit_on_error=False)
    async def measure(self, prompts: list[Prompt]) -> None:
        """Run the measurement, showing each run, the live speed-up line and the final summary."""
        panels = self.panels
        arms: tuple[FeedArm, FeedArm] | None = None
        if self.restart_mode:
            arms = (
                FeedArm(self.feeds[0], progress=_startup_to(panels[0]), on_up=lambda up: self._arm_up(0, up)),
                FeedArm(self.feeds[1], progress=_startup_to(panels[1]), on_up=lambda up: self._arm_up(1, up)),
            )
        try:
            session = Measurement(
                self.feeds,
                list(prompts),
                self.measure_settings,
                self.schedule,
                arms=arms,
            )
        except (BenchConfigError, ValueError) as exc:
            self.measuring = False
            self.notify(str(exc).splitlines()[0], severity="error")
            return
        names = ", ".join(p.id for p in prompts[:3]) + (" …" if len(prompts) > 3 else "")
        for panel in panels:
            panel.begin_answer(
                f"measure {len(prompts)} prompt(s) × {self.measure_settings.runs} runs: {names}",
                summary_follows=False,
            )
        self.set_measure_line(f"measuring: run 0/{session.total}")
        self.query_one("#speedup", PackedLine).update(
            Content.from_markup(PAIRS_WAITING),
            layout=False,
        )
        try:
            async for update in session.updates():
                self.show_measure_update(update)
        except asyncio.CancelledError:
            self.show_measure_update(session.final())
            await session.aclose()
            raise
        except Exception as exc:  # a server that does not start, a failed stream: keep what was measured
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.show_measure_update(session.final(interrupted=f"stopped: {reason}"))
            await session.aclose()
        finally:
            self.measuring = False
            if session.report is not None:
                self.last_report, self.saved_to = session.report, None
            for worker in self._pollers.values():
                worker.cancel()
            self._pollers.clear()

    def save_results(self, path: Path | None = None) -> Path:
        """Save the last measurement as a bench report (raises LookupError without one, OSError)."""
        if self.last_report is None:
            raise LookupError("nothing measured yet: F6 measures the last prompt")
        target = path or (Path(self.measure_settings.save_path) if self.measure_settings.save_path else None)
        written = results.save(
            self.last_report, self.feeds, self.config.display, target or results.default_path()
        )
        self.saved_to = written
        return written

    def show_measure_update(self, update: MeasureUpdate) -> None:
        """Apply one measurement update to the lines and panels."""
        lines = render_measure(update)
        if lines.line:
            self.query_one("#speedup", PackedLine).update(Content.from_markup(lines.line), layout=False)
        if lines.progress:
            self.set_measure_line(lines.progress)
        if update.arm is not None and lines.run_line:
            stream = self.panels[update.arm].stream
            stream.feed(Content.from_markup(lines.run_line).plain + "\n")
        if lines.summary:
            self.measurement_summaries.append(lines.summary)
            self.set_measure_line(lines.summary)
            for panel in self.panels:
                panel.stream.finish()

    @work(exclusive=True, group="generate", exit_on_error=False)
    async def generate(self, prompt: str) -> None:
        """Stream `prompt` to each server: A then B (ABBA across prompts), or both at once (race)."""
        panels = self.panels
        order = list(range(len(self.feeds)))
        if self.schedule != "race" and self.prompt_index % 2 == 1:
            order.reverse()  # ABBA: the second prompt goes to B first
        self.prompt_index += 1
        answers: dict[int, Answer] = {}
        try:
            for i in order:
                panels[i].begin_answer(prompt)

            async def one(i: int) -> None:
                answers[i] = await self.feeds[i].generate(prompt, panels[i].stream.feed)
                panels[i].add_summary(answers[i].summary)

            if self.schedule == "race":
                await asyncio.gather(*(one(i) for i in order))
            else:
                for i in order:
                    await one(i)
        except asyncio.CancelledError:
            for i in order:
                if i not in answers:
                    answers[i] = self.feeds[i].cancelled_answer()
                    panels[i].add_summary(answers[i].summary)
            raise
        finally:
            self.generating = False
        if self.config.mode == "ab" and len(answers) == 2:
            self.show_comparison(answers[0], answers[1])

    def show_comparison(self, a: Answer, b: Answer) -> None:
        """Update the speed-up and lossless lines after a prompt ran on both arms (`session.speedups`)."""
        race = self.schedule == "race"
        shown = self.speedups.compare(a, b, self.feeds, window=self.window, race=race)
        advice = advice_groups(shown.advice)
        wide, narrow = (
            speedup_groups(
                shown.last,
                shown.median,
                shown.count,
                race=race,
                label=shown.label,
                warnings=shown.warnings,
                compact=c,
            )
            for c in (False, True)
        )
        self.query_one("#speedup", PackedLine).show(wide + advice, narrow + advice)
        verdict = (
            render_lossless(a, b, lossy=shown.lossy)
            if self.config.display.temperature == 0
            else LOSSLESS_NEEDS_T0
        )
        self.query_one("#lossless", Static).update(Content.from_markup(verdict), layout=False)

    def clear_answers(self) -> None:
        """Empty every answer pane."""
        for panel in self.panels:
            panel.stream.reset()

    def cycle_window(self) -> None:
        """Next acceptance window; redraw at once."""
        self.window_index = (self.window_index + 1) % len(WINDOWS)
        self.update_title()
        self.views_due(now=True)

    # -- keys ----------------------------------------------------------------------------------

    def help_text(self) -> str:
        """The help (`MtpWatchApp.action_help`): every number, the keys of this screen and the player's."""
        from mtpwatch.ui.screens.help import monitor_help  # the help loads when asked for

        app = type(self.app)
        bound = [*MonitorScreen.BINDINGS, *PromptInput.BINDINGS, *app.BINDINGS]
        bound.append(Binding(app.COMMAND_PALETTE_BINDING, "command_palette", "Palette", id="palette"))
        bindings = [b for b in bound if isinstance(b, Binding)]
        return monitor_help(key_table(self.KEY_HELP, bindings), key_table(PLAYER_HELP, PLAYER_KEYS))

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
            self.views_due(now=True)

    def action_cycle_window(self) -> None:
        self.cycle_window()

    def action_measure(self) -> None:
        self.start_measurement()

    def action_sample_prompt(self) -> None:
        if self.generating or self.measuring:
            self.notify("A generation is running; Escape cancels it.", severity="warning")
            return
        self.send(SAMPLE_PROMPT)

    def action_clear_answers(self) -> None:
        self.clear_answers()

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

    def action_save_results(self) -> None:
        """Ctrl+S: write the last measurement where --save says, else mtpwatch-ab-<time>.json."""
        try:
            path = self.save_results()
        except LookupError as exc:
            self.notify(str(exc), severity="warning")
        except OSError as exc:
            self.notify(f"cannot save: {exc.strerror or exc}", severity="error")
        else:
            self.notify(f"saved the measurement to {path}")

    def save_unsaved(self) -> None:
        """With --save FILE, an unsaved measurement is written when the app exits."""
        if self.measure_settings.save_path and self.last_report is not None and self.saved_to is None:
            with contextlib.suppress(OSError):
                self.save_results()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A generation that failed with an unexpected error says so in one line (and in a recording)."""
        if event.state != WorkerState.ERROR or event.worker.group != "generate":
            return
        error = event.worker.error
        reason = (str(error).splitlines() or [""])[0] or type(error).__name__
        self.notify(f"Error: the generation stopped: {reason}", severity="error", timeout=8)
        if self.driver.recorder is not None:
            self.driver.recorder.mark(self.clock(), "error", reason=reason)


def _startup_to(panel: ServerPanel) -> Callable[[StartupView, list[str]], None]:
    """A launch's progress, drawn in `panel`'s start-up pane."""

    def show(view: StartupView, lines: list[str]) -> None:
        panel.show_startup(render_startup(view), lines)

    return show


def _label(screen: MonitorScreen, index: int) -> str:
    return screen.config.servers[index].label
