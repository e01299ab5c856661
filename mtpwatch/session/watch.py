"""`ServerFeed`: one server as the app sees it (start it, scrape it, stream prompts), and its views.

A thin assembly, the `session.sources.Source` of every panel: a `session.scrapes.Scrapes` (live HTTP
by default; `session.prometheus` and `session.replay` pass theirs), the `session.server_watch.
ServerWatch` that alone writes what they found, the console prompt's window (`session.prompts.
PromptWindow`), the client that streams prompts, an optional server process (`session.launching`)
and observers (`session.observers`: a recording is one).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.http import engines
from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest, GenerationResult, GenerationStats, StreamEvent
from mtpwatch.core.launch.process import ServerProcess
from mtpwatch.core.metrics.filtered import ScrapeFilter
from mtpwatch.core.metrics.rates import Rates
from mtpwatch.session.launching import StartupProgress, launch_server
from mtpwatch.session.observers import Observers
from mtpwatch.session.prompts import PromptWindow
from mtpwatch.session.scrapes import LiveScrapes, Scrapes
from mtpwatch.session.server_view import build_server_view, window_rates
from mtpwatch.session.server_watch import ServerWatch
from mtpwatch.session.sources import SourceState
from mtpwatch.session.views import Answer, ServerView

LIVE_READ_INTERVAL_S = 0.01
"""The console reads its answer stream at most every 10 ms: a run of fast chunks is one read, one
wake-up; a chunk after a quiet gap (the first ones too) is stamped on arrival, one that follows
another within 10 ms up to 10 ms late (docs/cost.md). The benchmarks' arms read every chunk."""


class ServerFeed:
    """One server (see the module); its `Source` members say what they do on `session.sources.Source`."""

    def __init__(
        self,
        spec: ServerSpec,
        display: DisplaySettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        client: VllmClient | None = None,
        scrapes: Scrapes | None = None,
        starting: bool | None = None,
    ) -> None:
        """`client` streams the prompts (default: the live filtered client, whose `LiveScrapes` are
        the default `scrapes`); `starting`: the panel starts as 'starting' (default: `spec.launch`)."""
        self.spec = spec
        self.display = display
        self.clock = clock
        self.client = client or VllmClient(
            spec.url,
            api_key=spec.api_key,
            timeout=5.0,
            clock=clock,
            scrape_filter=ScrapeFilter(),
            read_interval=LIVE_READ_INTERVAL_S,
        )
        self.observers = Observers()
        self.prompt = PromptWindow(clock)
        self.watch = ServerWatch(
            spec,
            display,
            scrapes or LiveScrapes(self.client),
            self.observers,
            clock=clock,
            wall=wall,
            busy=lambda: self.prompt.stats is not None,
            starting=spec.launch is not None if starting is None else starting,
        )
        self.process: ServerProcess | None = None
        self._scrape_lock = asyncio.Lock()
        self._wake = asyncio.Event()

    def state(self) -> SourceState:
        w = self.watch
        return SourceState(
            spec=self.spec,
            display=self.display,
            status=w.status,
            reason=w.reason,
            model=w.model,
            version=w.version,
            spec_method=w.spec_method,
            drafter_ref=w.drafter_ref,
            launch_facts=w.launch_facts,
            engine_info=w.engine_info,
            prompt_rates=self.rates("prompt"),
        )

    async def launch(self, progress: StartupProgress) -> bool:
        assert self.spec.launch is not None
        self.watch.starting()

        def started(process: ServerProcess) -> None:
            self.process = process

        result = await launch_server(self.spec.launch, self.spec.url, progress, self.clock, started)
        return self.watch.launched(result)

    async def poll(self) -> float:
        async with self._scrape_lock:  # the poll loop and a prompt's final scrape never interleave
            delay, t = await self.watch.poll()
            if t is not None:
                self.prompt.sample_client(t)
        return delay

    def wake(self) -> None:
        """Scrape now: ends the poll loop's `rest` (a console prompt starts)."""
        self._wake.set()

    async def rest(self, delay: float) -> None:
        event = self._wake
        handle = asyncio.get_running_loop().call_later(delay, event.set)
        try:
            await event.wait()
        finally:
            handle.cancel()
            event.clear()

    def rates(self, window: str) -> Rates | None:
        return window_rates(self.watch, self.prompt, window, self.clock())

    def view(self, window: str) -> ServerView:
        return build_server_view(self.watch, self.prompt, window)

    def sample_hardware(self, on: bool) -> None:
        self.watch.sample_hardware(on)

    async def generate(self, prompt: str, on_text: Callable[[str], None]) -> Answer:
        request = GenerationRequest(
            prompt=prompt,
            model=self.watch.model,
            chat=self.display.chat,
            max_tokens=self.display.max_tokens,
            temperature=self.display.temperature,
            return_token_ids=True,
            extra=engines.stream_extras(self.watch.engine),
        )
        stats = self.begin_prompt(prompt)
        observers = self.observers

        def on_event(event: StreamEvent) -> None:
            observers.event(event)
            if event.text:
                on_text(event.text)

        try:
            result = await self.client.generate(request, stats=stats, on_event=on_event)
            observers.result(self.clock(), result)
        finally:
            self.end_prompt(self.clock())
        if result.error is None:
            self.client.fresh_next()  # every tier, the histograms included: the window closes here
            await self.poll()  # a scrape after the last token, so the prompt's window is complete
        return self.close_prompt(result, self.clock())

    def begin_prompt(self, prompt: str) -> GenerationStats:
        stats = self.prompt.begin()
        self.wake()  # back to the full scrape rate from the first token
        assert self.prompt.t0 is not None
        self.observers.prompt(self.prompt.t0, prompt)
        return stats

    def end_prompt(self, t1: float) -> None:
        self.prompt.end(t1)
        self.observers.end(t1)

    def close_prompt(self, result: GenerationResult, t_end: float) -> Answer:
        """The prompt's window closes at `t_end`; its answer and summary from `result`."""
        self.prompt.close(result, t_end)
        self.observers.done(t_end)
        acc = self.prompt.acceptance(self.watch.collector, self.rates("prompt"))
        return self.prompt.answer(result, acc)

    def cancelled_answer(self) -> Answer:
        result = self.prompt.cancelled_result()
        self.observers.result(self.clock(), result)
        return self.close_prompt(result, self.clock())

    async def close(self, *, server_only: bool = False) -> None:
        self.watch.sample_hardware(False)
        process, self.process = self.process, None
        launch = self.watch.launch
        if process is not None:
            keep = self.spec.launch is not None and self.spec.launch.keep
            if keep and not server_only:
                process.detach(self.spec.url)
            else:
                await process.stop(timeout=10.0)
        if launch is not None:
            await launch.close_log()
        if server_only:
            self.watch.stopped()
            return
        with contextlib.suppress(Exception):
            await self.watch.scrapes.aclose()
        with contextlib.suppress(Exception):
            await self.client.aclose()
