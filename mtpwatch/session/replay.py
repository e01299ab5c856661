"""`ReplaySource`: a recording played back into the same `ServerFeed`s the live app uses.

One `ServerFeed` per recorded server, on a virtual clock, over `ReplayScrapes` (the recording's
pages, never the network). Each record, in the order written, goes through the method that handled
it live (`ReplaySource._apply`: a scrape is polled, so `core.metrics.rates.Collector` sees the same
pages at the same times; the rest go to the watch's `restore_*` and `mark_down`, the feed's prompt
methods): every number a replay shows comes from the code that showed it live. No network, no
server, no Textual.

`ReplayDriver` stands it behind a monitor screen (`mtpwatch replay FILE`; `session/drivers.py` says
what it can do): a seek shows what the recording's feeds held then.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.core.http.errors import ServerError
from mtpwatch.core.http.failures import parse_metrics_page
from mtpwatch.core.http.generation import GenerationResult, GenerationStats
from mtpwatch.core.http.urls import normalize_url
from mtpwatch.core.record.reader import Recording, read_recording
from mtpwatch.core.record.schema import decode_event
from mtpwatch.core.roofline.nvml import HardwareReading
from mtpwatch.session.drivers import Action, Operation
from mtpwatch.session.scrapes import Identity, Page
from mtpwatch.session.server_watch import CADENCE
from mtpwatch.session.sources import Source
from mtpwatch.session.views import spec_label
from mtpwatch.session.watch import ServerFeed

if TYPE_CHECKING:
    from mtpwatch.core.record.writer import Recorder

NOT_IN_JSON = ("client_tokens_per_step", "eos_overcount")
"""`PromptSummary` fields that `mtpwatch replay FILE --json` leaves out of each prompt (it has the rest)."""


def config_from_session(session: dict[str, Any]) -> AppConfig:
    """The recorded session's config: servers (no launch: nothing is started), display, mode."""
    shown = session.get("display") or {}
    display = DisplaySettings(**{k: v for k, v in shown.items() if k in DisplaySettings.__dataclass_fields__})
    servers = [
        ServerSpec(label=str(s.get("label", f"server {i}")), url=str(s.get("url", "")), model=s.get("model"))
        for i, s in enumerate(session.get("servers") or [])
    ]
    if not servers:
        raise ValueError("the recording names no servers (no 'session' record)")
    title = f"replay · {session.get('title') or 'mtpwatch'}"
    mode = session.get("mode")
    return AppConfig(servers=servers, display=display, mode="ab" if mode == "ab" else "single", title=title)


class ReplayScrapes:
    """A recorded server's pages (`session.scrapes.Scrapes`): the player `load`s each 'scrape' record."""

    def __init__(self, url: str) -> None:
        self.url = normalize_url(url)
        self._record: dict[str, Any] | None = None

    def load(self, record: dict[str, Any]) -> None:
        """The 'scrape' record the next `fetch` decodes."""
        self._record = record

    async def fetch(self, model: str | None) -> Page:
        """The loaded page, parsed as the live client parses it, and how it was read (without the
        idle cadence: the watch adds it again from the same pages, as it did live)."""
        record = self._record
        if record is None:
            raise ServerError("no page recorded yet", url=self.url)
        text = "\n".join(record["lines"]) + "\n"
        via = str(record.get("via", "")).partition(CADENCE)[0]
        return Page(parse_metrics_page(text, model, self.url), text, via)

    async def identify(self, model: str | None) -> Identity | None:
        """A replay's identity comes from the recording's 'server' records (`restore_identity`)."""
        return None

    async def aclose(self) -> None:
        """Nothing to let go: no connection."""


def _poll_now(feed: ServerFeed) -> None:
    """One poll of `feed`, run to its end here: a replay's never waits (its page is in memory, its
    server identified from the recording) and the player is synchronous (a seek applies thousands
    of records at once)."""
    poll = feed.poll()
    try:
        poll.send(None)
    except StopIteration:
        return
    poll.close()
    raise RuntimeError("a replayed poll waited for I/O")


