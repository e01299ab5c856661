"""The `mtpwatch bench` report as plain text: the table on stdout, every number with its source.

Plain strings (no Rich, no Textual), so the command, tests and scripts print the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mtpwatch.core import provenance
from mtpwatch.core.ab import workloads
from mtpwatch.core.ab.latency import PERCENTILES
from mtpwatch.core.ab.plan import CONTENDED
from mtpwatch.core.ab.report import BenchReport, GroupReport
from mtpwatch.core.ab.stats import CV_FLAG, Summary
from mtpwatch.core.metrics.formulas import EOS_OVERCOUNT
from mtpwatch.render.numbers import MISSING, fixed, interval, ms, percent, ratio, tok_s, vector

LABEL_W = 34
"""Width of the row labels of the per-arm table."""
CELL_W = 14
"""Width of each arm's column."""


def _medians(g: GroupReport, width: int, paired: bool = True) -> str:
    """Arm A's and B's median tok/s, each `width` wide, then the speed-up [95% CI] (26 wide)."""
    a, b = g.arms["a"].rate, g.arms["b"].rate if paired else None
    sp = MISSING if g.speedup is None else interval(g.speedup.median, g.speedup.ci.low, g.speedup.ci.high)
    return f"{tok_s(a.median if a else None):>{width}}{tok_s(b.median if b else None):>{width}}{sp:>26}"


def schedule_text(report: BenchReport) -> str:
    """How the runs were scheduled, in words that match what ran (one server has no ABBA order)."""
    if not report.paired:
        return "one server (runs one after another, never concurrent)"
    return {
        "alternate": "alternate (ABBA order per prompt, never concurrent)",
        "race": f"race (both at once) — {CONTENDED.upper()}",
        "restart": "restart (one server at a time; sessions A, B, A; warm-up after each start)",
    }[report.config.schedule]


@dataclass(frozen=True, slots=True)
class _Ctx:
    """What every part of the table reads: the report, its arms, and the primary point's metric."""

    report: BenchReport
    arms: list[str]
    infos: dict[str, Mapping[str, Any]]
    metric: str
    """'decode tok/s' at concurrency 1, else 'output tok/s'."""

    @property
    def overall(self) -> GroupReport:
        return self.report.primary.overall

    def served(self, arm: str) -> str:
        model = provenance.arm_model(self.infos.get(arm) or {})
        return f" · model {model}" if model else ""

    def row(self, label: str, values: Sequence[str], src: str = "") -> str:
        return f"{label:{LABEL_W}}" + "".join(f"{v:>{CELL_W}}" for v in values) + (f"   {src}" if src else "")


def _header(c: _Ctx, workload_name: str) -> list[str]:
    report, cfg = c.report, c.report.config
    lines = [f"mtpwatch bench · schedule: {schedule_text(report)} · temperature {cfg.temperature:g}"]
    if report.interrupted:
        lines.append(f"PARTIAL REPORT: {report.interrupted}")
    if report.paired:
        lines.append(f"A = baseline (MTP off):   {report.labels.get('a', '')}{c.served('a')}")
        lines.append(f"B = treatment (MTP on):   {report.labels.get('b', '')}{c.served('b')}")
        lines.append("speed-up = B / A, computed per pair of runs (same prompt, same run number)")
    else:
        lines.append(f"server: {report.labels.get('a', '')}{c.served('a')}")
    cats = workloads.categories(cfg.prompts)
    counts = ", ".join(f"{cat} {sum(1 for p in cfg.prompts if p.category == cat)}" for cat in cats)
    p = report.primary.point
    length = (
        f"forced length {p.length} tokens" if p.length is not None else "natural stopping (prompt max_tokens)"
    )
    lines.append(
        f"workload: {workload_name} ({len(cfg.prompts)} prompts: {counts}) · {cfg.runs} runs per prompt, "
        f"first {cfg.warmup} dropped as warm-up · concurrency {p.concurrency} · {length}"
    )
    return [*lines, ""]


