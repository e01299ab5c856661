"""Filtered, tiered scraping of vLLM's `/metrics`: what to ask for, how often, and whether it was honoured.

Why: vLLM's API server spends 5.5–6.8 ms of CPU on each full `/metrics` answer (53 KB, real 0.32 CPU
build: docs/measurements/2026-12-01-filtered-tiered-scraping.md), ~27 ms a second at 4 Hz. It serves
`/metrics` twice (`vllm/entrypoints/serve/instrumentator/metrics.py`): `GET /metrics` ignores the
query string; `GET /metrics/` reaches prometheus_client's ASGI app, which honours `name[]=`
(`prometheus_client/exposition.py::_bake_output` → `registry.restricted_registry`) with the exposed
*sample* names (`X_total`, `X_created`; `X_bucket`, `X_sum`, `X_count`). The families the monitor
reads cost 0.95 ms an answer without the histograms (6.7 KB), 2.4 ms with them (18 KB); an empty
filter, the HTTP stack's floor, 0.25–0.48 ms (docs/cost.md).

Tiers; a scrape's page is the newest hot answer + the newest slow one, valid exposition text with the
samples `parse_snapshot` reads from a full page (the families are disjoint), so the parser, the
fleet, recordings and replays take it unchanged:
- **hot** (`HOT_NAMES`), every scrape of a busy server;
- **slow** (`SLOW_NAMES`), at most every `slow_interval_s` (1 s) and only when the token or
  finished-request counters moved since it was fetched (why: `_RESTART_PREFIXES`). When it is due
  before a scrape (tokens flowing, or `fresh`) one answer asks both tiers and `_split` parts it (one
  HTTP answer fewer a second: each costs the API server ~0.5 ms in a row, more spaced); the first hot
  answer of a busy spell, the first to show it due, is followed by a slow request at once;
- **activity** (`ACTIVITY_NAMES`, which says why), instead of the hot tier while the last hot answer
  showed nothing running or waiting: while these samples equal that answer's, it is the hot tier. The
  hot tier is asked again at once when one moves, and at least every `idle_hot_interval_s` (2 s).

Whether the filter is honoured (`ScrapeState`), decided per server:
- **Probe** (the first scrape, after a failed scrape, a restart or a bad answer): one full page, which
  is the scrape's result, and one answer per tier; honoured when each answer is non-empty and holds
  exactly the asked names that the full page holds. A family the server legitimately lacks (no spec
  counters without speculation, no read bytes without `--enable-mfu-metrics`) costs nothing.
- **Every later answer**: non-empty, nothing but asked names, and `REQUIRED_NAMES` present (cheap: a
  scan of a few dozen line heads). Anything else (an empty 200 from a multiprocess registry, a full
  page from a server that ignores the filter, a 404 or other status) gives the full page at once and
  from then on, until a restart or a failed scrape probes again (a balancer in front of two different
  servers costs no probe per scrape).
- Not vLLM (llama-server) or a page without vLLM families: the full page.
- vLLM's Rust frontend (0.33/0.34, an OpenMetrics page) serves `/metrics` only, ignoring the query
  (`rust/src/server/src/routes.rs:140`, `routes/metrics.rs` `scrape()` takes no query; the 0.34.0
  `vllm-rs` binary holds no `name[]` string), so `/metrics/?name[]=…` is axum's 404 and the probe
  gives the full page (`_openmetrics_why` words the reason). The probe is still made: a later release
  that honours the filter is used filtered, its answers joined under one `# EOF` (`_terminated`).
- **Once** (`ScrapeFilter(once=True)`, `mtpwatch snapshot`): one filtered request for both tiers,
  judged by the per-answer rule; a whole page (filter ignored) is used as it is, anything else falls
  back to `GET /metrics`.

What the tiers change: while tokens flow, a window's histogram means (TTFT, TPOT, ITL: Δsum/Δcount)
are taken between slow answers up to 1 s older than the window's ends; an idle server's slow tier is
current, so a console prompt on an otherwise idle server gets the full page's numbers exactly, its
closing scrape asking both tiers (`fresh=True`). A restart (`rates.is_restart`'s rule on the hot
tier) probes again at once, so the slow tier never mixes two server lives and a replaced server is
re-checked.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from mtpwatch.core.metrics.parse import is_openmetrics, parse_samples
from mtpwatch.core.metrics.snapshot import FAMILY_NAMES, HISTOGRAM_SAMPLES, detect_schema

FULL_PATH = "/metrics"
"""The whole page (prometheus-fastapi-instrumentator's route on vLLM; ignores the query string)."""

HOT_NAMES: tuple[str, ...] = (
    *(f"vllm:{name}" for name, _ in FAMILY_NAMES.values()),  # counters, per position, gauges
    "vllm:request_success_total",
    # restart detection (`snapshot._CREATED`) must see these at every scrape, as on a full page; the
    # same collectors as their `_total`s: a line each
    "vllm:generation_tokens_created",
    "vllm:spec_decode_num_drafts_created",
)
"""Sample names asked at every scrape: every sample `snapshot_from_samples` reads but the slow tier."""

SLOW_NAMES: tuple[str, ...] = (*HISTOGRAM_SAMPLES, "vllm:cache_config_info")
"""The histograms' `_sum` and `_count` the views read (`snapshot.HISTOGRAM_SAMPLES`) and the cache config."""

ACTIVITY_NAMES: tuple[str, ...] = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:generation_tokens_created",
    "vllm:request_success_total",
)
"""What an idle server is asked instead of the hot tier: the samples that move with anything the engine
does. Every hot sample changes only on an engine step (the spec counters, KV usage, read bytes, the
gauges, all set together from one step's stats by `vllm/v1/metrics/loggers.py`) or when a request
finishes (`request_success_total`); a step that processed tokens moves the prompt or generation
counter, and the stats that end a busy spell set the gauges to 0. So while these equal those of a hot
answer that showed nothing running or waiting, the hot tier is that answer, sample for sample;
`_created` and a counter going down still show a restart (`_restarted`)."""

