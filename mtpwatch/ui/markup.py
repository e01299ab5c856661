"""Every function that returns Textual markup: the one place plain text becomes markup and is escaped.

The session layer (`mtpwatch.session`) hands over frozen view models and plain strings
(`session.views.ServerView`, `PromptSummary`, `StartupView`, `session.answers.Answer`, the k
advisor's `Advice`, a measurement's `MeasureUpdate`); the functions here draw them for the widgets
and screens, colour them with the theme's variables, and escape every string that came from a
server, a log or the user.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from textual.markup import escape

from mtpwatch.core.ab import stats
from mtpwatch.core.ab.advisor import Advice
from mtpwatch.core.ab.lossless import compare_outputs as compare_outputs_core
from mtpwatch.core.ab.plan import CONTENDED
from mtpwatch.core.ab.records import RunRecord
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.render.numbers import MISSING, fixed, missing, ms, percent
from mtpwatch.session.answers import Answer
from mtpwatch.session.measure import MeasureUpdate
from mtpwatch.session.views import (
    MTP_SLOWER,
    BandwidthView,
    PromptSummary,
    ServerView,
    StartupView,
    clock_note,
    method_name,
    spec_label,
    window_words,
)
from mtpwatch.ui.pack import Group


def spaced_percent(fraction: float | None) -> str:
    """The panels' percentages: whole and spaced (`62 %`), through the one formatter."""
    return percent(fraction, 0, style="spaced")


def ms_per(x: float | None, per: str = "") -> str:
    """Milliseconds with their unit and what they are per (`12.3 ms/step`); `—` when missing."""
    return MISSING if missing(x) else ms(x, unit=True) + per


def _wrap(text: str, width: int | None) -> list[str]:
    """Plain `text` wrapped to `width` cells (one line when no width is known)."""
    if not width or width < 20:
        return [text]
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


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

    80 columns: `ui.compact.compact_numbers`.
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


def render_positions(marginal: Sequence[float]) -> str:
    """Per-position acceptance in one line: `pos 76 47 22 %` (marginal, % per draft position)."""
    if not marginal:
        return "pos —"
    return "pos [b]" + " ".join(f"{100 * min(max(v, 0.0), 1.0):.0f}" for v in marginal) + "[/] %"


def render_bandwidth_short(bw: BandwidthView) -> str:
    """Bandwidth against the peak in one phrase: `BW 58 % of 273 GB/s (analytic)` (while decoding)."""
    if bw.peak_gbps is None or bw.ceiling_baseline_tok_s is None:
        return "BW — [dim](no model config)[/]" if bw.peak_gbps is not None else "BW — [dim](peak ?)[/]"
    if bw.percent_of_peak is None:
        return f"BW — [dim]of {bw.peak_gbps:.0f} GB/s (idle)[/]"
    text = f"BW [b]{bw.percent_of_peak:.0f} %[/] of {bw.peak_gbps:.0f} GB/s [dim](analytic)[/]"
    if bw.clock_speed != 1.0:  # F1 and the roofline panel say why in full
        text += f" [$text-warning](sim ×{bw.clock_speed:g} clock)[/]"
    elif bw.past_peak:
        text += " [$text-warning](> peak: check --model-config/--gpu)[/]"
    return text


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


def render_verdict(view: ServerView, width: int | None = None) -> str:
    """The verdict, wrapped to `width` (empty when there is nothing to say yet)."""
    if not view.verdict:
        return ""
    style = VERDICT_STYLE[view.verdict_level]
    return "\n".join(f"[{style}]{escape(line)}[/]" for line in _wrap(view.verdict, width))


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


