"""The console's generation: one prompt streamed into the answer panes of a monitor's servers."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from mtpwatch.session.sources import Source
from mtpwatch.session.views import Answer
from mtpwatch.ui.widgets.server_panel import ServerPanel


async def stream_prompt(
    prompt: str, panels: Sequence[ServerPanel], sources: Sequence[Source], order: list[int], *, race: bool
) -> dict[int, Answer]:
    """Stream `prompt` to the arms in `order`, one after the other (both at once in a `race`), each
    into its panel's answer pane with its summary line. Cancelled, every arm not done yet gets its
    partial answer, marked cancelled."""
    answers: dict[int, Answer] = {}
    try:
        for i in order:
            panels[i].begin_answer(prompt)

        async def one(i: int) -> None:
            answers[i] = await sources[i].generate(prompt, panels[i].stream.feed)
            panels[i].add_summary(answers[i].summary)

        if race:
            await asyncio.gather(*(one(i) for i in order))
        else:
            for i in order:
                await one(i)
    except asyncio.CancelledError:
        for i in order:
            if i not in answers:
                answers[i] = sources[i].cancelled_answer()
                panels[i].add_summary(answers[i].summary)
        raise
    return answers
