"""The `mtpwatch sweep` table: per k, measured speed-up, acceptance and tok/s beside the advisor's
prediction and its error; then the best k, the fit and what the engine ran; and the "speculation
on, k=0" row (`core.sweeps.idle`): the 0s server against plain k=0."""

from __future__ import annotations

from mtpwatch.core.sweeps.idle import IDLE, IdleCost
from mtpwatch.core.sweeps.resolve import RULE
from mtpwatch.core.sweeps.sweep import PREDICTED_ROWS, SweepReport, SweepRow
from mtpwatch.render.numbers import fixed, interval, ms, percent, tok_s, vector


def _lead(k: int | str, row: SweepRow | IdleCost) -> str:
    """A row's first columns, the measured rows' and the 0s row's: k, decode tok/s, speed-up [CI], pairs."""
    sp = interval(row.speedup, *row.ci) if row.ci and row.speedup is not None else fixed(row.speedup)
    return f"{k:>3}{tok_s(row.decode_tok_s):>14}{sp:>26}{row.pairs:>7}"


def _measured(report: SweepReport, row: SweepRow) -> str:
    pred = report.advice.at(row.k) if report.advice else None
    err, sp_err = report.error(row.k), report.error(row.k, "speedup")
    pos = vector(row.per_position, none="")
    return (
        f"{_lead(row.k, row)}{percent(row.acceptance_rate):>12}"
        f"{fixed(row.mean_acceptance_length):>10}{tok_s(pred.decode_tok_s if pred else None):>11}"
        f"{percent(err, signed=True):>8}{fixed(pred.speedup if pred else None):>9}"
        f"{percent(sp_err, signed=True):>8}   {pos}"
    )


def _resolution(report: SweepReport) -> str:
    """' — resolved …' or ' — not resolved: a fixed k=N does as well within the noise'."""
    ch = report.choice
    if ch is None:
        return ""
    if ch.resolved:
        return " — resolved (its 95% CI excludes the next-best k)"
    if ch.weak:
        return f" — not resolved: too few pairs for a 95% interval (rule: {RULE})"
    ks = ",".join(map(str, ch.within))
    return (
        f" — not resolved: k={ks} lie within its 95% CI; a fixed k={ch.k} does as well within the noise"
        f" (the smallest such k; rule: {RULE})"
    )


def format_sweep(report: SweepReport, title: str) -> str:
    """The sweep table: measured per k, predicted beside it."""
    lines = [title, "speed-up = k / k=0 per pair of runs (same prompt, same run number); decode tok/s = "
             "(tokens−1)/(t_last−t_first), acceptance from the server's counters"]  # fmt: skip
    if report.interrupted:
        lines.append(f"PARTIAL: {report.interrupted}")
    head = (
        f"{'k':>3}{'decode tok/s':>14}{'speed-up [95% CI]':>26}{'pairs':>7}{'acceptance':>12}"
        f"{'mean len':>10}{'predicted':>11}{'error':>8}{'pred. ×':>9}{'error':>8}   per position (marginal)"
    )
    lines += ["", head]
    rows = {r.k: r for r in report.rows}
    preds = {p.k: p for p in report.advice.predictions} if report.advice else {}
    ks, left_out = report.table_ks()
    for k in ks:
        row = rows.get(k)
        if row is not None:
            lines.append(_measured(report, row))
            continue
        pred = preds[k]
        tag = "extrapolated" if pred.extrapolated else "predicted"
        ci = report.certainty.intervals.get(k) if report.certainty else None
        tag += f", 95% CI {fixed(ci[0])}–{fixed(ci[1])}" if ci else ""
        lines.append(
            f"{pred.k:>3}{'—':>14}{'—':>26}{'':>7}{'':>12}{fixed(pred.tokens_per_step):>10}"
            f"{tok_s(pred.decode_tok_s):>11}{'':>8}{fixed(pred.speedup):>9}{'':>8}   ({tag})"
        )
    if left_out:
        lines.append(
            f"    ({left_out} more predicted ks in --json: the table shows the {PREDICTED_ROWS} "
            "nearest the predicted best)"
        )
    cats = sorted({c for row in report.rows for c in row.categories})
    if cats:
        lines += ["", "per category: speed-up (decode tok/s)"]
        for cat in cats:
            cells = []
            for row in report.rows[1:]:
                c = row.categories.get(cat, {})
                cells.append(f"k={row.k} {fixed(c.get('speedup'))}x ({tok_s(c.get('decode_tok_s'), 1)})")
            lines.append(f"  {cat:18}" + "   ".join(cells))
    lines.append("")
    best = report.best_k if report.best_k is not None else "—"
    lines.append(f"best k (highest median speed-up): {best}" + _resolution(report))
    lines.extend(_advisor_lines(report))
    lives, spread = report.baseline_lives(), report.life_spread()
    if lives and spread is not None:
        parts = " ".join(f"k={k}:{fixed(r, 3)}" for k, r in lives.items())
        lines.append(
            f"server lives: the k=0 server's second start over its first in each bench (same config, "
            f"same prompts) {parts} — up to {percent(spread)} apart; smaller differences between ks, "
            "and smaller advisor errors, are not resolved"
        )
    lines.extend(_latency_rows(report))
    modes = report.engine_modes()
    if modes:
        top = max(modes)
        mode = modes[top]
        lines.append(f"engine (the k={top} server): {mode.headline()}")
        lines.extend(f"  {flag.line()}" for flag in mode.flags)
        if report.advice is not None and not mode.truncation_holds:
            lines.append("  the advisor's rule (a run at k predicts every smaller k) does not hold here")
    return "\n".join(lines)


