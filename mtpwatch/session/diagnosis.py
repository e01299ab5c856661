"""Diagnoses: what the numbers on screen say about speculation, decided in one place from all of them.

Two sentences are made here and nowhere else: a server panel's verdict (`make_verdict`) and the
warnings under the A/B speed-up line (`ab_warnings`). Each is decided from all the evidence the
screen shows beside it, never from one number alone (issue 40, item 3):

- **Acceptance rate, mean length and per-position together.** The rate Δaccepted / Δdraft_tokens
  falls as k grows even with a healthy drafter: vLLM drafts k tokens per verify step, so the rate
  is (mean length − 1) / k, the mean of the k marginal per-position rates (`core.metrics.formulas`,
  after vLLM's `SpecDecodingLogging.log()` in vllm/v1/spec_decode/metrics.py). At k=64 a drafter
  whose position 1 accepts 69 % and whose mean length is 2.55 has a rate of 2.4 %. A drafter that
  disagrees with its target shows it at position 1 (and in a mean length near 1), so "drafter and
  target disagree" is said only when position 1 (or, without per-position counters, the mean
  length) says so; a low rate with a good position 1 is blamed on k, with the position where
  acceptance falls under `LOW_ACCEPTANCE`.
- **The models of both arms.** Two arms serving different models compare the models, not
  speculation on and off: the A/B line says so (`model_warnings`, bench's rule) and then makes no
  guess about why speculation is slower.
- **Answer length and how much was measured.** A verdict over fewer than `MIN_DRAFTS` drafts, or a
  speed-up over fewer than `MIN_PROMPTS` prompts, starts with "hint": the evidence is thin.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from mtpwatch.core.provenance import arm_warnings
from mtpwatch.session.views import BandwidthView, ServerView, VerdictLevel, method_name, window_words

MIN_DRAFTS = 50
"""Drafts needed before a verdict is more than a hint (fewer is noise or warm-up)."""

LOW_ACCEPTANCE = 0.05
"""Position-1 acceptance (or, without per-position counters, acceptance rate) under which the
drafter disagrees with its target; also the marginal acceptance past which positions add little."""

LOW_MEAN_LENGTH = 1.2
"""Mean acceptance length (tokens per verify step) under which drafting costs more than it saves."""

MIN_PROMPTS = 3
"""Prompts on both arms before the A/B line's diagnosis is more than a hint."""

SHORT_ANSWER = 64
"""Completion tokens under which an answer is short: its prefill and the drafter's warm-up weigh
more than the decode steps speculation shortens."""

DRAFTER_MISMATCH = "drafter and target disagree — check you pair an -it target with its -it assistant"

MTP_SLOWER = "is slower here"
"""The head of the A/B line's warning when speculation loses (`ab_warnings` adds the name and why)."""

PART = " · "
"""Between the parts of an A/B warning: the line wraps there, not inside a part (`ui.pack`)."""


def hint(thin: bool) -> str:
    """'hint: ' where the evidence is thin, else ''."""
    return "hint: " if thin else ""


def make_verdict(
    *,
    method: str | None = None,
    speculative: bool | None,
    acceptance_rate: float | None,
    mean_acceptance_length: float | None,
    drafts: float | None,
    bandwidth: BandwidthView,
    window: str,
    k: int | None = None,
    per_position: Sequence[float] = (),
) -> tuple[str, VerdictLevel]:
    """Whether speculation pays off on this server, in one sentence (see the module): known failure
    signatures first (a drafter that disagrees, a k too large for it, a mean length under
    `LOW_MEAN_LENGTH`), then the analytic ceilings when the roofline is known."""
    where = f"(server, {window_words(window)})"
    name = method_name(method)
    if speculative is False:
        return "no speculation: this server is the baseline", "info"
    if speculative is None:
        return "", "info"
    if not drafts and acceptance_rate is None:
        return f"{name}: no drafts yet {where} — send a prompt", "info"
    # drafts is None when only the acceptance rate is known (llama.cpp timings beside other traffic)
    thin = drafts is None or drafts < MIN_DRAFTS
    evidence = f"over {drafts:.0f} drafts" if drafts is not None else "drafts not counted"
    tau = mean_acceptance_length
    low = _low_acceptance(name, acceptance_rate, tau, k, per_position, evidence, where)
    if low is not None:
        text, level = low
        return hint(thin) + text, ("warn" if thin and level == "bad" else level)
    if tau is not None and tau < LOW_MEAN_LENGTH:
        return (
            f"{hint(thin)}{name} barely helps: {tau:.2f} tokens per verify step (< {LOW_MEAN_LENGTH}) "
            f"{where}; drafting costs more than it saves",
            "warn",
        )
    text, level = _roofline_verdict(name, tau, bandwidth, where)
    return hint(thin and level != "info") + text, level


