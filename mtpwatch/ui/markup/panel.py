"""A server panel's lines: header, key numbers, per-position bars, verdict, prompt summaries, start-up.

The wide layout gives every number its own labelled line (`render_numbers`). At 80 columns the
same figures share two to four lines (four: k = 8 and a three-digit tok/s, `compact_numbers`),
packed by `ui.pack`, so that the screen's edge cuts no label off: `(server, 10 s, engine-wide)`,
`(server, 10 s)`, `(analytic)`, `(server, now)` (`as of 15 s ago` when not current). At 80×24 an
A/B pane has no row to spare: there the gauges (KV, running, waiting) go to the panel's bottom
border (`render_gauges`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from textual.markup import escape

from mtpwatch.core.metrics.formulas import EOS_OVERCOUNT
from mtpwatch.render.numbers import MISSING, fixed, missing, ms, percent
from mtpwatch.session.views import PromptSummary, ServerView, StartupView, dynamic_k, spec_label, window_words
from mtpwatch.ui.markup.roofline import bandwidth_figure, render_bandwidth_short
from mtpwatch.ui.pack import SEP, Group, cell_width, fit, pack, wrap

EOS_ISSUE = "vllm#56101"
"""The upstream issue a summary's over-counted mean length points to (`formulas.EOS_OVERCOUNT`)."""


def spaced_percent(fraction: float | None) -> str:
    """The panels' percentages: whole and spaced (`62 %`), through the one formatter."""
    return percent(fraction, 0, style="spaced")


def ms_per(x: float | None, per: str = "") -> str:
    """Milliseconds with their unit and what they are per (`12.3 ms/step`); `—` when missing."""
    return MISSING if missing(x) else ms(x, unit=True) + per


STATUS_STYLE: dict[str, str] = {
    "up": "$success",
    "starting": "$warning",
    "connecting": "$warning",
    "down": "$error",
    "failed": "$error",
    "stopped": "$text-muted",
}


VERDICT_STYLE: dict[str, str] = {
    "good": "$text-success",
    "info": "$text-muted",
    "warn": "$text-warning",
    "bad": "$text-error",
}


def render_header(view: ServerView, *, compact: bool = False, width: int | None = None) -> str:
    """Server, model, version, k and connection status: two lines (one when compact). Narrower than
    the lines (an A/B pane at 160 columns): the first wraps before the scrape, and the second keeps
    the server log's facts that fit, then says how many it leaves out (`_facts_that_fit`)."""
    style = STATUS_STYLE[view.status]
    status = f"[{style}]● {view.status}[/]"
    detail = f"[{style}]{escape(view.status_detail)}[/]" if view.status_detail else ""
    if detail and not compact:
        status += " " + detail
    model = escape(view.model or "model ?")
    if len(view.models) > 1:
        model += f" [dim](1 of {len(view.models)} served)[/]"
    llama = view.engine == "llama.cpp"
    if view.speculative is False:
        spec = "[$text-warning]speculation off[/]"
    elif llama and (view.k is not None or view.method):
        spec = f"{escape(view.method or 'spec')} k≤{view.k or '?'}"
    elif view.speculative is None and view.k is None:
        spec = "k ?"
    else:
        spec = spec_label(view.method, view.k)
    name = "llama.cpp" if llama else "vLLM"
    version = f"{name} {escape(view.version)}" if view.version else f"{name} ?"
    restarts = f" · [$text-warning]{view.restarts} restart(s)[/]" if view.restarts else ""
    if compact:  # the detail (why, since when, next retry) gets its own line
        # The status first: a narrow border title cuts its end, and the model name can be long.
        return f"{status}{restarts} · {spec} · {model}" + (f"\n{detail}" if detail else "")
    scrape = f"[dim]scrape: {escape(view.scrape)}[/]" if view.scrape else ""
    head = f"{escape(view.url)} · {status}{restarts}"
    line1 = fit(head + (f" · {scrape}" if scrape else ""), width, lambda: [Group((head,)), Group((scrape,))])
    line2 = f"{model} · {version} · {spec}"
    full = line2 + (" · [dim]" + escape(" · ".join(view.facts)) + " (server log)[/]" if view.facts else "")
    return f"{line1}\n{fit(full, width, lambda: _facts_that_fit(line2, view.facts, width))}"