def render_bandwidth(
    bw: BandwidthView, window: str = "", width: int | None = None, *, method: str | None = None
) -> str:
    """Roofline panel: analytic GB/s and % of peak, ceilings, the three terms, summary, hardware line."""
    hardware = f"[dim]{escape(bw.hardware)}[/]" if bw.hardware else ""
    if bw.peak_gbps is None or bw.ceiling_baseline_tok_s is None:
        head = "roofline [dim]— " + escape(bw.note or "no model config known") + "[/]"
        return head + (f"\n{hardware}" if hardware else "")
    w = window_words(window or "10 s")
    gpu = escape(bw.gpu or "GPU ?")
    context = ""
    if bw.context_tokens is not None:
        context = f" · KV context {bw.context_tokens:,} tokens [dim]({escape(bw.context_source)})[/]"
    lines = [f"roofline [dim](analytic, {w})[/]{context}"]
    if bw.effective_gbps is not None:
        lines.append(
            f"bandwidth [b]{bw.effective_gbps:.0f} GB/s[/] = [b]{fixed(bw.percent_of_peak, 0)} %[/] "
            f"of {gpu}'s {bw.peak_gbps:.0f} GB/s peak [dim](analytic, while decoding, {w})[/]"
        )
        note = clock_note(bw)
        if note:  # a figure past the physical peak says why, next to it
            lines.extend(f"[$text-warning]{escape(line)}[/]" for line in _wrap(note, width))
    else:
        lines.append(
            f"bandwidth — [dim](idle: no steps in the window) · {gpu}'s peak {bw.peak_gbps:.0f} GB/s[/]"
        )
    ceiling = f"ceiling baseline [b]{bw.ceiling_baseline_tok_s:.1f}[/] tok/s"
    if bw.k and bw.ceiling_spec_tok_s is not None:
        tau = fixed(bw.tau, 2)
        src = "" if bw.tau_source == "measured" else " [dim](assumed: all drafts accepted)[/]"
        ceiling += f" · {method_name(method)} at τ {tau}{src}: [b]{bw.ceiling_spec_tok_s:.1f}[/] tok/s"
    if bw.tok_s and bw.pct_of_ceiling is not None:
        ceiling += f" · now {bw.tok_s:.1f} tok/s = [b]{bw.pct_of_ceiling:.0f} %[/] of it"
        if bw.past_ceiling:
            ceiling += " [$text-warning](more tokens per step than the window's τ: windows differ)[/]"
    lines.append(ceiling)
    if bw.k and bw.acceptance_term is not None and bw.bandwidth_term is not None:
        terms = []
        for name, label, value in (
            ("acceptance", "acceptance 1+α·k", bw.acceptance_term),
            ("bandwidth", "bandwidth", bw.bandwidth_term),
            ("compute", "compute", bw.compute_term),
        ):
            text = f"{label} {fixed(value, 2)}"
            terms.append(f"[b reverse $accent] {text} [/]" if name == bw.binding else text)
        bound = min(v for v in (bw.acceptance_term, bw.bandwidth_term, bw.compute_term) if v is not None)
        why = ""
        if bw.binding == "acceptance" and bw.bandwidth_term < bw.acceptance_term:
            # The bandwidth term is τ · bytes_0/bytes_k: within 2 % of τ the drafter is effectively free.
            extra = 100.0 * (bw.acceptance_term / bw.bandwidth_term - 1.0)
            why = f" [dim](drafts add {extra:.0f} % bytes)[/]"
        binds = f"[b]{escape(bw.binding)}[/] binds{why}"
        lines.append("speed-up ≤ min(" + " · ".join(terms) + f") = {bound:.2f}× → {binds}")
    elif not bw.k:
        lines.append("[dim]speed-up terms: none (plain decoding, k = 0)[/]")
    if bw.summary:
        lines.extend(f"[i]{escape(line)}[/]" for line in _wrap(bw.summary, width))
    if hardware:
        lines.append(hardware)
    if bw.config_source:
        lines.append(f"[dim]inputs: {escape(bw.config_source)}[/]")
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


def speedup_groups(
    last: float | None,
    median: float | None,
    n: int,
    *,
    race: bool,
    label: str = "B/A",
    slower: bool = False,
    compact: bool = False,
) -> tuple[Group, ...]:
    """The line between A/B panes: decode tok/s ratio (client), last prompt and median, then its
    warnings, as groups for `ui.pack` (a `PackedLine` gives what does not fit a row of its own).

    The figures, their count and their source fit 78 cells when `compact` (`median 2.07× of 3`).
    """
    source = "[dim](decode tok/s, client)[/]"
    if last is None:
        groups = [Group((f"speed-up {label} {source}: — send a prompt",))]
    else:
        count = f"of {n}" if compact else f"over {n} prompt(s)"
        figures = (f"speed-up {label}: last [b]{last:.2f}×[/]", f"median {fixed(median, 2)}× {count}")
        groups = [Group(figures, source)]
    if slower:
        groups.append(Group((f"[$text-warning]{MTP_SLOWER}[/]",)))
    if race:
        groups.append(Group(("[$text-warning]race: contended, not a measurement[/]",)))
    return tuple(groups)


def render_startup(view: StartupView) -> str:
    """The start-up pane's phase line (and facts), or the failure with its hint."""
    if view.error is not None:
        hint = f"\n[$warning]hint: {escape(view.hint)}[/]" if view.hint else ""
        return f"[$error]failed: {escape(view.error)}[/]" + hint
    line = f"[b]{escape(view.phase)}[/] · {view.elapsed_s:.1f} s since start"
    facts = " · ".join(view.facts)
    return line + (f"\n[dim]{escape(facts)}[/]" if facts else "")


