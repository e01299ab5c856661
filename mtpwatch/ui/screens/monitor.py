"""MonitorScreen: one or two server panels, the A/B speed-up line and the prompt console.

The screen owns the workers: one per server (start it if asked, then poll it) and one for
the console's generation (alternate ABBA or race across servers). Panels only draw.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from mtpwatch.config import AppConfig
from mtpwatch.ui.view import WINDOWS, ServerView, render_speedup, window_words
from mtpwatch.ui.widgets.prompt_input import PromptInput
from mtpwatch.ui.widgets.server_panel import ServerPanel

if TYPE_CHECKING:
    from mtpwatch.ui.live import Answer, ServerFeed

SAMPLE_PROMPT = (
    "Explain in three short paragraphs how speculative decoding with a multi-token-prediction "
    "drafter speeds up generation."
)


class MonitorScreen(Screen[None]):
    """The main view: panels side by side (stacked when narrow), one console."""

    def __init__(
        self,
        config: AppConfig,
        *,
        autostart: bool,
        clock: Callable[[], float],
        schedule: str = "alternate",
        prefill: str = "",
    ) -> None:
        super().__init__()
        self.config = config
        self.autostart = autostart
        self.clock = clock
        self.schedule = schedule
        self.prefill = prefill
        self.feeds: list[ServerFeed] = []
        self.window_index = 0
        self.speedups: list[float] = []
        self.prompt_index = 0
        self.generating = False

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="title-bar")
        with Horizontal(id="panels", classes=f"-{self.config.mode} -n{len(self.config.servers)}"):
            for i, spec in enumerate(self.config.servers):
                yield ServerPanel(
                    ServerView(
                        label=spec.label, url=spec.url, status="starting" if spec.launch else "connecting"
                    ),
                    index=i,
                    starts_server=spec.launch is not None,
                    is_paused=self._is_paused,
                )
        if self.config.mode == "ab":
            yield Static(id="speedup")
            yield Static(id="lossless")
        yield PromptInput(value=self.prefill, placeholder="type a prompt, Enter sends it", id="prompt")
        yield Footer()

    def on_mount(self) -> None:
        self.update_title()
        if self.config.mode == "ab":
            self.query_one("#speedup", Static).update(
                Content.from_markup(render_speedup(None, None, 0, race=self.schedule == "race"))
            )
            self.query_one("#lossless", Static).update(
                Content.from_markup("[dim]lossless check (temperature 0): — send a prompt[/]")
            )
        self.query_one(PromptInput).focus()
        if self.autostart:
            from mtpwatch.ui.live import ServerFeed

            for i, spec in enumerate(self.config.servers):
                feed = ServerFeed(spec, self.config.display, clock=self.clock)
                self.feeds.append(feed)
                self.run_server(i)

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
        # The window first: it qualifies every number, and narrow terminals cut the end.
        parts = [f"window [b]{window_words(self.window)}[/]"]
        if self.config.mode == "ab":
            parts.append(f"A/B {self.schedule}")
        if self._is_paused():
            parts.append("[$warning reverse] PAUSED — display frozen, collection continues [/]")
        parts.append(f"[b]{self.config.title}[/]")
        parts.append("[dim]F1 help · Ctrl+Q quit[/]")
        self.query_one("#title-bar", Static).update(Content.from_markup("  ·  ".join(parts)))

    # -- servers -------------------------------------------------------------------------------

    @work(group="servers", exit_on_error=False)
    async def run_server(self, index: int) -> None:
        """Start the server if its spec says so, then poll it forever."""
        feed = self.feeds[index]
        panel = self.panels[index]
        if feed.spec.launch is not None:
            ok = await feed.launch(lambda phase, lines: panel.show_startup(phase, lines))
            if not ok:
                panel.post_message(ServerPanel.ViewUpdated(feed.view(self.window)))
                panel.show_startup_pane()
                return
            panel.show_monitor()
        while True:
            delay = await feed.poll()
            feed.hardware_wanted = panel.bandwidth_visible
            panel.post_message(ServerPanel.ViewUpdated(feed.view(self.window)))
            await asyncio.sleep(delay)

    async def stop_servers(self) -> None:
        """Stop owned server processes (unless `keep`) and close clients."""
        await asyncio.gather(*(feed.close() for feed in self.feeds), return_exceptions=True)

    # -- console -------------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    def submit(self, event: Input.Submitted) -> None:
        prompt = event.value.strip()
        if not prompt:
            return
        if self.generating:
            self.notify("A generation is running; Escape cancels it.", severity="warning")
            return
        prompt_input = self.query_one(PromptInput)
        prompt_input.remember(prompt)
        prompt_input.value = ""
        self.send(prompt)

    def send(self, prompt: str) -> None:
        """Send `prompt` to every server (the worker does the rest)."""
        if not self.feeds:
            self.notify("Not connected to any server.", severity="warning")
            return
        self.generating = True
        self.generate(prompt)

    def cancel_generation(self) -> bool:
        """Cancel the running generation; True if one was running."""
        if not self.generating:
            return False
        self.workers.cancel_group(self, "generate")
        return True

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

    def _arms(self) -> tuple[int, int, str]:
        """(baseline index, MTP index, label) of the ratio: MTP/baseline when exactly one arm
        speculates (its counters say so), else B/A."""
        spec = [p.view.speculative if p.view is not None else None for p in self.panels]
        if len(spec) == 2 and spec[0] is False and spec[1] is True:
            return 0, 1, "MTP/baseline"
        if len(spec) == 2 and spec[0] is True and spec[1] is False:
            return 1, 0, "MTP/baseline"
        return 0, 1, "B/A"

    def show_comparison(self, a: Answer, b: Answer) -> None:
        """Update the speed-up and lossless lines after a prompt ran on both arms."""
        from mtpwatch.ui.live import compare_outputs

        base, mtp, label = self._arms()
        answers = (a, b)
        t_base, t_mtp = answers[base].summary.decode_tok_s, answers[mtp].summary.decode_tok_s
        last = t_mtp / t_base if t_base and t_mtp else None
        if last is not None:
            self.speedups.append(last)
        median = statistics.median(self.speedups) if self.speedups else None
        recent = self.speedups[-3:]
        # Known failure signature: MTP below the baseline on the last prompts (not in race mode,
        # where contention decides).
        slower = (
            label == "MTP/baseline"
            and self.schedule != "race"
            and bool(recent)
            and statistics.median(recent) < 1.0
        )
        self.query_one("#speedup", Static).update(
            Content.from_markup(
                render_speedup(
                    last,
                    median,
                    len(self.speedups),
                    race=self.schedule == "race",
                    label=label,
                    slower=slower,
                )
            ),
            layout=False,  # one fixed line: no relayout
        )
        if self.config.display.temperature == 0:
            verdict = compare_outputs(a, b)
        else:
            verdict = "[dim]lossless check needs temperature 0[/]"
        self.query_one("#lossless", Static).update(Content.from_markup(verdict), layout=False)

    def clear_answers(self) -> None:
        """Empty every answer pane."""
        for panel in self.panels:
            panel.stream.reset()

    def cycle_window(self) -> None:
        """Next acceptance window; redraw at once."""
        self.window_index = (self.window_index + 1) % len(WINDOWS)
        self.update_title()
        for feed, panel in zip(self.feeds, self.panels, strict=False):
            panel.window = self.window
            panel.show(feed.view(self.window))

    def now(self) -> float:
        """The injected clock."""
        return self.clock()


def wall_clock() -> float:
    """Wall time, for 'disconnected since HH:MM:SS'."""
    return time.time()
