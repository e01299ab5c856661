"""The `mtpwatch snapshot` table: one row per number, each with the window or source it comes from
(a number the page lacks is `n/a`: the engine does not export it, not the tables' `—`); and the
fleet's table (`snapshot --prometheus` without --json), one row per server."""

from __future__ import annotations

from functools import partial
from typing import Any

from mtpwatch.render import numbers
from mtpwatch.render.numbers import MISSING, columns, fixed, percent, tok_s, vector

NA = "n/a"


_count = partial(numbers.count, none=NA)
_fixed = partial(numbers.fixed, none=NA)
_pct = partial(numbers.percent, style="spaced", none=NA)
_ms = partial(numbers.ms, unit=True, none=NA)
_vec = partial(numbers.vector, digits=3, none=NA)


def render_table(report: dict[str, Any], source: str, since: str | None) -> str:
    """The human-readable output: one row per number, each with the window or source it comes from."""
    between = since is not None
    counters = "server counters, between pages" if between else "server counters, since server start"
    if report.get("restarted"):
        counters += " (server restarted in between: counted from the restart)"
    derived = "derived, between pages" if between else "derived, since server start"
    hist = "histogram means, between pages" if between else "histogram means, since server start"
    gauge = "gauge, second page" if between else "gauge, at the page"

    header = [f"mtpwatch snapshot of {source}" + (f" since {since}" if between else "")]
    models = report.get("models") or []
    engines = report.get("engines") or []
    line = f"server: {report['engine'] if report.get('engine') == 'llama.cpp' else report['schema']}"
    if report.get("model"):
        line += f", model {report['model']}"
    if engines:
        line += f", {len(engines)} engine{'s' if len(engines) != 1 else ''}"
    scrape = report.get("scrape")
    if scrape:
        line += f" · scrape: {scrape['text']}"
    header.append(line)
    if len(models) > 1:
        header.append(
            f"models on the page: {', '.join(models)} (showing {report['model']}; choose with --model)"
        )

    rows: list[tuple[str, str, str]] = []
    missing = report.get("missing") or {}
    if report["speculative"]:
        k = report["num_speculative_tokens"]
        if report.get("engine") == "llama.cpp":
            mean = report.get("mean_draft_length")
            drafts = f", mean {_fixed(mean)}" if mean is not None else ""
            rows.append(("speculative decoding", f"on, drafts ≤ {k} tokens{drafts}", "page"))
        else:
            rows.append(("speculative decoding", f"on, k={k}", "page"))
        rows += [
            ("drafts (verify steps)", _count(report["drafts"]), counters),
            ("draft tokens", _count(report["draft_tokens"]), counters),
            ("accepted tokens", _count(report["accepted"]), counters),
            ("acceptance rate", _pct(report["acceptance_rate"]), derived),
            ("mean acceptance length", _fixed(report["mean_acceptance_length"]), derived),
            ("per position (marginal)", _vec(report["per_position"]), derived),
            ("per position (conditional)", _vec(report["per_position_conditional"]), derived),
            ("output from drafts", _pct(report["output_from_drafts"]), derived),
        ]
    else:
        rows.append(("speculative decoding", "off (no spec_decode counters)", "page"))
    rows += [
        ("generation tokens", _count(report["generation_tokens"]), counters),
        ("prompt tokens", _count(report["prompt_tokens"]), counters),
        ("tokens per step", _fixed(report["tokens_per_step"]), derived),
        ("mean step time (ITL)", _ms(report["mean_step_s"]), missing.get("latency", hist)),
        ("mean TTFT", _ms(report["mean_ttft_s"]), missing.get("latency", hist)),
        ("mean TPOT", _ms(report["mean_tpot_s"]), missing.get("latency", hist)),
        ("requests running", _count(report["requests_running"]), gauge),
        ("requests waiting", _count(report["requests_waiting"]), gauge),
        ("KV-cache usage", _pct(report["kv_cache_usage"]), missing.get("kv", gauge)),
    ]
    if "counts" in missing:
        rows.append(("note", "", missing["counts"]))
    return "\n".join(header + columns(rows, right={1}, indent="  "))


def render_fleet(doc: dict[str, Any]) -> str:
    """A plain-text table of a fleet document (for `snapshot --prometheus` without --json)."""
    head = ("", "server", "model", "k", "state", "tok/s", "accept", "mean len", "per pos", "run/wait")
    lines = [head]
    for r in doc["rows"]:
        lines.append(
            (
                "⚠" if r["outlier"] else "",
                r["source"] + (f" e{r['engine']}" if r["engine"] not in (None, "0") else ""),
                str(r["model"] or "?"),
                MISSING if r["k"] is None else str(r["k"]),
                r["state"],
                tok_s(r["decode_tok_s"], 1),
                percent(r["acceptance_rate"], style="spaced"),
                fixed(r["mean_acceptance_length"]),
                vector(r["per_position"]),
                f"{fixed(r['requests_running'], 0)}/{fixed(r['requests_waiting'], 0)}",
            )
        )
    out = [f"mtpwatch fleet from {doc['source']}, window {doc['window_s']:g} s (engine-wide)"]
    out += [f"note: {n}" for n in (doc.get("store") or {}).get("notes", [])]
    out += _groups(doc.get("groups", []))
    out += columns(lines)
    if doc["outliers"]:
        out.append(f"⚠ outliers: {', '.join(doc['outliers'])} — {doc['outlier_rule']}")
    return "\n".join(out)


def _spread(s: dict[str, float] | None, scale: float, nd: int) -> str:
    if s is None:
        return MISSING
    return "/".join(fixed(s[p] * scale, nd) for p in ("p10", "p50", "p90"))


def _groups(groups: list[dict[str, Any]]) -> list[str]:
    """One line per group (the groups needing attention first), then each outlier with why."""
    if len(groups) < 2:
        return []
    out = ["groups (accept % and tok/s as p10/p50/p90; counts up/idle/restarted, stale, down, missing):"]
    for g in groups:
        c = g["counts"]
        out.append(
            f"  {g['model']} · {g['method']} k={g['k']}: {g['instances']} instances, "
            f"{c['up']}/{c['idle']}/{c['restarted']} live, {c['stale']} stale, {c['down']} down, "
            f"{c['missing']} missing; accept {_spread(g['acceptance_rate'], 100, 1)}, "
            f"tok/s {_spread(g['decode_tok_s'], 1, 0)}"
        )
        out += [f"    ⚠ {o['source']}: {'; '.join(o['why'])}" for o in g["outliers"]]
        out += [f"    {x['state']}: {x['source']} ({x['reason']})" for x in g["not_live"]]
    return out