def render_lossless(a: Answer, b: Answer, *, lossy: str | None = None) -> str:
    """The lossless line (markup): 'outputs identical' or where A and B first diverge.

    Token ids are compared when both servers sent them, else the texts. `lossy` names a mode of the
    speculating server whose verification does not keep the target's output (`core.ab.engine`:
    vLLM 0.33's `fly`); a difference there is expected, not a bug, and the line says so.
    """
    if a.summary.error or b.summary.error or a.summary.cancelled or b.summary.cancelled:
        return "[dim]lossless check: — (an answer failed or was cancelled)[/]"
    line = _lossless_line(a, b)
    if lossy is None or line.startswith("[$success]"):
        return line
    plain_style = line.replace("[$error]", "[b]").replace("[$warning]", "[b]")  # not a failure here
    return f"[$warning]expected, {escape(lossy)}:[/] {plain_style}"


def _lossless_line(a: Answer, b: Answer) -> str:
    d = compare_outputs_core(a, b)
    if d.compared == "token_ids":
        ids_a, ids_b = a.token_ids or (), b.token_ids or ()
        i = d.token_index
        if i is None:
            return f"[$success]lossless: outputs identical[/] ({len(ids_a)} token ids, temperature 0)"
        if i < min(len(ids_a), len(ids_b)):
            return f"[$error]lossless: outputs differ at token {i + 1}[/] (id {ids_a[i]} vs {ids_b[i]})"
        return f"[$warning]lossless: identical for {i} tokens, then one answer is longer[/]"
    ta, tb = a.text, b.text
    j = d.char_index
    if j is None:
        return f"[$success]lossless: outputs identical[/] ({len(ta)} characters, temperature 0)"
    context = ta[max(0, j - 20) : j].replace("\n", " ")
    return (
        f"[$error]lossless: outputs differ at character {j + 1}[/] after “{escape(context)}”: "
        f"{escape(repr(ta[j : j + 8]))} vs {escape(repr(tb[j : j + 8]))}"
    )


def advice_groups(advice: Advice | None) -> tuple[Group, ...]:
    """The k advisor's groups for the speed-up line, `k advisor: best k=K predicted S× (k=R now T×;
    1 request at a time)`, then its caveat; none when there is nothing to say."""
    if advice is None:
        return ()
    best, now = advice.at(advice.best_k), advice.at(advice.from_k)
    if best is None or now is None:
        return ()
    caveat = (Group((f"[dim]{advice.caveat}[/]",)),) if advice.caveat else ()
    if advice.withheld:
        return (Group(("k advisor: none",)), *caveat)
    if advice.best_k == advice.from_k:
        scope = f"[dim](predicted best of 0…{advice.from_k}, 1 request at a time)[/]"
        return (Group((f"k advisor: keep k={advice.from_k}",), scope), *caveat)
    scope = f"[dim](k={advice.from_k} now {now.speedup:.2f}×; 1 request at a time)[/]"
    return (Group((f"k advisor: [b]k={advice.best_k}[/] predicted {best.speedup:.2f}×",), scope), *caveat)


@dataclass(frozen=True, slots=True)
class MeasureLines:
    """A `MeasureUpdate` drawn: the lines the A/B view shows (markup; empty = unchanged)."""

    line: str = ""
    """The live speed-up line."""
    progress: str = ""
    """The progress line."""
    run_line: str = ""
    """One finished run, for the answer pane of the update's arm."""
    summary: str = ""
    """The final summary line (set on the last update)."""


def render_run(rec: RunRecord, runs_per_prompt: int) -> str:
    """One finished run: 'run 2/3 · 412 tok · decode 31.2 tok/s · accept 62 %' (or its error)."""
    tag = "warm-up" if rec.warmup else f"run {rec.run + 1}/{runs_per_prompt}"
    if rec.error:
        body = f"[$text-error]{escape(rec.error)}[/]"
    else:
        acc = f" · accept {100 * rec.acceptance_rate:.0f} %" if rec.acceptance_rate is not None else ""
        body = f"{rec.tokens} tok · decode [b]{fixed(rec.decode_tok_s, 1)}[/] tok/s{acc}"
    return f"{tag} · {body}" + (" · [dim]contended[/]" if rec.contended else "")


