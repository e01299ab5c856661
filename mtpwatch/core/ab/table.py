"""The `mtpwatch bench` report as plain text: the table on stdout, every number with its source.

Plain strings (no Rich, no Textual), so the command, tests and scripts print the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mtpwatch.core import provenance
from mtpwatch.core.ab import workloads
from mtpwatch.core.ab.latency import PERCENTILES, Distribution
from mtpwatch.core.ab.plan import CONTENDED
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.ab.stats import CV_FLAG, Summary


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _ci(s: Any) -> str:
    if s is None:
        return "—"
    return f"{s.median:.2f}x [{s.ci.low:.2f}, {s.ci.high:.2f}]"


def _ms(d: Distribution | None, p: int) -> str:
    value = d.at(p) if d is not None else None
    return "—" if value is None else f"{1000 * value:.1f}"


def schedule_text(report: BenchReport) -> str:
    """How the runs were scheduled, in words that match what ran (one server has no ABBA order)."""
    if not report.paired:
        return "one server (runs one after another, never concurrent)"
    return {
        "alternate": "alternate (ABBA order per prompt, never concurrent)",
        "race": f"race (both at once) — {CONTENDED.upper()}",
        "restart": "restart (one server at a time; sessions A, B, A; warm-up after each start)",
    }[report.config.schedule]


def format_report(
    report: BenchReport,
    workload_name: str,
    require_identical: bool = False,
    arm_infos: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The stdout table: every number says where it comes from.

    `arm_infos` (the report's `meta.arms`) name each arm's served model and warn when the arms
    serve different models or are one server.
    """
    cfg = report.config
    lines: list[str] = []
    arms = ["a", "b"] if report.paired else ["a"]
    contended = report.contended
    infos = dict(arm_infos or {})

    def served(a: str) -> str:
        model = provenance.arm_model(infos.get(a) or {})
        return f" · model {model}" if model else ""

    lines.append(f"mtpwatch bench · schedule: {schedule_text(report)} · temperature {cfg.temperature:g}")
    if report.interrupted:
        lines.append(f"PARTIAL REPORT: {report.interrupted}")
    if report.paired:
        lines.append(f"A = baseline (MTP off):   {report.labels.get('a', '')}{served('a')}")
        lines.append(f"B = treatment (MTP on):   {report.labels.get('b', '')}{served('b')}")
        lines.append("speed-up = B / A, computed per pair of runs (same prompt, same run number)")
    else:
        lines.append(f"server: {report.labels.get('a', '')}{served('a')}")
    cats = workloads.categories(cfg.prompts)
    counts = ", ".join(f"{c} {sum(1 for p in cfg.prompts if p.category == c)}" for c in cats)
    p = report.primary.point
    length = (
        f"forced length {p.length} tokens" if p.length is not None else "natural stopping (prompt max_tokens)"
    )
    lines.append(
        f"workload: {workload_name} ({len(cfg.prompts)} prompts: {counts}) · {cfg.runs} runs per prompt, "
        f"first {cfg.warmup} dropped as warm-up · concurrency {p.concurrency} · {length}"
    )
    lines.append("")

    overall = report.primary.overall
    metric = "decode tok/s" if p.concurrency == 1 else "output tok/s"
    source = "client: (tokens−1)/(t_last−t_first)" if p.concurrency == 1 else "client: all tokens / wall time"
    head = f"{'':34}" + "".join(f"{'A baseline' if a == 'a' else 'B treatment':>14}" for a in arms)
    if not report.paired:
        head = f"{'':34}{'server':>14}"
    lines.append(head + "   source")

    def row(label: str, values: Sequence[str], src: str = "") -> None:
        lines.append(f"{label:34}" + "".join(f"{v:>14}" for v in values) + (f"   {src}" if src else ""))

    def summ(name: str) -> list[Summary | None]:
        return [getattr(overall.arms[a], name) for a in arms]

    rates = summ("rate")
    row(f"{metric} median", [_f(s.median if s else None) for s in rates], source)
    row(f"{metric} mean", [_f(s.mean if s else None) for s in rates], "client")
    row(f"{metric} CV", [_pct(s.cv if s else None) for s in rates], "client (stdev/mean, all runs)")
    row(
        f"{metric} CV per prompt (max)",
        [_pct(overall.arms[a].max_prompt_cv) for a in arms],
        "client (repeats of one prompt; >10% flagged)",
    )
    lat = [overall.arms[a].latency for a in arms]
    for name, attr, src in (
        ("TTFT", "ttft", "client, per request, as vllm bench serve"),
        ("TPOT", "tpot", "client, per request: (e2e − TTFT)/(tokens − 1)"),
        ("ITL", "itl", "client, every gap between streamed chunks"),
    ):
        for pc in PERCENTILES:
            row(f"{name} p{pc} (ms)", [_ms(getattr(x, attr) if x else None, pc) for x in lat], src)
    row(
        "request throughput (req/s)",
        [_f(x.request_throughput if x else None, "{:.3f}") for x in lat],
        "client: completed requests / the arm's run time",
    )
    row(
        "output tokens median",
        [_f(s.median if s else None, "{:.0f}") for s in summ("tokens")],
        "server usage",
    )
    accs = [overall.arms[a].acceptance for a in arms]
    src = "server /metrics, Δ over measured runs"
    row("acceptance rate", [_pct(x.acceptance_rate if x else None) for x in accs], src)
    row("mean acceptance length", [_f(x.mean_acceptance_length if x else None) for x in accs], src)
    for a, x in zip(arms, accs, strict=True):
        if x is not None and x.per_position:
            values = " ".join(f"{v:.2f}" for v in x.per_position)
            lines.append(f"{'per-position ' + a.upper() + ' (marginal)':34}{values}   {src}")
    row("measured runs (failed)", [f"{overall.arms[a].runs} ({overall.arms[a].failed})" for a in arms])
    lines.append("")

    sp = overall.speedup
    if report.paired:
        if sp is None:
            lines.append("speed-up B/A: — (no successful pairs)")
        else:
            tail = f" — {CONTENDED}" if contended else ""
            cov = f"{100 * sp.ci.coverage:.1f}% coverage; " if sp.ci.coverage < 0.95 else ""
            lines.append(
                f"speed-up B/A: median {sp.median:.2f}x  95% CI [{sp.ci.low:.2f}, {sp.ci.high:.2f}]  "
                f"({sp.n_pairs} pairs; {cov}{sp.ci.method}; mean {sp.mean:.2f}x; "
                f"ratio of means {_f(sp.ratio_of_means)}x){tail}"
            )
        if len(report.primary.categories) > 1 or cats != ["default"]:
            lines.append("")
            lines.append(
                f"{'per category':22}{'pairs':>6}{'A ' + metric:>18}{'B ' + metric:>18}"
                f"{'speed-up [95% CI]':>26}{'B acceptance':>14}"
            )
            for cat, g in report.primary.categories.items():
                a_s, b_s = g.arms["a"].rate, g.arms["b"].rate
                b_acc = g.arms["b"].acceptance
                lines.append(
                    f"{cat:22}{g.speedup.n_pairs if g.speedup else 0:>6}{_f(a_s.median if a_s else None):>18}"
                    f"{_f(b_s.median if b_s else None):>18}{_ci(g.speedup):>26}"
                    f"{_pct(b_acc.acceptance_rate if b_acc else None):>14}"
                )
        lines.append("")
        ll = report.lossless
        if not ll.checked:
            lines.append(f"lossless check: not done ({ll.note})")
        elif ll.identical:
            lines.append(
                f"lossless check (temperature 0): identical — {ll.pairs_compared} pairs "
                f"compared by {ll.compared_by}"
            )
        else:
            d = ll.first
            lines.append(
                f"lossless check (temperature 0): DIFFERENT in {ll.pairs_differing} of "
                f"{ll.pairs_compared} pairs (compared by {ll.compared_by})"
            )
            if d is not None:
                where = f"token {d.token_index}" if d.token_index is not None else f"character {d.char_index}"
                lines.append(
                    f"  first divergence: prompt {d.prompt} ({d.point.name}), pair {d.pair}, at {where}"
                )
                if d.a_tokens is not None:
                    lines.append(f"    A tokens: {list(d.a_tokens)}")
                    lines.append(f"    B tokens: {list(d.b_tokens or ())}")
                lines.append(f"    A: {d.a_context!r}")
                lines.append(f"    B: {d.b_context!r}")

    if len(report.points) > 1:
        lines.append("")
        lines.append(f"{'point':14}{'A tok/s':>12}{'B tok/s':>12}{'speed-up [95% CI]':>26}   metric")
        for pt in report.points:
            a_s = pt.overall.arms["a"].rate
            b_s = pt.overall.arms["b"].rate if report.paired else None
            m = "decode tok/s" if pt.point.concurrency == 1 else "aggregate output tok/s"
            lines.append(
                f"{pt.point.name:14}{_f(a_s.median if a_s else None):>12}"
                f"{_f(b_s.median if b_s else None):>12}"
                f"{_ci(pt.overall.speedup):>26}   {m}"
            )
    for c, be in report.break_even.items():
        pts = "  ".join(f"{length}→{s:.2f}x" for length, s in report.break_even_points[c])
        lines.append(f"break-even (concurrency {c}): {pts}")
        lines.append(f"  {be.verdict}" + (f" ({CONTENDED})" if contended else ""))

    warnings: list[str] = provenance.arm_warnings(infos) if report.paired else []
    for a, lines_ in report.problems.items():
        warnings.extend(f"arm {a.upper()}: {line}" for line in lines_)
    for a in arms:
        noisy = overall.arms[a].noisy_prompts
        if noisy:
            worst = overall.arms[a].max_prompt_cv or 0.0
            warnings.append(
                f"arm {a.upper()}: repeated runs of {len(noisy)} prompt(s) vary by more than "
                f"{100 * CV_FLAG:.0f}% (CV up to {100 * worst:.1f}%, e.g. {noisy[0]}): noisy; "
                "use more runs or a quieter machine"
            )
    if report.paired and accs[1] is None and overall.arms["b"].runs > 0:
        warnings.append(
            "arm B (treatment) shows no speculative-decoding counters on /metrics: MTP off, "
            "--disable-log-stats, another --model, or /metrics unreachable"
        )
    if report.paired and accs[0] is not None:
        warnings.append(
            "arm A (baseline) has speculative decoding on: is the order of --ab URL_A URL_B right?"
        )
    if sp is not None and sp.ci.coverage < 0.95:
        warnings.append(
            f"only {sp.n_pairs} pairs: the CI covers {100 * sp.ci.coverage:.1f}%, not 95%; use more runs"
        )
    gates = report.gate_failures(require_identical)
    if warnings or gates:
        lines.append("")
    lines.extend(f"warning: {w}" for w in warnings)
    lines.extend(f"GATE FAILED: {g}" for g in gates)
    return "\n".join(lines)
