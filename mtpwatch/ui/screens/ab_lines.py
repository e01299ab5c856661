"""ABLines: a `MonitorScreen`'s A/B lines under its panels and F6's measurement behind them.

The speed-up line after each prompt that ran on both arms (`session/speedups`), the lossless line,
and the measure line with F6's paired runs (`session/measure`), their report and Ctrl+S's save
(`session/results`); with the restart schedule, the polling of the one server that is up. The
screen owns the widgets (`#speedup`, `#lossless`, `#measure`); its driver says whether it measures.
"""

from __future__ import annotations

import asyncio
import contextlib
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import Static
from textual.worker import Worker

from mtpwatch.session.speedups import SpeedupSeries
from mtpwatch.ui.markup.ab import (
    LOSSLESS_NEEDS_T0,
    LOSSLESS_WAITING,
    PAIRS_WAITING,
    STOPPED,
    advice_groups,
    measure_line,
    render_lossless,
    render_measure_hint,
    render_run,
    speedup_groups,
)
from mtpwatch.ui.widgets.packed_line import PackedLine
from mtpwatch.ui.widgets.prompt_input import PromptInput

if TYPE_CHECKING:  # the first frame waits for none of F6's, Ctrl+S's or a comparison's modules
    from mtpwatch.core.ab.report import BenchReport
    from mtpwatch.core.ab.workloads import Prompt
    from mtpwatch.session.measure import MeasureUpdate
    from mtpwatch.session.views import Answer
    from mtpwatch.ui.screens.monitor import MonitorScreen