def render_measure(update: MeasureUpdate) -> MeasureLines:
    """The lines of one measurement update."""
    line = summary = ""
    if update.report is not None:
        line = measure_line(update.report, done=update.done, total=update.total)
        if update.summary:
            summary = f"{escape(update.summary)}: " + measure_line(update.report, head=False)
    run_line = render_run(update.run, update.runs_per_prompt) if update.run is not None else ""
    return MeasureLines(line=line, progress=escape(update.progress), run_line=run_line, summary=summary)


def measure_line(report: BenchReport, *, done: int = 0, total: int = 0, head: bool = True) -> str:
    """'speed-up B/A median 2.07× [95 % CI 1.98–2.15] · 11 pairs · CV A 3 % B 4 %' from a `BenchReport`.

    The CV of each arm is the noisiest prompt's run-to-run CV (pooled over prompts when a prompt
    has a single run); above `stats.CV_FLAG` (10 %) it is flagged.
    """
    overall = report.primary.overall
    s = overall.speedup
    source = " [dim](decode tok/s, client, paired runs)[/]" if head else ""
    if s is None:
        text = f"speed-up B/A{source} — waiting for the first pair"
    else:
        ci = s.ci
        # The figures and the pair count first, the source after: an 80-column screen cuts the end.
        text = (
            f"speed-up B/A median [b]{s.median:.2f}×[/] \\[95 % CI {ci.low:.2f}–{ci.high:.2f}] · "
            f"{s.n_pairs} pairs{source}"
        )
    cvs: list[str] = []
    noisy = False
    for name in ("a", "b"):
        arm = overall.arms.get(name)
        if arm is None or arm.rate is None:
            continue
        cv = arm.max_prompt_cv if arm.max_prompt_cv is not None else arm.rate.cv
        noisy = noisy or cv > stats.CV_FLAG
        cvs.append(f"{name.upper()} {100 * cv:.0f} %")
    if cvs:
        text += " · CV " + " ".join(cvs)
    if noisy:
        text += " · [$text-warning]noisy: CV above 10 %, numbers unreliable[/]"
    if total:
        text += f" · [dim]run {done}/{total}[/]"
    if report.contended:
        text += f" · [$text-warning]race: {CONTENDED}[/]"
    if report.interrupted:
        text += f" · [$text-warning]{escape(report.interrupted)}[/]"
    return text


# -- screen lines: title bars, hints, status lines -----------------------------------------------

LOSSLESS_WAITING = "[dim]lossless check (temperature 0): — send a prompt[/]"
LOSSLESS_NEEDS_T0 = "[dim]lossless check needs temperature 0[/]"
PAIRS_WAITING = "speed-up B/A [dim](paired runs)[/] — waiting for the first pair"
RESTART_WAITING = "[dim]waiting: one server at a time (restart schedule)[/]"
ANSWERS_HINT = "[dim]answers and a summary line per prompt appear here[/]"


def render_title(
    window: str, *, title: str, schedule: str | None, paused: bool, demo_sent: int | None, suggest: bool
) -> str:
    """The monitor's title bar: the window first (it qualifies every number; narrow terminals cut the
    end), A/B schedule, paused, the self-running demo or the suggested prompt, the app title, keys."""
    parts = [f"window [b]{window_words(window)}[/]"]
    if schedule is not None:
        parts.append(f"A/B {schedule}")
    if paused:
        parts.append("[$warning reverse] PAUSED — display frozen, collection continues [/]")
    if demo_sent is not None:
        parts.insert(0, f"[b $accent]self-running demo[/] [dim](prompt {demo_sent})[/]")
    elif suggest:
        parts.insert(0, "[b $accent]Enter[/] sends the suggested prompt")
    parts.append(f"[b]{escape(title)}[/]")
    parts.append("[dim]? or F1 help · Ctrl+Q quit[/]")
    return "  ·  ".join(parts)


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


def render_measure_hint(runs: int, warmup: int, *, restart: bool, race: bool) -> str:
    """What F6 (or a prompt, on the restart schedule) measures, under the speed-up line."""
    if restart:
        return (
            f"[dim]restart schedule: a prompt you send is measured {runs}× per arm "
            f"({warmup} warm-up), one server at a time[/]"
        )
    what = "contended race, not a measurement" if race else "ABBA"
    return f"[dim]F6 measures the last prompt {runs}× per arm ({warmup} warm-up dropped, {what})[/]"


def render_stopped(arm: str) -> str:
    """The start-up pane of an arm the restart schedule stopped."""
    return f"[dim]stopped[/] · {arm} waits for its next session"


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
