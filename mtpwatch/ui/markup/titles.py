"""Title bars and status lines of the monitor, replay and fleet screens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.markup import escape

from mtpwatch.session.views import ServerView, method_name, spec_label, window_words
from mtpwatch.ui.pack import cell_width


def render_pane_title(label: str, view: ServerView | None, *, starts_server: bool) -> str:
    """A panel's border title: its label, whose method part follows what the server ran. A server
    mtpwatch starts is labelled with what it was told ('B · k=4 · method: vLLM detects'); once its
    start-up log (or the simulator) names the method vLLM chose, that part says it where it differs
    ('B · DFlash k=4'), since vLLM may detect or, before 0.34, rewrite the method
    (`core.launch.specrule`). Attached servers and the baseline keep their label.
    """
    if not starts_server or view is None or not view.method or view.speculative is False:
        return label
    ran = method_name(view.method)
    arm, sep, configured = label.partition(" · ")
    if ran in (configured if sep else label).split():  # it already says so ('B · MTP on')
        return label
    return f"{arm} · {spec_label(view.method, view.k)}" if sep else f"{ran} on"


def render_title(
    window: str,
    *,
    title: str,
    schedule: str | None,
    paused: bool,
    demo_sent: int | None,
    suggest: bool,
    width: int | None = None,
    waiting: tuple[str, ...] = (),
    queued: bool = False,
) -> str:
    """The monitor's title bar: the window first (it qualifies every number), A/B schedule, paused,
    the self-running demo, a prompt waiting for `waiting` (the arms not up yet) or the suggested
    prompt, the app title, keys; `fit_title` to `width`."""
    parts = [f"window [b]{window_words(window)}[/]"]
    short: dict[str, str] = {}
    if schedule is not None:
        parts.append(f"A/B {schedule}")
        short[parts[-1]] = ""
    if paused:
        parts.append("[$warning reverse] PAUSED — display frozen, collection continues [/]")
        short[parts[-1]] = "[$warning reverse] PAUSED [/]"
    if demo_sent is not None:
        parts.insert(0, f"[b $accent]self-running demo[/] [dim](prompt {demo_sent})[/]")
        short[parts[0]] = f"[b $accent]self-running[/] [dim]#{demo_sent}[/]"
    elif queued and waiting:
        parts.insert(0, f"[b $warning]prompt waiting for {and_list(waiting)}[/] [dim](Esc cancels)[/]")
        short[parts[0]] = f"[b $warning]waiting for {and_list(waiting)}[/]"
    elif suggest:
        once = f" once {and_list(waiting)} {'is' if len(waiting) == 1 else 'are'} up" if waiting else ""
        parts.insert(0, f"[b $accent]Enter[/] sends the suggested prompt{once}")
        short[parts[0]] = f"[b $accent]Enter[/] sends it{once}"
    parts.append(f"[b]{escape(title)}[/]")
    parts.append("[dim]? or F1 help · Ctrl+Q quit[/]")
    return fit_title(parts, width, short)


def and_list(names: tuple[str, ...]) -> str:
    """'A', 'A and B', 'A, B and C' (markup: the names escaped)."""
    return escape(names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1])


def fit_title(parts: list[str], width: int | None, short: Mapping[str, str]) -> str:
    """`parts` joined, in `width` cells where it can: closer separators, then without the keys (the
    footer shows them), then each part in `short` in its short form ("" drops it), in order; what is
    still wider is cut at the end by the bar. Without a width (tests, wide bars): all of it."""
    line = "  ·  ".join(parts)
    if width is None or cell_width(line) <= width:
        return line
    current = [p for p in parts if not p.startswith(("[dim]? or F1 help", "[dim]? help"))]
    steps = [current]
    for part, shorter in short.items():
        current = [shorter if p == part else p for p in current]
        steps.append(current)
    for candidate in steps:
        line = " · ".join(p for p in candidate if p)
        if cell_width(line) <= width:
            break
    return line


def render_replay_title(
    player: tuple[str, str, str, str], window: str, *, title: str, paused: bool, width: int | None = None
) -> str:
    """The replay's title bar: the player (state, position, length, speed: '▶ replay 00:12.0 /
    01:30.0 · 1×'), window, title, keys; `fit_title` to `width` (the player without its word)."""
    state, elapsed, total, speed = player
    parts = [f"[b]{state} replay {elapsed}[/] / {total} · {speed}", f"window [b]{window_words(window)}[/]"]
    short = {parts[0]: f"[b]{state} {elapsed}[/]/{total} {speed}"}
    if paused:
        parts.append("[$warning reverse] PAUSED display [/]")
    parts.append(f"[b]{escape(title)}[/]")
    parts.append("[dim]? help · Ctrl+Q quit[/]")
    return fit_title(parts, width, short)


def render_fleet_title(window_s: float, sort: str, *, reverse: bool, source: str) -> str:
    """The fleet's title bar: window, sort, where the rows come from, keys."""
    parts = [
        f"window [b]{window_s:g} s[/] (engine-wide)",
        f"sorted by [b]{sort}[/]{' ↑' if reverse else ''}",
        f"[b]fleet[/] · {escape(source)}",
        "[dim]Enter opens a row · F1 help · Ctrl+Q quit[/]",
    ]
    return "  ·  ".join(parts)


def render_fleet_status(
    error: str,
    marked: Sequence[str],
    cycle_ms: float | None,
    up: int,
    rows: int,
    *,
    notes: Sequence[str] = (),
) -> str:
    """The fleet's status line: an error, the outliers, how scraping keeps up, rows answering, and
    notes (a widened window, a short history, a slow store, what a refresh asked)."""
    parts = []
    if error:
        parts.append(f"[$error]{escape(error)}[/]")
    if marked:
        parts.append(f"[$error b]⚠ outliers:[/] {escape(', '.join(marked))}")
    else:
        parts.append("[dim]no outliers[/]")
    if cycle_ms is not None:
        parts.append(f"[dim]scrape cycle {cycle_ms:.0f} ms (median of the last 40)[/]")
    parts.append(f"[dim]{up}/{rows} rows answering · rule: F1[/]")
    parts += [f"[$warning]{escape(n)}[/]" for n in notes]
    return "  ·  ".join(parts)