ALL_NAMES: tuple[str, ...] = HOT_NAMES + SLOW_NAMES

REQUIRED_NAMES: frozenset[str] = frozenset({"vllm:generation_tokens_total", "vllm:num_requests_running"})
"""Names every vLLM that logs stats exports whatever its configuration (`vllm/v1/metrics/loggers.py`
creates them unconditionally): a filtered answer without them is not the server's numbers."""

SLOW_INTERVAL_S = 1.0
IDLE_HOT_INTERVAL_S = 2.0

# The samples whose change means a restart (`rates.is_restart`'s rule); parse_samples keeps only these
# lines, from its line cache when unchanged. The slow tier can only have changed where one of them
# moved: vLLM observes its histograms on an engine step that processed tokens (iteration tokens, TTFT,
# ITL: `IterationStats`, with the token counters) or on a finished request (e2e, TPOT:
# `FinishedRequestStats`, with `request_success_total`), and sets `cache_config_info` once at start-up
# (`vllm/v1/metrics/loggers.py`).
_RESTART_PREFIXES = (
    "vllm:generation_tokens_",
    "vllm:spec_decode_num_drafts_",
    "vllm:prompt_tokens_total",
    "vllm:request_success_total",
)

Mode = Literal["unprobed", "filtered", "full"]


class FilterRefused(Exception):
    """The filtered path answered something other than a 200 (404, 405, a 5xx...): `str()` says which."""


Fetch = Callable[[str], Awaitable[str]]
"""GET a path (`FULL_PATH` or `filter_path(...)`) → the text of a 200. Raises `FilterRefused` for
another status on a filtered path, the client's own errors otherwise."""


def filter_path(names: Iterable[str]) -> str:
    """`/metrics/?name%5B%5D=…&…`: prometheus_client's ASGI app under vLLM's `/metrics` mount."""
    return "/metrics/?" + "&".join("name%5B%5D=" + quote(n, safe="") for n in names)


def sample_names(text: str) -> set[str]:
    """The sample names of exposition text (comments skipped), without parsing values or labels."""
    out: set[str] = set()
    add = out.add
    for line in text.split("\n"):
        line = line.lstrip()
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        space = line.find(" ")
        cut = brace if brace >= 0 and (space < 0 or brace < space) else space
        add(line[:cut] if cut >= 0 else line)
    return out


@dataclass(frozen=True, slots=True)
class ScrapeFilter:
    """How a client scrapes vLLM through the filter."""

    slow: bool = True
    """Ask the slow tier (histograms, cache config) too; the fleet's rows need only the hot one."""
    slow_interval_s: float = SLOW_INTERVAL_S
    """The slow tier's age at most (seconds)."""
    idle_hot_interval_s: float = IDLE_HOT_INTERVAL_S
    """The hot answer's age at most while an idle server gets the activity tier (seconds); 0: the
    hot tier at every scrape."""
    once: bool = False
    """One-off scrapes (`snapshot`): one filtered request for every name, no probe."""


