"""One server's answer to a console prompt (its text, token ids and summary line's numbers)."""

from __future__ import annotations

from dataclasses import dataclass

from mtpwatch.session.views import PromptSummary


@dataclass(frozen=True, slots=True)
class Answer:
    """One server's answer to one console prompt."""

    summary: PromptSummary
    text: str = ""
    token_ids: tuple[int, ...] | None = None
    """Output token ids when the server sent them."""