def _speed_rows(c: _Ctx) -> list[str]:
    """Tokens per second, their spread, latency percentiles, request rate and output length."""
    overall, arms, metric = c.overall, c.arms, c.metric
    single = c.report.primary.point.concurrency == 1
    source = "client: (tokens−1)/(t_last−t_first)" if single else "client: all tokens / wall time"

    def summ(name: str) -> list[Summary | None]:
        return [getattr(overall.arms[a], name) for a in arms]

    rates = summ("rate")
    lines = [
        c.row(f"{metric} median", [tok_s(s.median if s else None) for s in rates], source),
        c.row(f"{metric} mean", [tok_s(s.mean if s else None) for s in rates], "client"),
        c.row(f"{metric} CV", [percent(s.cv if s else None) for s in rates], "client (stdev/mean, all runs)"),
        c.row(
            f"{metric} CV per prompt (max)",
            [percent(overall.arms[a].max_prompt_cv) for a in arms],
            "client (repeats of one prompt; >10% flagged)",
        ),
    ]
    lat = [overall.arms[a].latency for a in arms]
    for name, attr, src in (
        ("TTFT", "ttft", "client, per request, as vllm bench serve"),
        ("TPOT", "tpot", "client, per request: (e2e − TTFT)/(tokens − 1)"),
        ("ITL", "itl", "client, every gap between streamed chunks"),
    ):
        for pc in PERCENTILES:
            # vLLM's words: "Median TTFT (ms):", "P99 TTFT (ms):" (vllm/benchmarks/serve.py:1425, :1431)
            label = f"Median {name} (ms)" if pc == 50 else f"P{pc} {name} (ms)"
            lines.append(
                c.row(label, [ms(d.at(pc) if (d := getattr(x, attr, None)) else None) for x in lat], src)
            )
    requests = [fixed(x.request_throughput if x else None, 3) for x in lat]  # 3 decimals: a few per second
    output = [tok_s(x.output_throughput if x else None) for x in lat]
    tokens = [fixed(s.median if s else None, 0) for s in summ("tokens")]
    return [
        *lines,
        c.row("request throughput (req/s)", requests, "client: completed requests / the arm's run time"),
        c.row(
            "output token throughput (tok/s)",
            output,
            "output tokens / the arm's run time, as vllm bench serve",
        ),
        c.row("output tokens median", tokens, "server usage"),
    ]


def _acceptance_rows(c: _Ctx) -> list[str]:
    """Acceptance rate, mean acceptance length and per position, then the measured runs."""
    overall, arms = c.overall, c.arms
    accs = [overall.arms[a].acceptance for a in arms]
    src = "server /metrics, Δ over measured runs"
    lines = [
        c.row("acceptance rate", [percent(x.acceptance_rate if x else None) for x in accs], src),
        c.row("mean acceptance length", [fixed(x.mean_acceptance_length if x else None) for x in accs], src),
        c.row(
            "drafted on (share of steps)",
            [percent(x.drafted_share if x else None) for x in accs],
            "server: Δnum_drafts / ΔITL count",
        ),
    ]
    for a, x in zip(arms, accs, strict=True):
        if x is not None and x.per_position:
            label = f"per-position {a.upper()} (marginal)"
            lines.append(f"{label:{LABEL_W}}{vector(x.per_position)}   {src}")
    runs = [f"{overall.arms[a].runs} ({overall.arms[a].failed})" for a in arms]
    return [*lines, c.row("measured runs (failed)", runs), ""]


def _speedup(c: _Ctx) -> list[str]:
    sp = c.overall.speedup
    if sp is None:
        return ["speed-up B/A: — (no successful pairs)"]
    tail = f" — {CONTENDED}" if c.report.contended else ""
    cov = f"{percent(sp.ci.coverage)} coverage; " if sp.ci.coverage < 0.95 else ""
    return [
        f"speed-up B/A: median {ratio(sp.median)}  95% CI [{fixed(sp.ci.low)}, {fixed(sp.ci.high)}]  "
        f"({sp.n_pairs} pairs; {cov}{sp.ci.method}; mean {ratio(sp.mean)}; "
        f"ratio of means {fixed(sp.ratio_of_means)}x){tail}"
    ]


def _categories(c: _Ctx) -> list[str]:
    report, metric = c.report, c.metric
    if len(report.primary.categories) <= 1 and workloads.categories(report.config.prompts) == ["default"]:
        return []
    lines = [
        "",
        f"{'per category':22}{'pairs':>6}{'A ' + metric:>18}{'B ' + metric:>18}"
        f"{'speed-up [95% CI]':>26}{'B acceptance':>14}",
    ]
    for cat, g in report.primary.categories.items():
        b_acc = g.arms["b"].acceptance
        lines.append(
            f"{cat:22}{g.speedup.n_pairs if g.speedup else 0:>6}{_medians(g, 18)}"
            f"{percent(b_acc.acceptance_rate if b_acc else None):>14}"
        )
    return lines


