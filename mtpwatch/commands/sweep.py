"""`mtpwatch bench --start MODEL --sweep-k 0,1,2,4`: find the best k, one server at a time, and predict it.

Called by the `bench` command; prints a table per k (decode tok/s, acceptance, mean length,
speed-up with its 95 % CI, per category), the best k, and the k advisor's predictions from
every measured k beside the measured figures (on tok/s and on paired speed-ups); `--json FILE`
writes all of it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from mtpwatch.commands.options import free_port
from mtpwatch.commands.planning import gpu_for_plan, print_plan
from mtpwatch.core.ab.plan import BenchConfig
from mtpwatch.core.ab.sweep import SweepReport, run_sweep
from mtpwatch.core.jsonout import json_safe
from mtpwatch.core.launch.memplan import PlanError
from mtpwatch.core.launch.servers import plan_sweep
from mtpwatch.core.launch.vllm_cmd import VllmArgsError


def _f(x: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def format_sweep(report: SweepReport, title: str) -> str:
    """The sweep table: measured per k, predicted beside it."""
    lines = [title, "speed-up = k / k=0 per pair of runs (same prompt, same run number); decode tok/s = "
             "(tokens−1)/(t_last−t_first), acceptance from the server's counters"]  # fmt: skip
    if report.interrupted:
        lines.append(f"PARTIAL: {report.interrupted}")
    lines.append("")
    head = (
        f"{'k':>3}{'decode tok/s':>14}{'speed-up [95% CI]':>26}{'pairs':>7}{'acceptance':>12}"
        f"{'mean len':>10}{'predicted':>11}{'error':>8}{'pred. ×':>9}{'error':>8}   per position (marginal)"
    )
    lines.append(head)
    for row in report.rows:
        pred = report.advice.at(row.k) if report.advice else None
        err, sp_err = report.error(row.k), report.speedup_error(row.k)
        ci = f"{_f(row.speedup)}x [{_f(row.ci[0])}, {_f(row.ci[1])}]" if row.ci else _f(row.speedup)
        pos = " ".join(f"{x:.2f}" for x in row.per_position) if row.per_position else ""
        lines.append(
            f"{row.k:>3}{_f(row.decode_tok_s):>14}{ci:>26}{row.pairs:>7}"
            f"{_f(row.acceptance_rate and 100 * row.acceptance_rate, '{:.1f}%'):>12}"
            f"{_f(row.mean_acceptance_length):>10}{_f(pred.decode_tok_s if pred else None):>11}"
            f"{_f(err and 100 * err, '{:+.1f}%'):>8}{_f(pred.speedup if pred else None):>9}"
            f"{_f(sp_err and 100 * sp_err, '{:+.1f}%'):>8}   {pos}"
        )
    measured = {r.k for r in report.rows}
    for pred in report.advice.predictions if report.advice else ():
        if pred.k not in measured:
            tag = "extrapolated" if pred.extrapolated else "predicted"
            lines.append(
                f"{pred.k:>3}{'—':>14}{'—':>26}{'':>7}{'':>12}{_f(pred.tokens_per_step):>10}"
                f"{_f(pred.decode_tok_s):>11}{'':>8}{_f(pred.speedup):>9}{'':>8}   ({tag})"
            )
    cats = sorted({c for row in report.rows for c in row.categories})
    if cats:
        lines.append("")
        lines.append("per category: speed-up (decode tok/s)")
        for cat in cats:
            cells = []
            for row in report.rows[1:]:
                c = row.categories.get(cat, {})
                cells.append(f"k={row.k} {_f(c.get('speedup'))}x ({_f(c.get('decode_tok_s'), '{:.1f}')})")
            lines.append(f"  {cat:18}" + "   ".join(cells))
    lines.append("")
    lines.append(f"best k (highest median speed-up): {report.best_k if report.best_k is not None else '—'}")
    if report.advice is not None:
        lines.append(report.advice.line())
        lines.append(f"  {report.advice.fit.describe()}")
        lines.append(
            "  predicted tok/s = the k=0 row × predicted speed-up; errors: (predicted − measured) / "
            "measured, tok/s then paired speed-up (× columns: drift between restarts cancels)"
        )
    return "\n".join(lines)


def sweep_command(
    *,
    model: str,
    ks: Sequence[int],
    method: str | None,
    drafter: str | None,
    vllm_cmd: str,
    extra: Sequence[str],
    gpu: str | None,
    gpu_memory: float | None,
    gpu_free: float | None,
    show_plan: bool,
    config: BenchConfig,
    api_key: str | None,
    served_model: str | None,
    chat: bool,
    startup_timeout: float,
    json_path: Path | None,
    progress: Any,
) -> None:
    """Plan, then run the sweep and print it (or print the plan and exit)."""
    ks = sorted(set(ks))
    if not ks or any(k < 0 or k > 64 for k in ks):
        raise click.BadParameter("give ks between 0 and 64, e.g. 0,1,2,4,8", param_hint="--sweep-k")
    if 0 not in ks:
        ks = [0, *ks]
    if len(ks) < 2:
        raise click.BadParameter("give at least one k > 0 to compare with k=0", param_hint="--sweep-k")
    try:
        plan = plan_sweep(
            model, ks, ports=[free_port()] * len(ks), method=method, drafter=drafter, vllm=vllm_cmd,
            api_key=api_key, extra=extra, gpu=gpu_for_plan(gpu, gpu_memory, gpu_free),
        )  # fmt: skip
    except (VllmArgsError, PlanError) as exc:
        raise click.UsageError(str(exc)) from None
    if show_plan:
        print_plan(plan, False)
        if json_path is not None:
            json_path.write_text(json.dumps(plan.to_json(), indent=2) + "\n", encoding="utf-8")
        return
    base = plan.servers[0]
    treatments = [(s.k, s.url, s.argv) for s in plan.servers[1:]]

    def on_k(k: int) -> None:
        click.echo(f"mtpwatch bench: k=0 vs k={k} (one server at a time)", err=True)

    try:
        report = asyncio.run(
            run_sweep(
                config,
                (base.url, base.argv),
                treatments,
                env=dict(base.env),
                api_key=api_key,
                model=served_model,
                chat=chat,
                startup_timeout_s=startup_timeout,
                on_event=progress,
                on_k=on_k,
            )
        )
    except KeyboardInterrupt:
        click.echo("mtpwatch bench: stopped by Ctrl-C", err=True)
        sys.exit(130)
    method_name = (treatments and json.loads(_spec(treatments[0][2])).get("method")) or "?"
    title = f"mtpwatch bench · k sweep {','.join(map(str, ks))} · {model} · {method_name} · restart schedule"
    if json_path is not None:
        doc = {"model": model, "method": method_name, "plan": plan.to_json(), **report.to_json()}
        doc["bench"] = {k: r.to_json() for k, r in report.reports.items()}
        json_path.write_text(
            json.dumps(json_safe(doc), indent=2, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
        )
        click.echo(f"wrote {json_path}", err=True)
    click.echo(format_sweep(report, title))
    if report.interrupted:
        sys.exit(1)


def _spec(argv: Sequence[str]) -> str:
    return argv[list(argv).index("--speculative-config") + 1] if "--speculative-config" in argv else "{}"