def _low_acceptance(
    name: str,
    rate: float | None,
    tau: float | None,
    k: int | None,
    per_position: Sequence[float],
    evidence: str,
    where: str,
) -> tuple[str, VerdictLevel] | None:
    """The verdict of a low acceptance, from the rate, position 1 and the mean length together."""
    if per_position and rate is not None and per_position[0] < rate - 1e-9:
        # Position 1 accepts at least the mean rate (the rate is the mean of the positions): one
        # below it is another source's (llama.cpp's counters beside its request timings); set aside.
        per_position = ()
    first = per_position[0] if per_position else None
    if first is not None:
        disagree = first < LOW_ACCEPTANCE
    else:  # no per-position counters: only a mean length near 1 tells a mismatch from a large k
        disagree = rate is not None and rate < LOW_ACCEPTANCE and (tau is None or tau < LOW_MEAN_LENGTH)
    if disagree:
        pos1 = f", position 1 accepts {100 * first:.0f} %" if first is not None else ""
        shown = f"{100 * rate:.1f} % of drafts accepted" if rate is not None else "acceptance near 0"
        return f"{name} is failing: {shown}{pos1} {evidence} {where}: {DRAFTER_MISMATCH}", "bad"
    if rate is None or rate >= LOW_ACCEPTANCE:
        return None
    useful = sum(1 for v in per_position if v >= LOW_ACCEPTANCE)
    pos1 = f"position 1 accepts {100 * first:.0f} %, " if first is not None else ""
    length = f"{tau:.2f} tokens per verify step" if tau is not None else "mean length ?"
    past = f"; positions past {useful} accept under {100 * LOW_ACCEPTANCE:.0f} %" if per_position else ""
    k_words = f"k={k}" if k else "k"
    return (
        f"{name}'s drafter agrees ({pos1}{length}) but {k_words} is larger than it can use: "
        f"{100 * rate:.1f} % of drafts accepted {evidence}{past} {where}; a smaller k drafts less",
        "warn",
    )


def _roofline_verdict(
    name: str, tau: float | None, bw: BandwidthView, where: str
) -> tuple[str, VerdictLevel]:
    """The verdict from the analytic ceilings with and without speculation (the bandwidth term)."""
    if bw.bandwidth_term is not None and bw.ceiling_baseline_tok_s and bw.ceiling_spec_tok_s:
        ratio = bw.bandwidth_term
        ceilings = f"{bw.ceiling_spec_tok_s:.0f} vs {bw.ceiling_baseline_tok_s:.0f} tok/s"
        if ratio >= 1.1:
            return (
                f"{name} is paying off: τ {_tau(tau)} tokens/step lifts the bandwidth ceiling "
                f"{ratio:.2f}× over the baseline's ({ceilings}, analytic) {where}",
                "good",
            )
        if ratio >= 1.0:
            return (
                f"{name} is break-even: its ceiling is only {ratio:.2f}× the baseline's ({ceilings}) {where}",
                "warn",
            )
        return (
            f"{name} costs more than it brings: its ceiling is {ratio:.2f}× the baseline's ({ceilings}); "
            f"the step's extra bytes outweigh {_tau(tau)} tokens per step {where}",
            "bad",
        )
    return f"{name}: {_tau(tau)} tokens per verify step {where}; no roofline to compare with", "info"


def model_warnings(models: tuple[str | None, str | None]) -> list[str]:
    """`core.provenance.arm_warnings`' line when the two arms serve different models (bench's rule);
    [] when they serve one, or either is unknown. The k advisor is withheld then: it prices k for
    one model's drafter against the same model without one."""
    return arm_warnings({"a": {"model": models[0]}, "b": {"model": models[1]}})


def ab_arms(views: Sequence[ServerView | None]) -> tuple[int, int, str | None]:
    """(baseline index, speculating index, its method's name) of the A/B ratio when exactly one arm
    speculates (its counters say so), else (0, 1, None): B over A."""
    spec = [v.speculative if v is not None else None for v in views]
    if spec not in ([False, True], [True, False]):
        return 0, 1, None
    mtp = spec.index(True)
    view = views[mtp]
    return 1 - mtp, mtp, method_name(view.method) if view is not None and view.method else "spec"


def ab_warnings(
    speedups: Sequence[float],
    *,
    method: str | None,
    race: bool,
    models: tuple[str | None, str | None],
    tokens: tuple[int, int] = (0, 0),
) -> tuple[str, ...]:
    """The warnings under the A/B speed-up line, from all of its evidence (see the module).

    `speedups` are the prompts' speculating/baseline decode ratios so far (the last `MIN_PROMPTS`
    decide), `method` the speculating arm's method ('MTP') when exactly one arm speculates (else
    None: no diagnosis of who is slower), `models` the model each arm serves and `tokens` the last
    answers' lengths. In a race the arms contend: no diagnosis.
    """
    differ = model_warnings(models)
    if differ:
        return tuple(w.replace(": ", PART, 1) for w in differ)
    recent = list(speedups[-MIN_PROMPTS:])
    if race or method is None or not recent or statistics.median(recent) >= 1.0:
        return ()
    thin = len(recent) < MIN_PROMPTS
    count = f" ({len(recent)} prompt{'s' if len(recent) != 1 else ''})" if thin else ""
    shortest = min(tokens)
    if 0 < shortest < SHORT_ANSWER:
        why = f"short answers ({shortest} tokens): prefill and warm-up outweigh the steps saved"
    else:
        why = "drafting or MoE expert union costs more? see the roofline"
    return (f"{hint(thin)}{method} {MTP_SLOWER}{count}{PART}{why}",)


def _tau(x: float | None) -> str:
    """τ in the verdict sentence: two decimals, or a dash when unknown."""
    return "—" if x is None else f"{x:.2f}"