@dataclass(frozen=True, slots=True)
class ScrapeState:
    """How the last scrape was made, for the panel's source line and `snapshot --json`."""

    mode: Mode = "unprobed"
    reason: str = ""
    """Why the full page: 'filter ignored', 'filtered answer empty: several API servers?', 'filter refused:
    404 Not Found', 'not vLLM', ...; '' for a filtered scrape."""
    bytes: int = 0
    """Bytes of the last scrape's answers together (hot + slow when the slow tier was fetched)."""
    hot_bytes: int = 0
    """Bytes of the last hot answer (filtered mode)."""
    slow_bytes: int = 0
    """Bytes of the newest slow answer (filtered mode)."""
    full_bytes: int = 0
    """Bytes of the last full page seen (the probe's, or every scrape's in full mode)."""
    idle_bytes: int = 0
    """Bytes of the last activity answer while the server stays idle (through the hot answers it
    still gets every `idle_hot_interval_s` while nothing moves), else 0."""

    @property
    def text(self) -> str:
        """`filtered, 6.7 KB` / `filtered, idle 0.9 KB` / `full page (filter ignored)` / `full page` /
        '' before the first scrape."""
        if self.mode == "filtered":
            if self.idle_bytes:
                return f"filtered, idle {_kb(self.idle_bytes)}"
            return f"filtered, {_kb(self.hot_bytes)}"
        if self.mode == "full":
            return f"full page ({self.reason})" if self.reason else "full page"
        return ""

    def as_json(self) -> dict[str, Any]:
        """The `scrape` block of `snapshot --json`."""
        return {
            "mode": "filtered" if self.mode == "filtered" else "full page",
            "text": self.text,
            "reason": self.reason or None,
            "bytes": self.bytes,
            "hot_bytes": self.hot_bytes or None,
            "slow_bytes": self.slow_bytes or None,
            "full_page_bytes": self.full_bytes or None,
            "idle_bytes": self.idle_bytes or None,
        }


def _kb(n: int) -> str:
    return f"{n / 1000:.1f} KB"


Marks = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _marks(text: str, prefixes: tuple[str, ...] = _RESTART_PREFIXES) -> Marks:
    """(name, labels) → value of the samples of `text` whose line starts with one of `prefixes` (a
    whole name such as one of `ACTIVITY_NAMES` too: a line of it starts with it)."""
    return {(s.name, s.labels): s.value for s in parse_samples(text, prefixes)}


_IDLE_GAUGES = frozenset({"vllm:num_requests_running", "vllm:num_requests_waiting"})


def _restarted(before: Marks, after: Marks) -> bool:
    """`rates.is_restart`'s rule on the restart samples: a `_created` changed or a `_total` went down."""
    for key, value in after.items():
        old = before.get(key)
        if old is not None and (value < old or (key[0].endswith("_created") and value != old)):
            return True
    return False


def _judge(text: str, asked: frozenset[str], expected: frozenset[str] | None) -> str:
    """'' when `text` is an honoured filtered answer to `asked`, else why not (a few words). `expected`:
    the probe's asked ∩ full page (exact match); None: the per-answer rule (module docstring)."""
    got = sample_names(text)
    if not got:
        return "filtered answer empty: several API servers?"
    if not got <= asked:
        return "filter ignored"
    missing = (expected if expected is not None else REQUIRED_NAMES & asked) - got
    return f"filter answered without {min(missing)}" if missing else ""