def _advisor_lines(report: SweepReport) -> list[str]:
    """The advisor's line, its intervals' verdicts and the acceptance shift, the step model, held out."""
    advice = report.advice
    if advice is None:
        return []
    sure = report.certainty
    lines = [advice.line(beyond_line=sure is None)]
    if sure is not None:
        lines.extend(f"  {verdict}" for verdict in sure.verdicts(advice))
        lines.append(
            f"  intervals: {sure.method}, {sure.resamples} resamples ({sure.scope()}); measured ks "
            "are preferred: the best k above comes from them"
        )
        bias = sure.bias_line()
        if bias:
            lines.append(f"  {bias}")
    lines.append(f"  {advice.fit.describe()}")
    if advice.serving_fit is not None:
        lines.append(f"  beside it, the serving runs' {advice.serving_fit.describe()} (not used)")
    held = {k: report.held_out_error(k) for k in sorted(advice.held_out)}
    if held:
        parts = []
        for k, e in held.items():
            ci = sure.held_out.get(k) if sure is not None else None
            row = next((r for r in report.rows if r.k == k), None)
            span = f" [{ci[0]:.2f}–{ci[1]:.2f}× vs {row.speedup:.2f}×]" if ci and row and row.speedup else ""
            parts.append(f"k={k}:{percent(e, signed=True)}{span}")
        lines.append(
            "  held out (each k predicted from a fit over the other ks, its acceptance from the nearest "
            f"other k above): speed-up error {' '.join(parts)}"
        )
    lines.append(
        "  predicted tok/s = the k=0 row × predicted speed-up; errors: (predicted − measured) / "
        "measured, tok/s then paired speed-up (× columns: drift between restarts cancels)"
    )
    return lines


_LATENCY = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"))


def _latency_rows(report: SweepReport) -> list[str]:
    """Per k, the per-request percentiles and output token throughput of its bench's two arms (the
    JSON's `bench.<k>` holds them), in `vllm bench serve`'s words (Median, P99: serve.py:1425/1431)."""
    benches = {
        k: getattr(getattr(r, "primary", None), "overall", None) for k, r in sorted(report.reports.items())
    }
    if not any(o is not None for o in benches.values()):
        return []
    heads = "".join(f"{f'{w} {name}':>13}" for _, name in _LATENCY for w in ("Median", "P99"))
    lines = [
        "",
        "per request (ms), client, as vllm bench serve: each k's bench, A = its k=0 server, B = k",
        f"{'k':>3}{'arm':>9}{heads}{'output tok/s':>14}",
    ]
    for k, overall in benches.items():
        for arm, tag in (("a", "A (k=0)"), ("b", f"B (k={k})")):
            summary = overall.arms.get(arm) if overall is not None else None
            lat = getattr(summary, "latency", None)
            if lat is None:
                continue
            cells = "".join(
                f"{ms(d.at(p) if (d := getattr(lat, attr)) else None):>13}"
                for attr, _ in _LATENCY
                for p in (50, 99)
            )
            lines.append(f"{k:>3}{tag:>9}{cells}{tok_s(lat.output_throughput):>14}")
    return lines


def format_idle(cost: IdleCost) -> str:
    """The 0s row in the sweep table's columns, then its cost against plain k=0 with the interval."""
    share = "" if cost.drafted_share is None else f"   drafted on {percent(cost.drafted_share)} of steps"
    row = _lead(IDLE, cost) + share
    k = cost.num_speculative_tokens
    head = (
        f"speculation on, k=0 ({IDLE}: num_speculative_tokens={k}, num_speculative_tokens_per_batch_size "
        f"[[1, 1, 0]], k=0 at every batch size) vs no speculation (plain k=0), paired, restart schedule"
    )
    lines = [head, row]
    if cost.interrupted:
        lines.append(f"PARTIAL: {cost.interrupted}")
    if cost.cost is not None and cost.cost_ci is not None:
        low, high = cost.cost_ci
        lines.append(
            f"price of leaving speculation on: {percent(cost.cost, signed=True)} of plain k=0's decode "
            f"tok/s [{percent(low, signed=True)}, {percent(high, signed=True)}] "
            f"({percent(cost.ci_coverage, 0)} CI, {cost.pairs} pairs; 1 − speed-up; "
            f"plain k=0 {tok_s(cost.baseline_tok_s)} tok/s in this bench)"
        )
    return "\n".join(lines)
