"""A server panel's lines: header, key numbers, per-position bars, verdict, prompt summaries, start-up."""

from __future__ import annotations

from collections.abc import Sequence

from textual.markup import escape

from mtpwatch.render.numbers import MISSING, fixed, missing, ms, percent
from mtpwatch.session.views import (
    PromptSummary,
    ServerView,
    StartupView,
    spec_label,
    window_words,
)
from mtpwatch.ui.pack import wrap


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


def render_header(view: ServerView, *, compact: bool = False) -> str:
    """Server, model, version, k and connection status: two lines (one when compact)."""
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
    scrape = f" · [dim]scrape: {escape(view.scrape)}[/]" if view.scrape else ""
    line1 = f"{escape(view.url)} · {status}{restarts}{scrape}"
    line2 = f"{model} · {version} · {spec}"
    if view.facts:
        line2 += " · [dim]" + escape(" · ".join(view.facts)) + " (server log)[/]"
    return f"{line1}\n{line2}"


def render_numbers(view: ServerView) -> str:
    """The key numbers, each with its source and window; what the engine does not export says why.

    80 columns: `ui.markup.compact.compact_numbers`.
    """
    w = window_words(view.window)
    src = f"[dim](server, {w}, {view.scope})[/]"
    notes = view.notes
    if notes:
        return _render_numbers_missing(view, w, src)
    if view.speculative is False:
        acc = "acceptance [dim]— (no spec-decode counters: speculation off)[/]"
    else:
        drafts = "" if view.drafts is None else f" · {view.drafts:,.0f} drafts"
        acc = (
            f"acceptance [b]{spaced_percent(view.acceptance_rate)}[/] · "
            f"mean length [b]{fixed(view.mean_acceptance_length, 2)}[/] tokens/step{drafts} {src}"
        )
    srv = (
        f"server tok/s [b]{fixed(view.server_tok_s, 1)}[/] · steps/s {fixed(view.steps_per_s, 1)} "
        f"[dim](server, {w}, engine-wide)[/]"
    )
    lat = (
        f"TTFT {ms_per(view.mean_ttft_s)} · TPOT {ms_per(view.mean_tpot_s, '/token')} · "
        f"ITL {ms_per(view.mean_step_s, '/step')} [dim](server, {w})[/]"
    )
    kv = (
        f"KV cache {spaced_percent(view.kv_cache_usage)} · running {fixed(view.running, 0)} · "
        f"waiting {fixed(view.waiting, 0)} [dim](server, now)[/]"
    )
    return "\n".join([acc, srv, lat, kv])


def _render_numbers_missing(view: ServerView, w: str, src: str) -> str:
    """`render_numbers` for an engine without latency histograms or a KV gauge (llama.cpp)."""
    notes = view.notes
    draft = f" [dim]({escape(view.draft_note)})[/]" if view.draft_note else ""
    if view.speculative is False:
        acc = "acceptance — [dim](speculation off)[/]"
    else:
        drafts = "" if view.drafts is None else f" · {view.drafts:,.0f} drafts"
        acc = (
            f"acceptance [b]{spaced_percent(view.acceptance_rate)}[/] · "
            f"mean length [b]{fixed(view.mean_acceptance_length, 2)}[/] tokens/step{drafts}{draft} {src}"
        )
    counts = notes.get("counts")
    srv = (
        f"server tok/s [b]{fixed(view.server_tok_s, 1)}[/] · steps/s {fixed(view.steps_per_s, 1)} "
        f"[dim](server, {w}, engine-wide" + (f"; {escape(counts)}" if counts else "") + ")[/]"
    )
    if "latency" in notes:
        lat = f"TTFT · TPOT · ITL [dim]{escape(notes['latency'])}[/]"
    else:
        lat = (
            f"TTFT {ms_per(view.mean_ttft_s)} · TPOT {ms_per(view.mean_tpot_s, '/token')} · "
            f"ITL {ms_per(view.mean_step_s, '/step')} [dim](server, {w})[/]"
        )
    kv_line = (
        f"KV cache [dim]{escape(notes['kv'])}[/]"
        if "kv" in notes
        else f"KV cache {spaced_percent(view.kv_cache_usage)}"
    )
    kv_line += f" · running {fixed(view.running, 0)} · waiting {fixed(view.waiting, 0)} [dim](server, now)[/]"
    return "\n".join([acc, srv, lat, kv_line])


