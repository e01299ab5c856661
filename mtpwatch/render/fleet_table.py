"""The fleet as a plain-text table (`snapshot --prometheus` without --json)."""

from __future__ import annotations

from typing import Any

from mtpwatch.render.numbers import MISSING, columns, fixed, percent, tok_s, vector


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
    return "/".join(f"{s[p] * scale:.{nd}f}" for p in ("p10", "p50", "p90"))


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
