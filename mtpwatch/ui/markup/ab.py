"""The A/B view's lines: the speed-up line and its k advisor, the lossless check, F6's measurement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from textual.markup import escape

from mtpwatch.render.numbers import fixed
from mtpwatch.ui.pack import Group

if TYPE_CHECKING:  # the first frame draws the waiting lines: the measurement's modules load with it
    from mtpwatch.core.ab.records import RunRecord
    from mtpwatch.core.ab.report import BenchReport
    from mtpwatch.core.sweeps.advisor import Advice
    from mtpwatch.session.views import Answer


def speedup_groups(
    last: float | None,
    median: float | None,
    n: int,
    *,
    race: bool,
    label: str = "B/A",
    warnings: Sequence[str] = (),
    compact: bool = False,
) -> tuple[Group, ...]:
    """The line between A/B panes: decode tok/s ratio (client), last prompt and median, then its
    warnings (`session.diagnosis.ab_warnings`), as groups for a `PackedLine`. The figures, their
    count and their source fit 78 cells when `compact` (`median 2.07× of 3`)."""
    source = "[dim](decode tok/s, client)[/]"
    if last is None:
        groups = [Group((f"speed-up {label} {source}: — send a prompt",))]
    else:
        count = f"of {n}" if compact else f"over {n} prompt(s)"
        figures = (f"speed-up {label}: last [b]{last:.2f}×[/]", f"median {fixed(median, 2)}× {count}")
        groups = [Group(figures, source)]
    if warnings:
        from mtpwatch.session.diagnosis import PART
    for warning in warnings:  # its parts (`session.diagnosis.PART`) each whole on a row
        groups.append(Group(tuple(f"[$text-warning]{escape(p)}[/]" for p in warning.split(PART))))
    if race:
        groups.append(Group(("[$text-warning]race: contended, not a measurement[/]",)))
    return tuple(groups)


def render_lossless(a: Answer, b: Answer, *, lossy: str | None = None) -> str:
    """The lossless line: 'outputs identical' or where A and B first diverge (token ids when both
    servers sent them, else the texts). `lossy` names a mode of the speculating server whose
    verification does not keep the target's output (`core.sweeps.engine`: vLLM 0.33's `fly`); a
    difference there is expected, not a bug, and the line says so."""
    if a.summary.error or b.summary.error or a.summary.cancelled or b.summary.cancelled:
        return "[dim]lossless check: — (an answer failed or was cancelled)[/]"
    line = _lossless_line(a, b)
    if lossy is None or line.startswith("[$success]"):
        return line
    plain_style = line.replace("[$error]", "[b]").replace("[$warning]", "[b]")  # not a failure here
    return f"[$warning]expected, {escape(lossy)}:[/] {plain_style}"


def _lossless_line(a: Answer, b: Answer) -> str:
    from mtpwatch.core.ab.lossless import compare_outputs as compare_outputs_core

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


def render_run(rec: RunRecord, runs_per_prompt: int) -> str:
    """One finished run: 'run 2/3 · 412 tok · decode 31.2 tok/s · accept 62 %' (or its error)."""
    tag = "warm-up" if rec.warmup else f"run {rec.run + 1}/{runs_per_prompt}"
    if rec.error:
        body = f"[$text-error]{escape(rec.error)}[/]"
    else:
        acc = f" · accept {100 * rec.acceptance_rate:.0f} %" if rec.acceptance_rate is not None else ""
        body = f"{rec.tokens} tok · decode [b]{fixed(rec.decode_tok_s, 1)}[/] tok/s{acc}"
    return f"{tag} · {body}" + (" · [dim]contended[/]" if rec.contended else "")


def measure_line(report: BenchReport, *, done: int = 0, total: int = 0, summary: str | None = None) -> str:
    """'speed-up B/A median 2.07× [95 % CI 1.98–2.15] · 11 pairs · CV A 3 % B 4 %' from a `BenchReport`.
    Each arm's CV is the noisiest prompt's run-to-run CV (pooled over prompts when a prompt has a
    single run); above `stats.CV_FLAG` (10 %) it is flagged. A `summary` (plain words) leads the
    final line, which leaves the source out."""
    from mtpwatch.core.ab import stats

    overall = report.primary.overall
    s = overall.speedup
    source = " [dim](decode tok/s, client, paired runs)[/]" if summary is None else ""
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
        from mtpwatch.core.ab.plan import CONTENDED

        text += f" · [$text-warning]race: {CONTENDED}[/]"
    if report.interrupted:
        text += f" · [$text-warning]{escape(report.interrupted)}[/]"
    return text if summary is None else f"{escape(summary)}: {text}"


LOSSLESS_WAITING = "[dim]lossless check (temperature 0): — send a prompt[/]"
LOSSLESS_NEEDS_T0 = "[dim]lossless check needs temperature 0[/]"
PAIRS_WAITING = "speed-up B/A [dim](paired runs)[/] — waiting for the first pair"
RESTART_WAITING = "[dim]waiting: one server at a time (restart schedule)[/]"
STOPPED = "[dim]stopped[/] · {arm} waits for its next session"


def render_measure_hint(runs: int, warmup: int, *, restart: bool, race: bool) -> str:
    """What F6 (or a prompt, on the restart schedule) measures, under the speed-up line."""
    if restart:
        return (
            f"[dim]restart schedule: a prompt you send is measured {runs}× per arm "
            f"({warmup} warm-up), one server at a time[/]"
        )
    what = "contended race, not a measurement" if race else "ABBA"
    return f"[dim]F6 measures the last prompt {runs}× per arm ({warmup} warm-up dropped, {what})[/]"
