"""The `mtpwatch roofline` table: every figure analytic, each row with how it is computed."""

from __future__ import annotations

from mtpwatch.core.roofline.bytemodel import kv_cache_bytes
from mtpwatch.core.roofline.ceilings import Roofline
from mtpwatch.core.roofline.modelconfig import GB, ModelSpec
from mtpwatch.render.numbers import columns, fixed, gb_s, ratio, tok_s


def _gb(x: float) -> str:
    return f"{fixed(x / GB, 3 if x < 10 * GB else 2)} GB"


def render_roofline(r: Roofline, target: ModelSpec, drafter: ModelSpec | None, peak_source: str) -> str:
    s, b = r.step, r.baseline_step
    d = drafter
    dtypes = f"weights {target.weight_dtype}, embed/head {target.embed_dtype}, KV {target.kv_dtype}"
    lines = [
        "mtpwatch roofline: every figure is analytic (config shapes × dtypes ÷ peak bandwidth; no server, "
        "no hardware counter)",
        f"  model    {target.name} ({dtypes}; {target.source})",
    ]
    if d is not None:
        lines.append(f"  drafter  {d.name} (weights {d.weight_dtype}; {r.step.draft_passes} passes per step)")
    lines.append(f"  GPU      {r.gpu}, peak {gb_s(r.peak_gbps)} ({peak_source})")
    lines.append(
        f"  step     k={r.k}, context {r.context} tokens, batch {r.batch}, "
        f"τ {fixed(r.mean_acceptance_length)} ({r.acceptance_source})"
    )
    lines.append("")
    union = f", {fixed(s.experts_per_layer, 1)} experts/layer" if s.experts_per_layer is not None else ""
    rows = [("target bytes / verify pass", _gb(s.target), f"{s.tokens_per_pass} tokens{union}")]
    if r.k:
        per = s.drafter / s.draft_passes if s.draft_passes else 0.0
        rows.append(("drafter bytes / step", _gb(s.drafter), f"{s.draft_passes} × {_gb(per)}"))
    rows += [
        ("KV bytes read / step", _gb(s.kv), f"target {_gb(s.kv_target)}, drafter {_gb(s.kv_drafter)}"),
        ("KV cache resident", _gb(kv_cache_bytes(target, r.context, r.batch)), "KV-shared layers own none"),
        ("total bytes / step", _gb(s.total), f"plain step {_gb(b.total)}"),
        (
            "ceiling, plain decoding",
            f"{tok_s(r.ceiling_tok_s_baseline, 1)} tok/s",
            f"{r.batch} × {gb_s(r.peak_gbps)} ÷ {_gb(b.total)}",
        ),
    ]
    if r.k:
        comp = ratio(r.compute_term, 1, none="n/a (no FLOP rate)", mark="×")
        acc, bw = ratio(r.acceptance_term, mark="×"), ratio(r.bandwidth_term, mark="×")
        terms = f"acceptance {acc}, bandwidth {bw}"
        rows += [
            (
                "ceiling, speculative",
                f"{tok_s(r.ceiling_tok_s_spec, 1)} tok/s",
                f"τ {fixed(r.mean_acceptance_length)} × {fixed(r.ceiling_steps_per_s, 1)} steps/s",
            ),
            ("break-even τ", fixed(r.break_even_acceptance_length, 3), "bytes_k ÷ bytes_0"),
            ("speed-up terms", ratio(r.speedup_bound, mark="×"), f"{terms}, compute {comp}"),
            (
                "naive rule (drafter free)",
                ratio(r.speedup_bound_naive, mark="×"),
                "min(1 + α·k, …) as usually quoted",
            ),
        ]
    if r.tok_s is not None:
        rows.append(("given tok/s", tok_s(r.tok_s, 1), f"{fixed(r.pct_of_ceiling, 0)} % of the ceiling"))
    if r.effective_gbps is not None:
        steps = f"{fixed(r.steps_per_s)} steps/s × {_gb(s.total)}"
        rows.append(
            ("effective bandwidth", gb_s(r.effective_gbps), f"{fixed(r.pct_of_peak, 0)} % of peak ({steps})")
        )
    lines += columns([(a, v, f"analytic: {c}") for a, v, c in rows], right={1}, indent="  ")
    lines += ["", f"  {r.summary}"]
    for note in (*target.notes, *(d.notes if d else ())):
        lines.append(f"  note: {note}")
    return "\n".join(lines)