class ReplaySource:
    """Plays `recording` into feeds on a virtual clock; `advance`/`seek` move it."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.session = recording.session()
        self.config = config_from_session(self.session)
        self.schedule = str(self.session.get("schedule") or "alternate")
        self.t_start = recording.t0
        self.t_end = float(recording.records[-1]["t"]) if recording.records else self.t_start
        self._wall0 = float(recording.header.get("wall", 0.0))
        self.feeds: list[ServerFeed] = []
        self.prompt_times = [float(r["t"]) for r in recording.records if r["kind"] == "prompt"]
        """Start times of every prompt (any server), for 'jump to prompt'."""
        self.scrape_times = sorted({float(r["t"]) for r in recording.records if r["kind"] == "scrape"})
        self.reset()

    @classmethod
    def open(cls, path: str | Path) -> ReplaySource:
        """Read the recording at `path` (RecordingError, OSError or ValueError when it cannot)."""
        return cls(read_recording(path))

    # -- clocks ---------------------------------------------------------------------------------

    def clock(self) -> float:
        """The virtual monotonic clock: the time of the record being applied, then the player's."""
        return self.now

    def wall(self) -> float:
        """Wall time at the virtual clock (the recording's start wall time + elapsed)."""
        return self._wall0 + (self.now - self.t_start)

    @property
    def elapsed_s(self) -> float:
        """Seconds since the start of the recording at the player's position."""
        return self.now - self.t_start

    # -- playing --------------------------------------------------------------------------------

    def reset(self) -> None:
        """Back to the start: fresh feeds, nothing applied."""
        for feed in self.feeds:
            feed.sample_hardware(False)
        self.now = self.t_start
        self.pos = 0
        self._stats: dict[int, GenerationStats] = {}
        self._results: dict[int, GenerationResult] = {}
        self._done: dict[int, int] = {}
        self.feeds = []
        self._scrapes: list[ReplayScrapes] = []
        for spec, info in zip(self.config.servers, self.session.get("servers") or [], strict=False):
            scrapes = ReplayScrapes(spec.url)
            feed = ServerFeed(
                spec, self.config.display, clock=self.clock, wall=self.wall, scrapes=scrapes,
                starting=bool(info.get("launched")),
            )  # fmt: skip
            self.feeds.append(feed)
            self._scrapes.append(scrapes)

    def advance(self, t: float) -> list[Action]:
        """Apply every record up to time `t` (forward only) and return what the answer panes show."""
        actions: list[Action] = []
        records = self.recording.records
        while self.pos < len(records) and float(records[self.pos]["t"]) <= t:
            record = records[self.pos]
            self.pos += 1
            self._apply(record, actions)
        self.now = max(self.now, t)
        return actions

    def seek(self, t: float) -> list[Action]:
        """Go to time `t` (clamped to the recording); backwards replays from the start."""
        t = min(max(t, self.t_start), self.t_end)
        if t < self.now:
            self.reset()
        return self.advance(t)

    @property
    def at_end(self) -> bool:
        return self.pos >= len(self.recording.records)

    def _apply(self, record: dict[str, Any], actions: list[Action]) -> None:
        kind = record["kind"]
        if kind in ("header", "mark"):
            return
        s = int(record["s"])
        if s >= len(self.feeds):
            return
        feed = self.feeds[s]
        t = float(record["t"])
        if kind != "ev":  # the live code read the clock at exactly these times
            self.now = t
        watch = feed.watch
        if kind == "scrape":
            self._scrapes[s].load(record)
            _poll_now(feed)
        elif kind == "server":
            watch.restore_identity(record)
        elif kind == "down":
            watch.mark_down(str(record.get("reason", "")))
        elif kind == "life":
            watch.restore_life(str(record.get("what")), str(record.get("detail", "")))
        elif kind == "prompt":
            self._stats[s] = feed.begin_prompt(str(record["text"]))
            actions.append(Action("begin", s, text=str(record["text"]), t=t))
        elif kind == "ev":
            event = decode_event(record)
            stats = self._stats.get(s)
            if stats is not None:
                stats.add(event)
            if event.text:
                actions.append(Action("text", s, text=event.text, t=t))
        elif kind == "result":
            stats = self._stats.get(s) or GenerationStats(clock=self.clock)
            if record.get("t_start") is not None:
                stats.start(float(record["t_start"]))
            self._results[s] = stats.finish(
                error=record.get("error"), cancelled=bool(record.get("cancelled")), t=t
            )
        elif kind == "end":
            feed.end_prompt(t)
        elif kind == "done":
            stats = self._stats.get(s) or GenerationStats(clock=self.clock)
            result = self._results.pop(s, None) or stats.finish(t=t)
            answer = feed.close_prompt(result, t)
            self._done[s] = self._done.get(s, 0) + 1
            actions.append(Action("answer", s, answer=answer, t=t, number=self._done[s]))
        elif kind == "nvml":
            reading = record.get("reading")  # None: the sampler stopped (panel hidden, server stopped)
            kept = {k: v for k, v in (reading or {}).items() if k in HardwareReading.__dataclass_fields__}
            watch.restore_reading(None if reading is None else HardwareReading(**kept))

    # -- headless ---------------------------------------------------------------------------------

    def servers(self) -> list[dict[str, Any]]:
        """What each server was (the last 'server' record of each): model, method, k, version, GPU."""
        out: list[dict[str, Any]] = [
            {"label": spec.label, "url": spec.url, "model": spec.model} for spec in self.config.servers
        ]
        for record in self.recording.records:
            if record["kind"] == "server" and int(record["s"]) < len(out):
                entry = out[int(record["s"])]
                for key in ("model", "version", "method", "k", "gpu"):
                    entry[key] = record.get(key)
        for entry, feed in zip(out, self.feeds, strict=False):
            snap = feed.watch.collector.latest  # k is the number of `position` labels the pages carried
            if snap is not None:
                entry["speculative"] = snap.speculative
                entry["k"] = snap.num_speculative_tokens if snap.speculative else 0
            k = entry.get("k")  # 'MTP k=4', 'speculative k=4' (method unknown), None without speculation
            entry["method_label"] = spec_label(entry.get("method"), k) if k else None
        return out

    def summary(self) -> dict[str, Any]:
        """The per-prompt summary of the whole recording (`mtpwatch replay FILE --json`)."""
        self.reset()
        actions = self.advance(self.t_end)
        prompts: list[dict[str, Any]] = []
        current: dict[int, str] = {}
        for action in actions:
            if action.kind == "begin":
                current[action.server] = action.text
            elif action.kind == "answer" and action.answer is not None:
                prompts.append(
                    {
                        "server": action.server,
                        "label": self.config.servers[action.server].label,
                        "t_s": round(action.t - self.t_start, 3),
                        "prompt": current.get(action.server, ""),
                        **{k: v for k, v in asdict(action.answer.summary).items() if k not in NOT_IN_JSON},
                    }
                )
        return {
            "recording_version": self.recording.header.get("version"),
            "duration_s": round(self.t_end - self.t_start, 3),
            "truncated": self.recording.truncated,
            "mode": self.config.mode,
            "servers": self.servers(),
            "prompts": prompts,
        }


REFUSALS: dict[Operation, str] = {
    "send": "This is a replay: no server to send prompts to.",
    "measure": "This is a replay: F6 measures live servers.",
}


class ReplayDriver:
    """The recording's feeds, on the recording's clock (`ReplaySource`): a `session.drivers.Driver`."""

    def __init__(self, source: ReplaySource) -> None:
        self.source = source
        self.sources: list[Source] = list(source.feeds)
        self.recorder: Recorder | None = None

    def open(self) -> str | None:
        self.sources[:] = self.source.feeds
        return None

    def cannot(self, what: Operation) -> str | None:
        return REFUSALS.get(what)

    def seek(self, t: float) -> list[Action]:
        """Move the recording to `t`; a seek back rebuilds the feeds (the list keeps its identity)."""
        actions = self.source.seek(t)
        self.sources[:] = self.source.feeds
        return actions

    def stop_recording(self) -> None:
        """A replay records nothing."""

    async def stop(self) -> None:
        """Nothing to stop in a replay."""
