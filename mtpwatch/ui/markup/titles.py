"""Title bars and status lines of the monitor, replay and fleet screens."""

from __future__ import annotations

from collections.abc import Sequence

from textual.markup import escape

from mtpwatch.session.views import (
    window_words,
)


def render_title(
    window: str,
    *,
    title: str,
    schedule: str | None,
    paused: bool,
    demo_sent: int | None,
    suggest: bool,
    waiting: tuple[str, ...] = (),
    queued: bool = False,
) -> str:
    """The monitor's title bar: the window first (it qualifies every number; narrow terminals cut the
    end), A/B schedule, paused, the self-running demo, a prompt waiting for `waiting` (the arms not
    up yet) or the suggested prompt, the app title, keys."""
    parts = [f"window [b]{window_words(window)}[/]"]
    if schedule is not None:
        parts.append(f"A/B {schedule}")
    if paused:
        parts.append("[$warning reverse] PAUSED — display frozen, collection continues [/]")
    if demo_sent is not None:
        parts.insert(0, f"[b $accent]self-running demo[/] [dim](prompt {demo_sent})[/]")
    elif queued and waiting:
        parts.insert(0, f"[b $warning]prompt waiting for {_names(waiting)}[/] [dim](Esc cancels)[/]")
    elif suggest and waiting:
        parts.insert(
            0, f"[b $accent]Enter[/] sends the suggested prompt once {_names(waiting)} {_are(waiting)} up"
        )
    elif suggest:
        parts.insert(0, "[b $accent]Enter[/] sends the suggested prompt")
    parts.append(f"[b]{escape(title)}[/]")
    parts.append("[dim]? or F1 help · Ctrl+Q quit[/]")
    return "  ·  ".join(parts)


def _names(names: tuple[str, ...]) -> str:
    return escape(names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1])


def _are(names: tuple[str, ...]) -> str:
    return "is" if len(names) == 1 else "are"


def render_replay_title(player: tuple[str, str, str, str], window: str, *, title: str, paused: bool) -> str:
    """The replay's title bar: the player (state, position, length, speed: '▶ replay 00:12.0 /
    01:30.0 · 1×'), window, title, keys."""
    state, elapsed, total, speed = player
    parts = [f"[b]{state} replay {elapsed}[/] / {total} · {speed}", f"window [b]{window_words(window)}[/]"]
    if paused:
        parts.append("[$warning reverse] PAUSED display [/]")
    parts.append(f"[b]{escape(title)}[/]")
    parts.append("[dim]? help · Ctrl+Q quit[/]")
    return "  ·  ".join(parts)


def render_fleet_title(window_s: float, sort: str, *, reverse: bool, source: str) -> str:
    """The fleet's title bar: window, sort, where the rows come from, keys."""
    parts = [
        f"window [b]{window_s:g} s[/] (engine-wide)",
        f"sorted by [b]{sort}[/]{' ↑' if reverse else ''}",
        f"[b]fleet[/] · {escape(source)}",
        "[dim]Enter opens a row · F1 help · Ctrl+Q quit[/]",
    ]
    return "  ·  ".join(parts)


def render_fleet_status(error: str, marked: Sequence[str], cycle_ms: float | None, up: int, rows: int) -> str:
    """The fleet's status line: an error, the outliers, how scraping keeps up, rows answering."""
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
    return "  ·  ".join(parts)