def _lossless(report: BenchReport) -> list[str]:
    ll = report.lossless
    if not ll.checked:
        return [f"lossless check: not done ({ll.note})"]
    if ll.identical:
        return [
            f"lossless check (temperature 0): identical — {ll.pairs_compared} pairs "
            f"compared by {ll.compared_by}"
        ]
    lines = [
        f"lossless check (temperature 0): DIFFERENT in {ll.pairs_differing} of "
        f"{ll.pairs_compared} pairs (compared by {ll.compared_by})"
    ]
    d = ll.first
    if d is not None:
        where = f"token {d.token_index}" if d.token_index is not None else f"character {d.char_index}"
        lines.append(f"  first divergence: prompt {d.prompt} ({d.point.name}), pair {d.pair}, at {where}")
        if d.a_tokens is not None:
            lines += [f"    A tokens: {list(d.a_tokens)}", f"    B tokens: {list(d.b_tokens or ())}"]
        lines += [f"    A: {d.a_context!r}", f"    B: {d.b_context!r}"]
    return lines


def _points(report: BenchReport) -> list[str]:
    lines: list[str] = []
    if len(report.points) > 1:
        lines += ["", f"{'point':14}{'A tok/s':>12}{'B tok/s':>12}{'speed-up [95% CI]':>26}   metric"]
        for pt in report.points:
            m = "decode tok/s" if pt.point.concurrency == 1 else "aggregate output tok/s"
            lines.append(f"{pt.point.name:14}{_medians(pt.overall, 12, report.paired)}   {m}")
    for conc, be in report.break_even.items():
        pts = "  ".join(f"{length}→{ratio(s)}" for length, s in report.break_even_points[conc])
        lines.append(f"break-even (concurrency {conc}): {pts}")
        lines.append(f"  {be.verdict}" + (f" ({CONTENDED})" if report.contended else ""))
    return lines


def _warnings(c: _Ctx, require_identical: bool) -> list[str]:
    report, overall = c.report, c.overall
    warnings: list[str] = provenance.arm_warnings(c.infos) if report.paired else []
    for a, lines_ in report.problems.items():
        warnings.extend(f"arm {a.upper()}: {line}" for line in lines_)
    for a in c.arms:
        noisy = overall.arms[a].noisy_prompts
        if noisy:
            worst = overall.arms[a].max_prompt_cv or 0.0
            warnings.append(
                f"arm {a.upper()}: repeated runs of {len(noisy)} prompt(s) vary by more than "
                f"{percent(CV_FLAG, 0)} (CV up to {percent(worst)}, e.g. {noisy[0]}): noisy; "
                "use more runs or a quieter machine"
            )
    accs = [overall.arms[a].acceptance for a in c.arms]
    if report.paired and accs[1] is None and overall.arms["b"].runs > 0:
        warnings.append(
            "arm B (treatment) shows no speculative-decoding counters on /metrics: MTP off, "
            "--disable-log-stats, another --model, or /metrics unreachable"
        )
    if report.paired and accs[0] is not None:
        warnings.append(
            "arm A (baseline) has speculative decoding on: is the order of --ab URL_A URL_B right?"
        )
    for a in c.arms:
        eos = report.eos_overcount(a)
        if eos is not None:
            over, checked, worst = eos
            warnings.append(
                f"arm {a.upper()}: the server's mean acceptance length exceeds the client's tokens per step "
                f"in {over} of {checked} runs (by up to {fixed(worst)}): {EOS_OVERCOUNT}, so on short "
                "answers the server's length and acceptance over-state"
            )
    sp = overall.speedup
    if sp is not None and sp.ci.coverage < 0.95:
        warnings.append(
            f"only {sp.n_pairs} pairs: the CI covers {percent(sp.ci.coverage)}, not 95%; use more runs"
        )
    gates = report.gate_failures(require_identical)
    lines = [""] if warnings or gates else []
    return [*lines, *(f"warning: {w}" for w in warnings), *(f"GATE FAILED: {g}" for g in gates)]


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
    metric = "decode tok/s" if report.primary.point.concurrency == 1 else "output tok/s"
    arms = ["a", "b"] if report.paired else ["a"]
    c = _Ctx(report, arms, dict(arm_infos or {}), metric)
    head = c.row("", ["A baseline", "B treatment"] if report.paired else ["server"], "source")
    lines = [*_header(c, workload_name), head, *_speed_rows(c), *_acceptance_rows(c)]
    if report.paired:
        lines += [*_speedup(c), *_categories(c), "", *_lossless(report)]
    lines += _points(report)
    lines += _warnings(c, require_identical)
    return "\n".join(lines)
