"""The roofline panel's lines: analytic bandwidth against the peak, the ceilings, the speed-up terms."""

from __future__ import annotations

from textual.markup import escape

from mtpwatch.render.numbers import fixed
from mtpwatch.session.views import BandwidthView, clock_note, method_name, window_words
from mtpwatch.ui.pack import Group, cell_width, fit, pack, wrap


def render_bandwidth_short(bw: BandwidthView, window: str = "", *, clock_noted: bool = False) -> str:
    """Bandwidth against the peak in one phrase: `BW 58 % of 273 GB/s (analytic, 10 s)` (while
    decoding, over the `window`, as the roofline's head line says it; no window given: none said).
    `clock_noted`: the pane says `sim ×N clock` elsewhere (80×24: its bottom border), not here."""
    if bw.peak_gbps is None or bw.ceiling_baseline_tok_s is None:
        return "BW — [dim](no model config)[/]" if bw.peak_gbps is not None else "BW — [dim](peak ?)[/]"
    if bw.percent_of_peak is None:
        return f"BW — [dim]of {bw.peak_gbps:.0f} GB/s (idle)[/]"
    label = f"analytic, {window_words(window)}" if window else "analytic"
    text = f"BW [b]{bw.percent_of_peak:.0f} %[/] of {bw.peak_gbps:.0f} GB/s [dim]({label})[/]"
    if bw.clock_speed != 1.0:  # F1 and the roofline panel say why in full
        text += "" if clock_noted else f" [$text-warning](sim ×{bw.clock_speed:g} clock)[/]"
    elif bw.past_peak:
        text += " [$text-warning](> peak: check --model-config/--gpu)[/]"
    return text


def bandwidth_figure(bw: BandwidthView, *, clock_noted: bool = False) -> str | None:
    """`BW 58 % of 273 GB/s`: `render_bandwidth_short` without its label, where that phrase has no
    note (a known share of the peak, no clock or peak warning); None otherwise."""
    short = render_bandwidth_short(bw, clock_noted=clock_noted)
    figure = short.removesuffix(" [dim](analytic)[/]")
    return figure if figure != short else None


def render_roofline_hidden(bw: BandwidthView, width: int | None = None) -> str:
    """The numbers' last line when an A/B pane's roofline block gave its rows to the answer."""
    short, why = render_bandwidth_short(bw), "[dim]roofline hidden: too few rows[/]"
    return fit(
        f"{short} · {why}", width, lambda: [Group((short,)), Group(("[dim]roofline: too few rows[/]",))]
    )


def render_bandwidth(
    bw: BandwidthView, window: str = "", width: int | None = None, *, method: str | None = None
) -> str:
    """Roofline panel: analytic GB/s and % of peak, ceilings, the three terms, summary, hardware line.

    Where the bandwidth line does not fit `width` (an A/B pane at 160 columns), every line takes
    shorter words and wraps between its labelled parts (`ui.pack.fit`), the GPU and its peak move
    to the first line, and the summary gives way to its few-word head (`BandwidthView.regime`)
    beside the terms (its figures are the bandwidth line's, what binds and why the terms line's).
    Only plain decoding (k = 0) when idle keeps it: there it says the bytes a step reads.
    """
    if bw.peak_gbps is None or bw.ceiling_baseline_tok_s is None:
        head = "roofline [dim]— " + escape(bw.note or "no model config known") + "[/]"
        return "\n".join([head, *_hardware(bw, width)])
    w = window_words(window or "10 s")
    gpu = escape(bw.gpu or "GPU ?")
    bandwidth = _bandwidth_line(bw, w, gpu)
    narrow = width is not None and cell_width(bandwidth) > width
    regime = escape(bw.regime) if narrow else ""
    lines = [_head_line(bw, w, gpu, width if narrow else None)]
    if bw.effective_gbps is not None:
        src = "[dim](analytic, while decoding)[/]"
        gbps, pct = (
            f"bandwidth [b]{bw.effective_gbps:.0f} GB/s[/]",
            f"[b]{fixed(bw.percent_of_peak, 0)} %[/] of peak",
        )
        one = Group((f"{gbps} = {pct}",), src)
        lines.append(fit(bandwidth, width, lambda: [one], lambda: [Group((gbps, pct), src)]))
        note = clock_note(bw)
        if note:  # a figure past the physical peak says why, next to it
            lines.extend(f"[$text-warning]{escape(line)}[/]" for line in wrap(note, width))
    else:
        idle = [Group(("bandwidth —",), "[dim](idle: no steps in the window)[/]")]
        lines.append(fit(bandwidth, width, lambda: idle))
    lines.append(_ceiling_line(bw, method, width))
    if bw.k and bw.acceptance_term is not None and bw.bandwidth_term is not None:
        lines.append(_terms_line(bw, width, regime))
    elif not bw.k:
        none = "[dim]speed-up terms: none (plain decoding, k = 0)[/]"
        lines.append(
            fit(f"{none} · {regime}", width, lambda: [Group((none,)), Group((regime,))]) if regime else none
        )
    # Narrow (docstring): an idle summary's rows, held after it, would take the answer's.
    if bw.summary and not (narrow and (bw.k or regime)):
        lines.extend(f"[i]{escape(line)}[/]" for line in wrap(bw.summary, width))
    lines.extend(_hardware(bw, width))
    if bw.config_source:
        parts = bw.config_source.split(" · ")
        inputs = tuple(f"[dim]{'inputs: ' * (i == 0)}{escape(part)}[/]" for i, part in enumerate(parts))
        lines.append(fit(f"[dim]inputs: {escape(bw.config_source)}[/]", width, lambda: [Group(inputs)]))
    return "\n".join(lines)