def _facts_that_fit(line: str, facts: Sequence[str], width: int | None) -> list[Group]:
    for shown in range(len(facts) - 1, -1, -1):
        items = [f"[dim]{escape(fact)}[/]" for fact in facts[:shown]] + [
            f"[dim]+{len(facts) - shown} more[/]"
        ]
        groups = [Group((line,)), Group(tuple(items), "[dim](server log)[/]")]
        if width is None or cell_width(pack(groups, None)) <= width:
            return groups
    return [Group((line,))]


def as_of(view: ServerView) -> str:
    """', as of 15 s ago' after a label's window when the numbers are not current (the server is
    down, or its last scrape is old: `ServerView.as_of_s`); '' while they are."""
    return "" if view.as_of_s is None else f", as of {view.as_of_s:.0f} s ago"


def gauges_label(view: ServerView) -> str:
    """The gauges' label: `(server, now)`, or `(server, as of 15 s ago)` when not current."""
    if view.as_of_s is None:
        return "[dim](server, now)[/]"
    return f"[$text-warning](server, as of {view.as_of_s:.0f} s ago)[/]"


def render_numbers(view: ServerView, width: int | None = None) -> str:
    """The key numbers, each with its source and window; what the engine does not export says why.
    A line wider than `width` takes shorter words (`accept`, `len`) and wraps between numbers, each
    part with its label (`_line`). 80 columns: `compact_numbers`."""
    w = window_words(view.window) + as_of(view)
    src = f"[dim](server, {w}, {view.scope})[/]"
    notes = view.notes
    draft = f" [dim]({escape(view.draft_note)})[/]" if notes and view.draft_note else ""
    if view.speculative is False:
        off = (
            "— [dim](speculation off)[/]" if notes else "[dim]— (no spec-decode counters: speculation off)[/]"
        )
        acc = _line(("acceptance " + off,), "", width, ("acceptance —",), "[dim](speculation off)[/]")
    else:
        drafts = () if view.drafts is None else (f"{view.drafts:,.0f} drafts",)
        rate, length = spaced_percent(view.acceptance_rate), fixed(view.mean_acceptance_length, 2)
        items = (f"acceptance [b]{rate}[/]", f"mean length [b]{length}[/] tokens/step", *drafts)
        short = (f"accept [b]{rate}[/]", f"len [b]{length}[/]", *drafts)
        acc = _line(_append(items, draft), src, width, _append(short, draft))
        if dynamic_k(view):  # Δdrafts / Δ ITL count (F1 has the formula), and the schedule if set
            drafted: tuple[str, ...] = (f"drafted on [b]{drafted_on(view)}[/] of steps",)
            if view.k_schedule:
                ranges = ", ".join(
                    f"{lo}{f'–{hi}' if hi != lo else ''}: k={k}" for lo, hi, k in view.k_schedule
                )
                drafted = (*drafted, f"k by batch size {escape(ranges)}")
            acc += "\n" + _line(drafted, f"[dim](server, {window_words(view.window)})[/]", width)
    counts = notes.get("counts")
    label = f"[dim](server, {w}, engine-wide" + (f"; {escape(counts)}" if counts else "") + ")[/]"
    tok, steps = fixed(view.server_tok_s, 1), fixed(view.steps_per_s, 1)
    srv = _line(
        (f"server tok/s [b]{tok}[/]", f"steps/s {steps}"),
        label,
        width,
        (f"[b]{tok}[/] tok/s", f"{steps} steps/s"),
    )
    if "latency" in notes:
        lat = _line(("TTFT · TPOT · ITL",), f"[dim]{escape(notes['latency'])}[/]", width)
    else:
        ttft, tpot = ms_per(view.mean_ttft_s), ms_per(view.mean_tpot_s, "/token")
        items = (f"TTFT {ttft}", f"TPOT {tpot}", f"ITL {ms_per(view.mean_step_s, '/step')}")
        lat = _line(items, f"[dim](server, {w})[/]", width)
    kv = (
        f"KV cache [dim]{escape(notes['kv'])}[/]"
        if "kv" in notes
        else f"KV cache {spaced_percent(view.kv_cache_usage)}"
    )
    gauges = (kv, f"running {fixed(view.running, 0)}", f"waiting {fixed(view.waiting, 0)}")
    return "\n".join([acc, srv, lat, _line(gauges, gauges_label(view), width)])


