"""One server's answer to a console prompt, and the lossless line that compares two answers."""

from __future__ import annotations

from dataclasses import dataclass

from textual.markup import escape

from mtpwatch.core.ab.lossless import compare_outputs as compare_outputs_core
from mtpwatch.ui.view import PromptSummary


@dataclass(frozen=True, slots=True)
class Answer:
    """One server's answer to one console prompt."""

    summary: PromptSummary
    """The summary line."""
    text: str = ""
    """Full output text."""
    token_ids: tuple[int, ...] | None = None
    """Output token ids when the server sent them."""


def compare_outputs(a: Answer, b: Answer) -> str:
    """The lossless line (markup): 'outputs identical' or where A and B first diverge.

    Token ids are compared when both servers sent them, else the texts.
    """
    if a.summary.error or b.summary.error or a.summary.cancelled or b.summary.cancelled:
        return "[dim]lossless check: — (an answer failed or was cancelled)[/]"
    d = compare_outputs_core(a, b)
    if d.compared == "token_ids":
        ids_a, ids_b = a.token_ids or (), b.token_ids or ()
        i = d.token_index
        if i is None:
            return f"[$success]lossless: outputs identical[/] ({len(ids_a)} token ids, temperature 0)"
        if i < min(len(ids_a), len(ids_b)):
            return f"[$error]lossless: outputs differ at token {i + 1}[/] (id {ids_a[i]} vs {ids_b[i]})"
        return f"[$warning]lossless: identical for {i} tokens, then one answer is longer[/]"
    ta, tb = a.text, b.text
    j = d.char_index
    if j is None:
        return f"[$success]lossless: outputs identical[/] ({len(ta)} characters, temperature 0)"
    context = ta[max(0, j - 20) : j].replace("\n", " ")
    return (
        f"[$error]lossless: outputs differ at character {j + 1}[/] after “{escape(context)}”: "
        f"{escape(repr(ta[j : j + 8]))} vs {escape(repr(tb[j : j + 8]))}"
    )