def _head_line(bw: BandwidthView, w: str, gpu: str, width: int | None) -> str:
    """`roofline (analytic, 10 s) · KV context 284 tokens (…)`; with a `width` (a narrow panel), the
    GPU and its peak, which the short bandwidth line leaves out, named after `roofline`."""
    label = f"[dim](analytic, {w})[/]"
    context: tuple[Group, ...] = ()
    full = f"roofline {label}"
    if bw.context_tokens is not None:
        source = f"[dim]({escape(bw.context_source)})[/]"
        tokens = f"KV context {bw.context_tokens:,} tokens"
        full += f" · {tokens} {source}"
        context = (Group((tokens,), source),)
    if width is None:
        return full
    peak = f"{gpu} {bw.peak_gbps:.0f} GB/s peak"
    return pack([Group(("roofline", peak), label), *context], width)


def _bandwidth_line(bw: BandwidthView, w: str, gpu: str) -> str:
    """The bandwidth line in full: GB/s and % of the GPU's peak, or idle."""
    if bw.effective_gbps is None:
        return f"bandwidth — [dim](idle: no steps in the window) · {gpu}'s peak {bw.peak_gbps:.0f} GB/s[/]"
    return (
        f"bandwidth [b]{bw.effective_gbps:.0f} GB/s[/] = [b]{fixed(bw.percent_of_peak, 0)} %[/] "
        f"of {gpu}'s {bw.peak_gbps:.0f} GB/s peak [dim](analytic, while decoding, {w})[/]"
    )


def _ceiling_line(bw: BandwidthView, method: str | None, width: int | None) -> str:
    """`ceiling baseline 29.3 tok/s · MTP at τ 2.21: 64.5 tok/s · now 38.5 tok/s = 60 % of it`."""
    base = f"[b]{bw.ceiling_baseline_tok_s:.1f}[/]"
    full, short = f"ceiling baseline {base} tok/s", [f"ceiling tok/s: baseline {base}"]
    if bw.k and bw.ceiling_spec_tok_s is not None:
        tau = fixed(bw.tau, 2)
        assumed = bw.tau_source != "measured"
        name, ceiling = f"{method_name(method)} at τ {tau}", f"[b]{bw.ceiling_spec_tok_s:.1f}[/]"
        src = " [dim](assumed: all drafts accepted)[/]" if assumed else ""
        full += f" · {name}{src}: {ceiling} tok/s"
        short.append(f"{name}{' [dim](assumed: τ = k + 1)[/]' if assumed else ''}: {ceiling}")
    warning: tuple[Group, ...] = ()
    if bw.tok_s and bw.pct_of_ceiling is not None:
        full += f" · now {bw.tok_s:.1f} tok/s = [b]{bw.pct_of_ceiling:.0f} %[/] of it"
        short.append(f"now {bw.tok_s:.1f} = [b]{bw.pct_of_ceiling:.0f} %[/] of it")
        if bw.past_ceiling:
            why = "[$text-warning](more tokens per step than the window's τ: windows differ)[/]"
            full += f" {why}"
            warning = (Group((why,)),)
    return fit(full, width, lambda: [Group(tuple(short)), *warning])


def _terms_line(bw: BandwidthView, width: int | None, regime: str) -> str:
    """`speed-up ≤ min(acceptance 1+α·k 2.21 · bandwidth 2.20 · compute —) = 2.20× → acceptance binds`."""
    assert bw.acceptance_term is not None and bw.bandwidth_term is not None
    full_terms: list[str] = []
    short_terms: list[str] = []
    for name, label, value in (
        ("acceptance", "acceptance 1+α·k", bw.acceptance_term),
        ("bandwidth", "bandwidth", bw.bandwidth_term),
        ("compute", "compute", bw.compute_term),
    ):
        for terms, text in (
            (full_terms, f"{label} {fixed(value, 2)}"),
            (short_terms, f"{name} {fixed(value, 2)}"),
        ):
            terms.append(f"[b reverse $accent] {text} [/]" if name == bw.binding else text)
    bound = min(v for v in (bw.acceptance_term, bw.bandwidth_term, bw.compute_term) if v is not None)
    why = ""
    if bw.binding == "acceptance" and bw.bandwidth_term < bw.acceptance_term:
        # The bandwidth term is τ · bytes_0/bytes_k: within 2 % of τ the drafter is effectively free.
        extra = 100.0 * (bw.acceptance_term / bw.bandwidth_term - 1.0)
        why = f" [dim](drafts add {extra:.0f} % bytes)[/]"
    binds = f"[b]{escape(bw.binding)}[/] binds{why}"
    full = "speed-up ≤ min(" + " · ".join(full_terms) + f") = {bound:.2f}× → {binds}"
    # the terms as items, which `pack` splits between where the width is short: read as one formula
    head = (f"speed-up ≤ min({short_terms[0]}", short_terms[1], f"{short_terms[2]}) = {bound:.2f}×")
    tail = (f"→ {binds}", *([regime] if regime else []))
    return fit(full + (f" · {regime}" if regime else ""), width, lambda: [Group(head), Group(tail)])


def _hardware(bw: BandwidthView, width: int | None) -> list[str]:
    """The hardware reading line (GPM, memory busy, or why none), wrapped to `width`."""
    return [f"[dim]{escape(line)}[/]" for line in wrap(bw.hardware, width)] if bw.hardware else []
