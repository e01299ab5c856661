"""A panel's numbers at 80 columns: the headline figures as labelled groups, packed into the width.

The wide layout gives every number its own labelled line (`markup.panel.render_numbers`). At 80 columns
the same figures share two to four lines (four: k = 8 and a three-digit tok/s). They are packed
by `ui.pack`, so that the screen's edge cuts no label off: `(server, 10 s, engine-wide)`,
`(server, 10 s)`, `(analytic)`, `(server, now)` (`as of 15 s ago` when not current). At 80×24 an
A/B pane has no row to spare: there the gauges (KV, running, waiting) go to the panel's bottom
border (`render_gauges`).
"""

from __future__ import annotations

from mtpwatch.render.numbers import fixed
from mtpwatch.session.views import ServerView, dynamic_k, window_words
from mtpwatch.ui.markup.panel import as_of, drafted_on, gauges_label, ms_per, render_positions, spaced_percent
from mtpwatch.ui.markup.roofline import bandwidth_figure, render_bandwidth_short
from mtpwatch.ui.pack import Group, pack


def compact_numbers(view: ServerView, width: int | None, *, gauges: bool = True) -> str:
    """Acceptance (with per-position), server tok/s and ITL, bandwidth, and the gauges unless
    `gauges=False`; each group ends with its source and window on every line it reaches."""
    w = window_words(view.window) + as_of(view)
    notes = view.notes
    if view.speculative is False:
        acc = Group(("acceptance —",), "[dim](speculation off)[/]", new_line=True)
    else:
        items = [
            f"accept [b]{spaced_percent(view.acceptance_rate)}[/]",
            f"len [b]{fixed(view.mean_acceptance_length, 2)}[/]",
        ]
        if not notes:  # an engine with notes (llama.cpp) has no per-position counters
            items.append(render_positions(view.per_position))
        if dynamic_k(view):  # Δdrafts / ΔITL count: a schedule, or steps that did not draft
            items.append(f"drafted [b]{drafted_on(view)}[/]")
        acc = Group(tuple(items), f"[dim](server, {w}, {view.scope})[/]", new_line=True)
    lat = "ITL n/a" if "latency" in notes else f"ITL {ms_per(view.mean_step_s, '/step')}"
    speed = (f"[b]{fixed(view.server_tok_s, 1)}[/] tok/s", lat)
    groups = [acc, Group(speed, f"[dim](server, {w})[/]", new_line=True)]
    if not notes:  # the roofline needs the engine's step counts
        # Without speculation the acceptance line is short: the bandwidth goes there, not to a third line.
        # gauges on the border (80×24): a simulated clock is noted there too, not beside BW
        bw = Group((render_bandwidth_short(view.bandwidth, view.window, clock_noted=not gauges),))
        groups.insert(1 if view.speculative is False else 2, bw)
        figure = bandwidth_figure(view.bandwidth, clock_noted=not gauges)
        if view.speculative is not False and figure is not None and width is not None:
            # 80 columns: the speed line and the bandwidth share one label where that saves a row
            shared = [groups[0], Group((*speed, figure), f"[dim](server + analytic, {w})[/]", new_line=True)]
            if _rows(shared, width) < _rows(groups, width):
                groups = shared
    if gauges:
        groups.append(Group(_gauges(view, short=True), gauges_label(view)))
    return pack(groups, width)


def _rows(groups: list[Group], width: int) -> int:
    return pack(groups, width).count("\n") + 1


def render_gauges(view: ServerView) -> str:
    """The engine's gauges now, for the bottom border: `KV 3 % · running 1 · waiting 0 (server, now)`;
    empty while the server has shown none (starting, down: the panel says so)."""
    if view.kv_cache_usage is None and view.running is None and view.waiting is None:
        return ""
    clock = view.bandwidth.clock_speed  # a simulated clock: `compact_numbers` left its note for here
    note = f" · [$text-warning]sim ×{clock:g} clock[/]" if clock != 1.0 else ""
    return pack([Group(_gauges(view, short=False), gauges_label(view))], None) + note


def _gauges(view: ServerView, *, short: bool) -> tuple[str, ...]:
    kv = "KV n/a" if "kv" in view.notes else f"KV {spaced_percent(view.kv_cache_usage)}"
    running, waiting = fixed(view.running, 0), fixed(view.waiting, 0)
    if short:
        return (kv, f"run {running}", f"wait {waiting}")
    return (kv, f"running {running}", f"waiting {waiting}")