def _append(items: tuple[str, ...], tail: str) -> tuple[str, ...]:
    """`items` with `tail` added to the last one."""
    return (*items[:-1], items[-1] + tail) if tail else items


def _line(
    items: Sequence[str],
    label: str,
    width: int | None,
    short: Sequence[str] = (),
    short_label: str | None = None,
) -> str:
    """`items · … label` on one line where it fits `width`; else the `short` items (or the same ones)
    with `short_label` (or the same label), packed: wrapped between items, each part labelled."""
    full = SEP.join(items) + (f" {label}" if label else "")
    label2 = label if short_label is None else short_label
    return fit(full, width, lambda: [Group(tuple(short or items), label2)])


def drafted_on(view: ServerView) -> str:
    """The share of steps that drafted, within 0–100 % (`23 %`; `—` when unknown)."""
    share = view.drafted_share
    return spaced_percent(None if share is None else min(max(share, 0.0), 1.0))


def render_verdict(view: ServerView, width: int | None = None) -> str:
    """The verdict, wrapped to `width` (empty when there is nothing to say yet)."""
    if not view.verdict:
        return ""
    style = VERDICT_STYLE[view.verdict_level]
    return "\n".join(f"[{style}]{escape(line)}[/]" for line in wrap(view.verdict, width))


def render_bars(
    marginal: Sequence[float],
    conditional: Sequence[float | None],
    *,
    width: int = 20,
    window: str = "",
    columns: int | None = None,
    mixed: bool = False,
) -> str:
    """One bar per draft position: `pos 1 ██████▌     62 %  cond 62 %` (marginal bar, conditional beside).
    `width` is the bars' (cells at 100 %); a heading wider than `columns` takes shorter words.
    `mixed`: steps drafted different lengths, so every position's denominator (Δnum_drafts) counts
    drafts too short to reach it (`views.mixed_lengths`): a note says so."""
    scope = f"(server, {window_words(window)})" if window else "(server)"
    where = f"[dim]{scope}[/]"
    if not marginal:
        full = f"per-position acceptance [dim]— no drafts in the window {scope}[/]"
        return fit(
            full,
            columns,
            lambda: [Group(("per-position acceptance —", "[dim]no drafts in the window[/]"), where)],
        )
    eighths = " ▏▎▍▌▋▊▉█"
    heading = f"per-position acceptance [dim]bar: marginal · cond: given the previous {scope}[/]"
    legend = ("[dim]marginal[/]", "[dim]cond: given previous[/]")
    lines = [fit(heading, columns, lambda: [Group(("per-position acceptance",), where), Group(legend)])]
    if mixed:
        note = "[dim]denominator Δnum_drafts mixes draft lengths: later positions read low[/]"
        lines.append(fit(note, columns, lambda: [Group(("[dim]denominator mixes draft lengths[/]",))]))
    digits = len(str(len(marginal)))  # `pos  9` over `pos 10`: the bars start in one column
    for i, value in enumerate(marginal):
        v = min(max(value, 0.0), 1.0)
        whole, rem = divmod(round(v * width * 8), 8)
        bar = "█" * whole + (eighths[rem] if rem else "")
        cond = conditional[i] if i < len(conditional) else None
        value_pct, cond_pct = spaced_percent(value), spaced_percent(cond)
        lines.append(f"pos {i + 1:>{digits}} [$accent]{bar:<{width}}[/] {value_pct:>5} · cond {cond_pct:>5}")
    return "\n".join(lines)


