"""The roofline panel's lines: analytic bandwidth against the peak, the ceilings, the speed-up terms."""

from __future__ import annotations

from textual.markup import escape

from mtpwatch.render.numbers import fixed
from mtpwatch.session.views import (
    BandwidthView,
    clock_note,
    method_name,
    window_words,
)
from mtpwatch.ui.pack import wrap


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
            lines.extend(f"[$text-warning]{escape(line)}[/]" for line in wrap(note, width))
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
        lines.extend(f"[i]{escape(line)}[/]" for line in wrap(bw.summary, width))
    if hardware:
        lines.append(hardware)
    if bw.config_source:
        lines.append(f"[dim]inputs: {escape(bw.config_source)}[/]")
    return "\n".join(lines)