class ABLines:
    def __init__(self, screen: MonitorScreen) -> None:
        self.screen = screen
        self.speedups = SpeedupSeries()
        self.measuring = False
        self.measurement_summaries: list[str] = []
        """One line per finished (or cancelled) measurement."""
        self.last_report: BenchReport | None = None
        """The last measurement's report (what Ctrl+S saves)."""
        self.saved_to: Path | None = None
        """Where `last_report` was saved; None while it is unsaved."""
        self._pollers: dict[int, Worker[None]] = {}

    @property
    def race(self) -> bool:
        return self.screen.schedule == "race"

    def show_waiting(self) -> None:
        """Before the first prompt: the lines say what they will show."""
        s = self.screen.measure_settings
        self.screen.query_one("#speedup", PackedLine).show(speedup_groups(None, None, 0, race=self.race))
        self.screen.query_one("#lossless", Static).update(Content.from_markup(LOSSLESS_WAITING))
        hint = render_measure_hint(s.runs, s.warmup, restart=self.screen.restart_mode, race=self.race)
        self.set_measure_line(hint, hint=True)

    def show_comparison(self, a: Answer, b: Answer) -> None:
        """Update the speed-up and lossless lines after a prompt ran on both arms (`session.speedups`)."""
        screen = self.screen
        shown = self.speedups.compare(a, b, screen.feeds, window=screen.window, race=self.race)
        advice = advice_groups(shown.advice)
        line = partial(speedup_groups, shown.last, shown.median, shown.count, race=self.race)
        wide, narrow = (line(label=shown.label, warnings=shown.warnings, compact=c) for c in (False, True))
        screen.query_one("#speedup", PackedLine).show(wide + advice, narrow + advice)
        t0 = screen.config.display.temperature == 0
        verdict = render_lossless(a, b, lossy=shown.lossy) if t0 else LOSSLESS_NEEDS_T0
        screen.query_one("#lossless", Static).update(Content.from_markup(verdict), layout=False)

    def set_measure_line(self, markup: str | Content, *, hint: bool = False) -> None:
        """The progress line under the speed-up line (A/B mode); a mere hint hides on short screens."""
        if self.screen.config.mode == "ab":
            line = self.screen.query_one("#measure", Static)
            line.set_class(hint, "-hint")
            line.update(markup if isinstance(markup, Content) else Content.from_markup(markup), layout=False)

    # -- F6 ------------------------------------------------------------------------------------

    def start_measurement(self, prompts: list[Prompt] | None = None) -> bool:
        """Measure `prompts` (default: the last console prompt) with repeated paired runs."""
        screen = self.screen
        why = screen.driver.cannot("measure")
        if why:
            screen.notify(why, severity="warning")
            return False
        if self.measuring or screen.generating:
            screen.notify("A generation is running; Escape cancels it.", severity="warning")
            return False
        if prompts is None:
            text = screen.last_prompt or screen.query_one(PromptInput).value.strip()
            if not text:
                screen.notify("Send a prompt first; F6 measures it.", severity="warning")
                return False
            from mtpwatch.session.measure import measurement_prompt

            tokens = screen.measure_settings.max_tokens or screen.config.display.max_tokens
            prompts = [measurement_prompt(text, tokens)]
        self.measuring = True
        screen.run_worker(self.measure(prompts), group="measure", exclusive=True, exit_on_error=False)
        return True

    async def measure(self, prompts: list[Prompt]) -> None:
        """Run the measurement, showing each run, the live speed-up line and the final summary."""
        from mtpwatch.core.ab.plan import BenchConfigError
        from mtpwatch.session.measure import FeedArm, Measurement

        screen = self.screen
        panels = screen.panels
        arms: tuple[FeedArm, FeedArm] | None = None
        if screen.restart_mode:
            a, b = (
                FeedArm(screen.feeds[i], panels[i].startup_progress, partial(self.arm_up, i)) for i in (0, 1)
            )
            arms = (a, b)
        try:
            session = Measurement(
                screen.feeds, list(prompts), screen.measure_settings, screen.schedule, arms=arms
            )
        except (BenchConfigError, ValueError) as exc:
            self.measuring = False
            screen.notify(str(exc).splitlines()[0], severity="error")
            return
        names = ", ".join(p.id for p in prompts[:3]) + (" …" if len(prompts) > 3 else "")
        header = f"measure {len(prompts)} prompt(s) × {screen.measure_settings.runs} runs: {names}"
        for panel in panels:
            panel.begin_answer(header, summary_follows=False)
        self.set_measure_line(f"measuring: run 0/{session.total}")
        screen.query_one("#speedup", PackedLine).update(Content.from_markup(PAIRS_WAITING), layout=False)
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

    def show_measure_update(self, update: MeasureUpdate) -> None:
        """One bench event drawn: the speed-up line, the progress, a finished run, the summary."""
        screen, report = self.screen, update.report
        if report is not None:
            line = measure_line(report, done=update.done, total=update.total)
            screen.query_one("#speedup", PackedLine).update(Content.from_markup(line), layout=False)
        if update.progress:
            self.set_measure_line(Content(update.progress))  # plain words
        if update.arm is not None and update.run is not None:
            run_line = render_run(update.run, update.runs_per_prompt)
            screen.panels[update.arm].stream.feed(Content.from_markup(run_line).plain + "\n")
        if report is not None and update.summary:
            summary = measure_line(report, summary=update.summary)
            self.measurement_summaries.append(summary)
            self.set_measure_line(summary)
            for panel in screen.panels:
                panel.stream.finish()

    def arm_up(self, index: int, up: bool) -> None:
        """Restart mode: a server came up (poll it) or is about to stop (stop polling)."""
        worker = self._pollers.pop(index, None)
        if worker is not None:
            worker.cancel()
        screen = self.screen
        panel = screen.panels[index]
        if up:
            panel.show_pane("monitor")
            poll = screen.feeding.poll_forever(screen.feeds[index], panel)
            self._pollers[index] = screen.run_worker(poll, exit_on_error=False)
            label = screen.config.servers[index].label
            self.set_measure_line(f"server {'AB'[index]} is up ({label}); the other is stopped")
        else:
            panel.show_startup(STOPPED.format(arm="AB"[index]), [])
            panel.show_pane("startup")

    # -- Ctrl+S --------------------------------------------------------------------------------

    def save_results(self) -> Path:
        """Save the last measurement as a bench report where --save says, else at
        `results.default_path()` (raises LookupError without one, OSError)."""
        if self.last_report is None:
            raise LookupError("nothing measured yet: F6 measures the last prompt")
        from mtpwatch.session import results

        screen, save_path = self.screen, self.screen.measure_settings.save_path
        target = Path(save_path) if save_path else results.default_path()
        self.saved_to = results.save(self.last_report, screen.feeds, screen.config.display, target)
        return self.saved_to

    def save_and_say(self) -> None:
        """Ctrl+S: write the last measurement where --save says, else mtpwatch-ab-<time>.json."""
        try:
            path = self.save_results()
        except LookupError as exc:
            self.screen.notify(str(exc), severity="warning")
        except OSError as exc:
            self.screen.notify(f"cannot save: {exc.strerror or exc}", severity="error")
        else:
            self.screen.notify(f"saved the measurement to {path}")

    def save_unsaved(self) -> None:
        """With --save FILE, an unsaved measurement is written when the app exits."""
        if self.screen.measure_settings.save_path and self.last_report is not None and self.saved_to is None:
            with contextlib.suppress(OSError):
                self.save_results()