def render_summary(n: int, s: PromptSummary, *, compact: bool = False, width: int | None = None) -> str:
    """One line per finished prompt: tokens, TTFT, decode tok/s (client), acceptance and scope (server).

    Compact (80 columns, or a row narrower than `SUMMARY_FULL_CELLS` or the line): the numbers in 78
    cells (TTFT in whole ms, `acc` and its scope, no length; "cancelled" first, where the cut does
    not reach it); where even that is wider than `width` (a 56-cell A/B pane at 120 columns), two
    lines, wrapped between its client and server parts, each with its label.
    """
    if s.error:
        return f"#{n} [$text-error]{escape(s.error)}[/]"
    approx = "≈" if s.approximate else ""
    if compact:
        head = f"#{n} [$text-warning]cancelled[/] · " if s.cancelled else f"#{n} "
        ttft = "—" if s.ttft_s is None else f"{1000 * s.ttft_s:.0f} ms"
        groups = [
            Group(
                (f"{head}{approx}{s.tokens} tok", f"TTFT {ttft}", f"[b]{fixed(s.decode_tok_s, 1)}[/] tok/s"),
                "[dim](client)[/]",
            )
        ]
        if s.eos_overcount is not None:
            groups.append(Group((f"[$text-warning]len over-counted: {EOS_ISSUE}[/]",)))
        if s.acceptance_rate is not None:  # its scope, not the length, fits: the numbers line has both
            # "request" or "engine" (engine-wide): the whole label fits 78 cells at 999 tokens, 999 tok/s
            scope = "request" if s.scope.startswith("this request") else s.scope.removesuffix("-wide")
            groups.append(
                Group((f"acc {spaced_percent(s.acceptance_rate)}",), f"[dim](server, {escape(scope)})[/]")
            )
        line = pack(groups, None)
        if width is not None and cell_len(line) > width and cell_width(line) > width:
            return pack(groups, width)
        return line
    acc = ""
    if s.acceptance_rate is not None or s.mean_acceptance_length is not None:
        acc = (
            f" · accept {spaced_percent(s.acceptance_rate)} · len {fixed(s.mean_acceptance_length, 2)} "
            f"[dim](server, {s.scope})[/]"
        )
    if s.eos_overcount is not None and s.client_tokens_per_step is not None:
        acc += (
            f" · [$text-warning]len > {s.client_tokens_per_step:.2f} tokens/step received: {EOS_OVERCOUNT}[/]"
        )
    tail = " · [$text-warning]cancelled[/]" if s.cancelled else ""
    full = (
        f"#{n} {approx}{s.tokens} tok · TTFT {ms_per(s.ttft_s)} · "
        f"decode [b]{fixed(s.decode_tok_s, 1)}[/] tok/s [dim](client)[/]{acc}{tail}"
    )
    # The form follows the row's width, not this line's length: A's line (no acceptance) and B's
    # in panes of one width read alike.
    if width is not None and (
        width < SUMMARY_FULL_CELLS or (cell_len(full) > width and cell_width(full) > width)
    ):
        return render_summary(n, s, compact=True, width=width)
    return full


SUMMARY_FULL_CELLS = 108
"""A row narrower than this takes the compact summary: the full one with every part at its widest
(999 tokens, TTFT 9999.0 ms, 999.9 tok/s, accept 100 %, len 9.99, "(server, this request)")."""


def render_startup(view: StartupView) -> str:
    """The start-up pane's phase line (and facts), or the failure with its hint."""
    if view.error is not None:
        hint = f"\n[$warning]hint: {escape(view.hint)}[/]" if view.hint else ""
        return f"[$error]failed: {escape(view.error)}[/]" + hint
    line = f"[b]{escape(view.phase)}[/] · {view.elapsed_s:.1f} s since start"
    facts = " · ".join(view.facts)
    return line + (f"\n[dim]{escape(facts)}[/]" if facts else "")


ANSWERS_HINT = "[dim]answers and a summary line per prompt appear here[/]"


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
            # `pos 76 47 22 %`: marginal acceptance, % per draft position
            pos = " ".join(f"{100 * min(max(v, 0.0), 1.0):.0f}" for v in view.per_position)
            items.append(f"pos [b]{pos}[/] %" if pos else "pos —")
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
            if pack(shared, width).count("\n") < pack(groups, width).count("\n"):
                groups = shared
    if gauges:
        groups.append(Group(_gauges(view, short=True), gauges_label(view)))
    return pack(groups, width)


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