def render_positions(marginal: Sequence[float]) -> str:
    """Per-position acceptance in one line: `pos 76 47 22 %` (marginal, % per draft position)."""
    if not marginal:
        return "pos —"
    return "pos [b]" + " ".join(f"{100 * min(max(v, 0.0), 1.0):.0f}" for v in marginal) + "[/] %"


def render_verdict(view: ServerView, width: int | None = None) -> str:
    """The verdict, wrapped to `width` (empty when there is nothing to say yet)."""
    if not view.verdict:
        return ""
    style = VERDICT_STYLE[view.verdict_level]
    return "\n".join(f"[{style}]{escape(line)}[/]" for line in wrap(view.verdict, width))


def render_bars(
    marginal: Sequence[float], conditional: Sequence[float | None], *, width: int = 20, window: str = ""
) -> str:
    """One bar per draft position: `pos 1 ██████▌     62 %  cond 62 %` (marginal bar, conditional beside)."""
    where = f"server, {window_words(window)}" if window else "server"
    if not marginal:
        return f"per-position acceptance [dim]— no drafts in the window ({where})[/]"
    eighths = " ▏▎▍▌▋▊▉█"
    lines = [f"per-position acceptance [dim]bar: marginal · cond: given the previous ({where})[/]"]
    for i, value in enumerate(marginal):
        v = min(max(value, 0.0), 1.0)
        full, rem = divmod(round(v * width * 8), 8)
        bar = "█" * full + (eighths[rem] if rem else "")
        cond = conditional[i] if i < len(conditional) else None
        value_pct, cond_pct = spaced_percent(value), spaced_percent(cond)
        lines.append(f"pos {i + 1} [$accent]{bar:<{width}}[/] {value_pct:>5} · cond {cond_pct:>5}")
    return "\n".join(lines)


def render_summary(n: int, s: PromptSummary, *, compact: bool = False) -> str:
    """One line per finished prompt: tokens, TTFT, decode tok/s (client), acceptance and scope (server).

    Compact (80 columns): the numbers in 78 cells (TTFT in whole ms, `acc` and its scope, no length;
    "cancelled" first, where the cut does not reach it).
    """
    if s.error:
        return f"#{n} [$text-error]{escape(s.error)}[/]"
    approx = "≈" if s.approximate else ""
    if compact:
        head = f"#{n} [$text-warning]cancelled[/] · " if s.cancelled else f"#{n} "
        ttft = "—" if s.ttft_s is None else f"{1000 * s.ttft_s:.0f} ms"
        acc = ""
        if s.acceptance_rate is not None:  # its scope, not the length, fits: the numbers line has both
            # "request" or "engine" (engine-wide): the whole label fits 78 cells at 999 tokens, 999 tok/s
            scope = "request" if s.scope.startswith("this request") else s.scope.removesuffix("-wide")
            acc = f" · acc {spaced_percent(s.acceptance_rate)} [dim](server, {escape(scope)})[/]"
        return (
            f"{head}{approx}{s.tokens} tok · TTFT {ttft} · [b]{fixed(s.decode_tok_s, 1)}[/] tok/s "
            f"[dim](client)[/]{acc}"
        )
    acc = ""
    if s.acceptance_rate is not None or s.mean_acceptance_length is not None:
        acc = (
            f" · accept {spaced_percent(s.acceptance_rate)} · len {fixed(s.mean_acceptance_length, 2)} "
            f"[dim](server, {s.scope})[/]"
        )
    tail = " · [$text-warning]cancelled[/]" if s.cancelled else ""
    return (
        f"#{n} {approx}{s.tokens} tok · TTFT {ms_per(s.ttft_s)} · "
        f"decode [b]{fixed(s.decode_tok_s, 1)}[/] tok/s [dim](client)[/]{acc}{tail}"
    )


def render_startup(view: StartupView) -> str:
    """The start-up pane's phase line (and facts), or the failure with its hint."""
    if view.error is not None:
        hint = f"\n[$warning]hint: {escape(view.hint)}[/]" if view.hint else ""
        return f"[$error]failed: {escape(view.error)}[/]" + hint
    line = f"[b]{escape(view.phase)}[/] · {view.elapsed_s:.1f} s since start"
    facts = " · ".join(view.facts)
    return line + (f"\n[dim]{escape(facts)}[/]" if facts else "")


ANSWERS_HINT = "[dim]answers and a summary line per prompt appear here[/]"