class TieredScraper:
    """One server's scrapes through the filter: `scrape()` → the page text to parse; `state` says how."""

    def __init__(
        self,
        fetch: Fetch,
        policy: ScrapeFilter | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self.policy = policy or ScrapeFilter()
        self._clock = clock
        self._hot_names = frozenset(HOT_NAMES)
        self._slow_names = frozenset(SLOW_NAMES)
        self._hot_path = filter_path(HOT_NAMES)
        self._slow_path = filter_path(SLOW_NAMES)
        self._all_path = filter_path(ALL_NAMES)
        self._all_names = frozenset(ALL_NAMES)
        self.state = ScrapeState()
        self._slow_text = ""
        self._slow_t = 0.0
        self._marks: Marks = {}
        self._slow_marks: Marks = {}
        """The restart samples when the slow tier was fetched: unchanged = the same slow tier."""
        self._activity_names = frozenset(ACTIVITY_NAMES)
        self._activity_path = filter_path(ACTIVITY_NAMES)
        self._hot_text = ""
        self._hot_t = 0.0
        self._eof = ""
        """`# EOF` when the filtered answers are OpenMetrics: the page they make ends with one."""
        self._quiet: Marks | None = None
        """The activity samples of the last hot answer when it showed an idle server, else None."""
        self.probes = 0
        """Probes made (tests and the benchmark read it)."""

    def reset(self) -> None:
        """Probe again at the next scrape (which sets every tier's state afresh)."""
        self.state = ScrapeState(full_bytes=self.state.full_bytes)

    async def scrape(self, *, fresh: bool = False) -> str:
        """The page text of one scrape (a full page, or the newest hot + slow answers). Raises whatever
        `fetch` raises but `FilterRefused` (the full page); the next scrape after a failure probes again."""
        try:
            if self.policy.once:
                return await self._once()
            if self.state.mode == "filtered":
                text = await self._filtered(fresh)
                if text is not None:
                    return text
            # `_filtered` gave up after a bad answer (mode "full") or saw a restart (probe)
            if self.state.mode == "full":
                return await self._full()
            return await self._probe()
        except BaseException:
            self.reset()
            raise

    async def _get_filtered(self, path: str) -> tuple[str, str]:
        """(text, '') or ('', why the filter was refused)."""
        try:
            return await self._fetch(path), ""
        except FilterRefused as exc:
            return "", f"filter refused: {exc}" if str(exc) else "filter refused"

    async def _once(self) -> str:
        text, refused = await self._get_filtered(self._all_path)
        why = refused or _judge(text, self._all_names, None)
        if not why:
            self.state = ScrapeState("filtered", "", len(text), len(text), 0, 0)
            return text
        if why == "filter ignored" and (schema := detect_schema(text)) != "none":
            why = "not vLLM" if schema == "llamacpp" else why
            self.state = ScrapeState("full", why, len(text), 0, 0, len(text))
            return text  # the whole page already: no second request
        page = await self._fetch(FULL_PATH)
        why = "not vLLM" if detect_schema(page) == "llamacpp" else _openmetrics_why(page, why)
        self.state = ScrapeState("full", why, len(page), 0, 0, len(page))
        return page

    def _give_up(self, why: str) -> None:
        """A later answer was not an honoured one: the full page from now on (module docstring)."""
        self.state = ScrapeState("full", why, 0, 0, 0, self.state.full_bytes)

    async def _full(self) -> str:
        page = await self._fetch(FULL_PATH)
        marks = _marks(page)
        if _restarted(self._marks, marks):
            self.reset()  # a restart: is it still the server that ignored the filter? probe next time
        else:
            self.state = ScrapeState("full", self.state.reason, len(page), 0, 0, len(page))
        self._marks = marks
        return page

    async def _probe(self) -> str:
        self.probes += 1
        page = await self._fetch(FULL_PATH)
        self._marks = _marks(page)
        schema = detect_schema(page)
        on_page = frozenset(sample_names(page)) if schema == "vllm" else frozenset()
        hot = slow = ""
        if schema != "vllm":
            why = "not vLLM" if schema == "llamacpp" else "no vLLM families"
        elif not on_page >= REQUIRED_NAMES:
            why = "no vLLM stats on the page"
        else:
            hot, why = await self._get_filtered(self._hot_path)
            why = why or _judge(hot, self._hot_names, self._hot_names & on_page)
            if not why and self.policy.slow:
                slow, why = await self._get_filtered(self._slow_path)
                expected = self._slow_names & on_page
                # a server without any slow family (none of them exported) answers empty: fine
                if not why and (expected or slow.strip()):
                    why = _judge(slow, self._slow_names, expected)
            why = _openmetrics_why(page, why) if why else ""
        if why:
            self.state = ScrapeState("full", why, len(page), 0, 0, len(page))
            return page
        self._eof = _EOF if is_openmetrics(hot) else ""
        self._slow_text, self._slow_t = _terminated(slow), self._clock()
        self._slow_marks = _marks(hot)
        self._took_hot(hot, self._slow_t)
        self.state = ScrapeState("filtered", "", len(page), len(hot), len(slow), len(page))
        return page

    def _took_hot(self, hot: str, now: float) -> None:
        self._hot_text, self._hot_t = _terminated(hot), now
        marks = _marks(hot, ACTIVITY_NAMES)
        # idle: nothing running or waiting on any engine (and the gauges there to say so)
        gauges = [v for (name, _), v in marks.items() if name in _IDLE_GAUGES]
        self._quiet = marks if gauges and not any(gauges) else None

    def _idle_due(self, fresh: bool, now: float) -> bool:
        """Ask the activity tier, not the hot one; only once the slow tier was fetched after the last
        activity (else the hot path fetches it when due: an idle server's page is then current)."""
        if self._quiet is None or fresh or now - self._hot_t >= self.policy.idle_hot_interval_s:
            return False
        return not self.policy.slow or self._slow_marks == self._marks

    async def _idle(self) -> str | None:
        """On a server whose last hot answer showed it idle: the activity tier. The page (that hot
        answer + the slow tier) when nothing moved; '' when something did (ask the hot tier now);
        None for a bad answer (`_give_up`)."""
        act, why = await self._get_filtered(self._activity_path)
        why = why or _judge(act, self._activity_names, None)
        if why:
            self._give_up(why)
            return None
        if _marks(act, ACTIVITY_NAMES) != self._quiet:
            self._quiet = None
            return ""
        st, size = self.state, len(act)
        self.state = ScrapeState("filtered", "", size, st.hot_bytes, st.slow_bytes, st.full_bytes, size)
        return self._hot_text + self._slow_text + self._eof

    async def _filtered(self, fresh: bool) -> str | None:
        """The newest hot answer + the slow tier (fetched when due); None: a restart (probe now) or
        a bad answer (`_give_up`: the full page now)."""
        now = self._clock()
        if self._idle_due(fresh, now):
            page = await self._idle()
            if page != "":
                return page
        both = self.policy.slow and (fresh or self._slow_due(now))
        answer, why = await self._get_filtered(self._all_path if both else self._hot_path)
        why = why or _judge(answer, self._all_names if both else self._hot_names, None)
        hot, slow = _split(answer, self._slow_names) if both else (answer, "")
        if not why and both and not slow.strip() and self._slow_text:
            why = "filter answered without the slow tier"  # the probe's slow answer had samples
        if why:
            self._give_up(why)
            return None
        marks = _marks(hot)
        if _restarted(self._marks, marks):
            return None
        self._marks = marks
        was_quiet = self._quiet
        self._took_hot(hot, now)
        size = len(answer)
        if self.policy.slow and not both and self._slow_due(now):
            # the first answer of a busy spell: the slow tier is due only now that this one moved
            slow, why = await self._get_filtered(self._slow_path)
            if not why:
                # an empty slow answer is honoured only where the probe's was empty too
                why = _judge(slow, self._slow_names, None) if slow.strip() or self._slow_text else ""
            if why:
                self._give_up(why)
                return None
            both, size = True, size + len(slow)
        slow_bytes = self.state.slow_bytes
        if both:
            self._slow_text, self._slow_t = _terminated(slow), now
            self._slow_marks = marks
            slow_bytes = len(slow)
        # the hot answer an idle server gets every `idle_hot_interval_s` keeps the idle line, so
        # the source line does not flip between two texts every 2 s while nothing moves
        idle_bytes = self.state.idle_bytes if was_quiet is not None and self._quiet == was_quiet else 0
        self.state = ScrapeState(
            "filtered", "", size, len(hot), slow_bytes, self.state.full_bytes, idle_bytes
        )
        return _terminated(hot) + self._slow_text + self._eof

    def _slow_due(self, now: float) -> bool:
        """The slow tier's rule (module docstring), asked before a scrape and after a hot-only answer."""
        return now - self._slow_t >= self.policy.slow_interval_s and self._marks != self._slow_marks


def _openmetrics_why(page: str, why: str) -> str:
    """Why the full page, on vLLM's Rust frontend (an OpenMetrics page) saying so and how a restart shows."""
    return f"OpenMetrics, {why}; restarts: counters going down" if is_openmetrics(page) else why


def _split(text: str, slow: frozenset[str]) -> tuple[str, str]:
    """An answer to both tiers → (its hot families, its slow families). Exposition text is a run of
    families (`# HELP`/`# TYPE` lines, then samples) and no family has samples in both tiers (the
    histograms' `_sum`/`_count`, `cache_config_info`), so each goes whole to its first sample's tier."""
    hot_parts: list[str] = []
    slow_parts: list[str] = []
    family: list[str] = []
    tier: list[str] | None = None
    for line in text.splitlines(keepends=True):
        if line.startswith("#"):
            if tier is not None:  # the comments of the next family
                tier.extend(family)
                family, tier = [], None
            family.append(line)
            continue
        if tier is None and line.strip():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            tier = slow_parts if name in slow else hot_parts
        family.append(line)
    (tier if tier is not None else hot_parts).extend(family)
    return "".join(hot_parts), "".join(slow_parts)


_EOF = "# EOF\n"


def _terminated(text: str) -> str:
    """`text` ending with a newline, without an OpenMetrics `# EOF`: answers are joined into one page,
    which gets one `# EOF` at its end (`TieredScraper._eof`)."""
    if is_openmetrics(text):
        text = text[: text.rfind("# EOF")]
    return text if not text or text.endswith("\n") else text + "\n"
